"""Blocks on disk: Arrow files written a batch at a time, read back memory-mapped.

:class:`BlockSequence` is what the training loop sees: ``len(x)``, ``x[i]`` (a dict of plain
Python lists and ints, made on demand), ``x.__getitems__(indices)`` (a batch of rows in one
read, as numpy views: what the training stream and DataLoaders use), slices and ``+`` (both
views, nothing copied). The
operating system pages the blocks in and out, so a corpus larger than memory trains as well
as a small one. The files are Arrow IPC streams, the format ``datasets`` uses:
``datasets.Dataset.from_file(path)`` opens them too.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

if TYPE_CHECKING:
    from tokenmask.blocks.pack import Block

SCHEMA = pa.schema(
    [
        ("input_ids", pa.list_(pa.int32())),
        ("word_ids", pa.list_(pa.int32())),  # per block from 0, -1 on frame tokens
        ("id", pa.int64()),
    ]
)
PHRASE_SCHEMA = SCHEMA.append(pa.field("merged_word_ids", pa.list_(pa.int32()))).append(
    pa.field("term_mask", pa.list_(pa.int32()))
)
"""Blocks packed with phrases (PMI n-grams, terms) carry two more columns."""


class BlockWriter:
    """Append blocks to an Arrow file, ``batch_blocks`` per record batch.

    Use as a context manager; :meth:`close` writes what is buffered. With ``phrases``, blocks
    carry ``merged_word_ids`` and ``term_mask`` (:data:`PHRASE_SCHEMA`).
    """

    def __init__(self, path: Path, *, batch_blocks: int = 1024, phrases: bool = False) -> None:
        self.path = Path(path)
        self.batch_blocks = batch_blocks
        self.schema = PHRASE_SCHEMA if phrases else SCHEMA
        self._sink = pa.OSFile(str(self.path), "wb")
        self._writer = pa.ipc.new_stream(self._sink, self.schema)
        self._buffer: list[Block] = []

    def write(self, blocks: Iterable[Block]) -> None:
        for block in blocks:
            self._buffer.append(block)
            if len(self._buffer) == self.batch_blocks:
                self._flush()

    def _flush(self) -> None:
        if self._buffer:
            columns = [
                _int32_lists([b["input_ids"] for b in self._buffer]),
                _int32_lists([b["word_ids"] for b in self._buffer]),
                pa.array([b["id"] for b in self._buffer], type=pa.int64()),
            ]
            if self.schema is PHRASE_SCHEMA:
                columns.append(_int32_lists([b["merged_word_ids"] for b in self._buffer]))
                columns.append(_int32_lists([b["term_mask"] for b in self._buffer]))
            self._writer.write_batch(pa.RecordBatch.from_arrays(columns, schema=self.schema))
            self._buffer = []

    def close(self) -> None:
        self._flush()
        self._writer.close()
        self._sink.close()

    def __enter__(self) -> BlockWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _int32_lists(rows: list[list[int]]) -> pa.Array:
    """``list<int32>`` array from one flat buffer and offsets: much faster than ``pa.array(rows)``."""
    lengths = np.fromiter((len(r) for r in rows), dtype=np.int32, count=len(rows))
    offsets = np.zeros(len(rows) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    values = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int32, count=int(offsets[-1]))
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))


class _Column:
    """One column of a block table as numpy views, chunk by chunk: rows read with no Arrow call."""

    def __init__(self, column: pa.ChunkedArray) -> None:
        lengths = [len(chunk) for chunk in column.chunks]
        self.starts = np.cumsum([0, *lengths])  # first row of each chunk, then the total
        self.lists = pa.types.is_list(column.type)
        if self.lists:
            self.parts = [(chunk.offsets.to_numpy(), chunk.values.to_numpy()) for chunk in column.chunks]
        else:
            self.values = column.to_numpy()

    @classmethod
    def of(cls, blocks: BlockSequence, name: str) -> _Column:
        """``blocks``' column ``name``, built on first use and kept with the sequence."""
        cache: dict[str, _Column] = blocks.__dict__.setdefault("_columns", {})
        if name not in cache:
            cache[name] = cls(blocks.table.column(name))
        return cache[name]

    def rows(self, positions: np.ndarray) -> list[Any]:
        """The values at ``positions`` (non-negative, in range): arrays for list columns, ints otherwise."""
        if not self.lists:
            return self.values[positions].tolist()
        chunks = np.searchsorted(self.starts, positions, side="right") - 1
        out = []
        for chunk, row in zip(chunks.tolist(), (positions - self.starts[chunks]).tolist()):
            offsets, values = self.parts[chunk]
            out.append(values[offsets[row] : offsets[row + 1]])
        return out


def shift_ids(path: Path, offset: int) -> None:
    """Add ``offset`` to the ``id`` of every block in the Arrow file at ``path``, in place.

    Only the id column's bytes are rewritten (8 a block, next to 1,024 of tokens at 128 a
    block), so a shard written with ids from 0 takes its place in a sequence of shards once the
    blocks before it are counted, without copying its tokens.
    """
    if offset == 0:
        return
    with pa.memory_map(str(path)) as source, open(path, "r+b") as target:
        mapped = source.read_buffer()  # the whole file; the record batches below are views of it
        for batch in pa.ipc.open_stream(mapped):
            ids = batch.column("id")
            data = ids.buffers()[1]
            if data is None or len(ids) == 0:
                continue
            values = np.frombuffer(data, dtype=np.int64, count=len(ids), offset=ids.offset * 8)
            position = data.address - mapped.address + ids.offset * 8
            if not 0 <= position <= mapped.size - values.nbytes:
                raise ValueError(f"{path}: the id column is not where the file's batches say it is")
            target.seek(position)
            target.write((values + offset).tobytes())


def read_blocks(path: Path) -> Iterator[Block]:
    """The blocks of an Arrow file in order, one record batch in memory at a time."""
    with pa.memory_map(str(path)) as source:
        for batch in pa.ipc.open_stream(source):
            yield from batch.to_pylist()


class BlockSequence(Sequence[dict[str, Any]]):
    """A read-only sequence of blocks backed by an Arrow table (usually memory-mapped).

    ``x[i]`` -> ``{"input_ids": [...], "word_ids": [...], "id": 7}``; ``x[:n]``, ``x[::2]`` and
    ``x + y`` give BlockSequences over the same memory. Mutating a returned dict changes
    nothing stored.
    """

    def __init__(self, table: pa.Table) -> None:
        if not (table.schema.equals(SCHEMA) or table.schema.equals(PHRASE_SCHEMA)):
            raise ValueError(f"not a block table: schema {table.schema} != {SCHEMA}")
        self.table = table

    @classmethod
    def open(cls, *paths: Path, phrases: bool = False) -> BlockSequence:
        """Memory-map the Arrow files at ``paths`` (written by :class:`BlockWriter`): one
        sequence of their blocks, in order, nothing copied (a cache entry's shards).

        No path gives an empty sequence, of blocks with phrase columns when ``phrases``.
        """
        tables = []
        for path in paths:
            with pa.memory_map(str(path)) as source:
                tables.append(pa.ipc.open_stream(source).read_all())
        if not tables:
            return cls((PHRASE_SCHEMA if phrases else SCHEMA).empty_table())
        return cls(tables[0] if len(tables) == 1 else pa.concat_tables(tables))

    def __len__(self) -> int:
        return self.table.num_rows

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> BlockSequence: ...

    def __getitem__(self, index: int | slice) -> dict[str, Any] | BlockSequence:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step == 1:
                return BlockSequence(self.table.slice(start, max(0, stop - start)))
            return BlockSequence(self.table.take(pa.array(range(start, stop, step), type=pa.int64())))
        position = index + len(self) if index < 0 else index
        if not 0 <= position < len(self):
            raise IndexError(f"block index {index} out of range for {len(self)} blocks")
        return self.table.slice(position, 1).to_pylist()[0]

    def __getitems__(self, indices: Sequence[int]) -> list[dict[str, Any]]:
        """The blocks at ``indices``; token columns come as read-only int32 numpy views of the
        mapped file, never as Python lists (torch's DataLoader calls this for a batch when a
        dataset has it; the training stream does too).

        ``x.__getitems__([3, 0])  ->  [{"input_ids": array([...], dtype=int32), ..., "id": 3}, {...}]``

        Raises:
            IndexError: an index outside ``[-len(x), len(x))``.
        """
        positions = np.asarray(indices, dtype=np.int64)
        if positions.size and (positions.min() < -len(self) or positions.max() >= len(self)):
            raise IndexError(f"block indices out of range for {len(self)} blocks")
        positions = np.where(positions < 0, positions + len(self), positions)
        columns = {name: _Column.of(self, name).rows(positions) for name in self.table.column_names}
        return [dict(zip(columns, row)) for row in zip(*columns.values())]

    def __getstate__(self) -> dict[str, Any]:
        return {"table": self.table}  # the column views are rebuilt where the sequence lands

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for batch in self.table.to_batches(max_chunksize=1024):
            yield from batch.to_pylist()

    def __add__(self, other: object) -> BlockSequence:
        if not isinstance(other, BlockSequence):
            return NotImplemented
        return BlockSequence(pa.concat_tables([self.table, other.table]))

    def token_count(self) -> int:
        """Tokens in all blocks, frame tokens included."""
        lengths = pc.list_value_length(self.table.column("input_ids"))
        return int(pc.sum(lengths).as_py() or 0)

    def __repr__(self) -> str:
        return f"BlockSequence({len(self):,} blocks)"
