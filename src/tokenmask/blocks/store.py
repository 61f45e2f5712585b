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


def block_schema(*, phrases: bool = False, vocab_size: int | None = None, block_length: int | None = None) -> pa.Schema:
    """The columns of a block file, each token column as narrow as its values allow.

    ``input_ids`` are uint16 when every id is below ``vocab_size`` <= 65,536 (bert-base,
    RoBERTa and ModernBERT vocabularies are), ``word_ids`` (per block from 0, -1 on frame
    tokens) int16 when blocks hold at most ``block_length`` <= 32,768 tokens; int32 otherwise,
    or when the bound is not given. ``id`` is int64. Blocks packed with phrases (PMI n-grams,
    terms) carry ``merged_word_ids`` (as word ids) and ``term_mask`` (int8) too. Two int32
    token columns take 8 bytes a token; the narrow ones 4.
    """
    ids = pa.uint16() if vocab_size is not None and vocab_size <= 2**16 else pa.int32()
    words = pa.int16() if block_length is not None and block_length <= 2**15 else pa.int32()
    fields = [("input_ids", pa.list_(ids)), ("word_ids", pa.list_(words)), ("id", pa.int64())]
    if phrases:
        fields += [("merged_word_ids", pa.list_(words)), ("term_mask", pa.list_(pa.int8()))]
    return pa.schema(fields)


SCHEMA = block_schema()
"""Blocks with int32 token columns (any vocabulary, any length)."""
PHRASE_SCHEMA = block_schema(phrases=True)
"""Blocks packed with phrases (PMI n-grams, terms) carry two more columns."""


class BlockWriter:
    """Append blocks to an Arrow file, ``batch_blocks`` per record batch.

    Use as a context manager; :meth:`close` writes what is buffered. The columns are
    :func:`block_schema`'s for ``phrases``, ``vocab_size`` and ``block_length``; a value that
    does not fit its column raises ``OverflowError``.
    """

    def __init__(
        self,
        path: Path,
        *,
        batch_blocks: int = 1024,
        phrases: bool = False,
        vocab_size: int | None = None,
        block_length: int | None = None,
    ) -> None:
        self.path = Path(path)
        self.batch_blocks = batch_blocks
        self.schema = block_schema(phrases=phrases, vocab_size=vocab_size, block_length=block_length)
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
                pa.array([b["id"] for b in self._buffer], type=pa.int64())
                if field.name == "id"
                else _int_lists([b[field.name] for b in self._buffer], field.type.value_type)  # type: ignore[literal-required]
                for field in self.schema
            ]
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


def _int_lists(rows: list[list[int]], value_type: pa.DataType) -> pa.Array:
    """``list<value_type>`` array from one flat buffer and offsets: much faster than ``pa.array(rows)``.

    Raises:
        OverflowError: a value outside ``value_type``'s range (numpy refuses to wrap it).
    """
    lengths = np.fromiter((len(r) for r in rows), dtype=np.int32, count=len(rows))
    offsets = np.zeros(len(rows) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    values = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int64, count=int(offsets[-1]))
    bounds = np.iinfo(value_type.to_pandas_dtype())
    if values.size and (values.min() < bounds.min or values.max() > bounds.max):
        raise OverflowError(f"values from {values.min()} to {values.max()} do not fit {value_type}")
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values.astype(bounds.dtype)))


class _Column:
    """One column of a block table as numpy views, chunk by chunk: rows read with no Arrow call.

    Token rows come as int32 whatever the column's type: views of an int32 column, copies
    (a row's few hundred bytes) of a narrower one.
    """

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
            out.append(values[offsets[row] : offsets[row + 1]].astype(np.int32, copy=False))
        return out


def _is_block_schema(schema: pa.Schema) -> bool:
    """The columns of :data:`SCHEMA` or :data:`PHRASE_SCHEMA`, token columns of any integer type."""
    if schema.names not in (SCHEMA.names, PHRASE_SCHEMA.names) or not schema.field("id").type.equals(pa.int64()):
        return False
    tokens = [field.type for field in schema if field.name != "id"]
    return all(pa.types.is_list(kind) and pa.types.is_integer(kind.value_type) for kind in tokens)


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
        if not _is_block_schema(table.schema):
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

    def like(self, other: BlockSequence) -> BlockSequence:
        """These blocks with ``other``'s column types, when they are none (an empty side takes
        the types of the other, so that ``+`` joins them); otherwise ``self``."""
        if len(self) or self.table.schema.equals(other.table.schema):
            return self
        return BlockSequence(other.table.schema.empty_table())

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
        return BlockSequence(pa.concat_tables([self.like(other).table, other.like(self).table]))

    def token_count(self) -> int:
        """Tokens in all blocks, frame tokens included."""
        lengths = pc.list_value_length(self.table.column("input_ids"))
        return int(pc.sum(lengths).as_py() or 0)

    def __repr__(self) -> str:
        return f"BlockSequence({len(self):,} blocks)"
