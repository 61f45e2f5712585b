"""Micro-batches of a streamed corpus (``--streaming``): chunk by chunk, with the position after each.

:class:`ChunkBatches` reads a rank's document stream, packs each chunk
(:mod:`tokenmask.blocks.streamed`), shuffles its blocks and collates them into micro-batches;
DataLoader worker ``w`` of ``n`` does every ``n``-th chunk, and the DataLoader hands the chunks
out in turn, so the micro-batches are the same whatever the number of workers. Unlike
:class:`~tokenmask.collate.stream.MicroBatches` (random access to cached blocks), the order is
the stream's, shuffled within a chunk; what a rank trains on depends on the seed and the world
size. :func:`positioned_batches` yields each micro-batch with the :class:`StreamPosition` after
it: what a checkpoint saves, and where a resumed run starts, exactly.

A masking-rate schedule masks each micro-batch at its optimizer step's rate. A worker cannot
tell the step of its chunk's micro-batches (that needs the sizes of all chunks before it,
which other workers pack), so with a schedule the workers pack and shuffle, and
:func:`positioned_batches`, which counts the micro-batches, collates them in the training process.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

import torch
from torch.utils.data import IterableDataset, get_worker_info

from tokenmask.blocks.streamed import chunk_blocks, stream_chunks
from tokenmask.collate.rate import RateSchedule
from tokenmask.collate.stream import EpochCollator, micro_batches

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from tokenmask.text.phrases import Phrases
    from tokenmask.text.streaming import DocumentStream


@dataclass(frozen=True)
class StreamPosition:
    """Where a rank's stream stands: ``batch`` micro-batches of chunk ``chunk`` of ``epoch`` are
    done; that chunk starts at the stream's document ``first_document``."""

    epoch: int = 0
    chunk: int = 0
    first_document: int = 0
    batch: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_dict(cls, state: dict[str, Any]) -> StreamPosition:
        return cls(**{f.name: int(state[f.name]) for f in fields(cls)})


class ChunkBatches(IterableDataset):
    """A rank's chunks forever, from ``start``: each as ``{"epoch", "chunk", "first_document",
    "masks_of", "batches"}``, its blocks shuffled (by seed, epoch and chunk) and taken
    ``batch_size`` at a time (the last micro-batch of a chunk may be smaller): collated, or,
    with a ``rate`` schedule, lists of blocks that :func:`positioned_batches` collates.

    Args:
        stream: the rank's documents (:class:`~tokenmask.text.streaming.DocumentStream`).
        tokenizer: encodes them (a fast tokenizer: word ids).
        collator: masks a micro-batch for an epoch (:class:`~tokenmask.collate.stream.EpochCollator`).
        block_length / phrases: how chunks are packed (:func:`~tokenmask.blocks.streamed.chunk_blocks`).
        batch_size: blocks per micro-batch.
        seed: decides the order within each chunk.
        characters: text per chunk (:func:`~tokenmask.blocks.streamed.stream_chunks`).
        validation_share: documents held out by hash, or None.
        dupe_factor: static masking, as in :class:`~tokenmask.collate.stream.MicroBatches`.
        start: the position to continue from; its chunk is packed again whole.
        rate: a masking-rate schedule (:class:`~tokenmask.collate.rate.RateSchedule`); None:
            the collator's own rate.
    """

    def __init__(
        self,
        stream: DocumentStream,
        tokenizer: PreTrainedTokenizerBase,
        collator: EpochCollator,
        *,
        block_length: int,
        batch_size: int,
        seed: int,
        characters: int,
        validation_share: float | None,
        dupe_factor: int | None = None,
        start: StreamPosition = StreamPosition(),
        phrases: Phrases | None = None,
        rate: RateSchedule | None = None,
    ) -> None:
        self.stream, self.tokenizer, self.collator, self.phrases, self.rate = stream, tokenizer, collator, phrases, rate
        self.block_length, self.batch_size, self.seed = block_length, batch_size, seed
        self.characters, self.validation_share, self.dupe_factor, self.start = characters, validation_share, dupe_factor, start

    def __iter__(self) -> Iterator[dict[str, Any]]:
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        chunks = stream_chunks(
            self.stream, characters=self.characters, validation_share=self.validation_share,
            epoch=self.start.epoch, index=self.start.chunk, first_document=self.start.first_document,
        )  # fmt: skip
        for number, chunk in enumerate(chunks):
            if number % workers != worker:
                continue
            uid = chunk.index * self.stream.world + self.stream.rank
            blocks = chunk_blocks(chunk, self.tokenizer, block_length=self.block_length, uid=uid, phrases=self.phrases)
            order = torch.randperm(len(blocks), generator=torch.Generator().manual_seed(_order_seed(self.seed, chunk.epoch, uid)))
            masks_of = chunk.epoch % self.dupe_factor if self.dupe_factor else chunk.epoch  # static / dynamic masking
            groups = [
                [blocks[i] for i in order[at : at + self.batch_size].tolist()] for at in range(0, len(blocks), self.batch_size)
            ]
            batches = groups if self.rate is not None else [self.collator.collate(group, epoch=masks_of) for group in groups]
            yield {
                "epoch": chunk.epoch, "chunk": chunk.index, "first_document": chunk.first_document, "masks_of": masks_of,
                "batches": batches,
            }  # fmt: skip


def _order_seed(seed: int, epoch: int, uid: int) -> int:
    return ((seed * 1_000_003 + epoch) * 1_000_003 + uid) % (1 << 63)


def positioned_batches(
    chunks: ChunkBatches, *, first: int = 0, workers: int = 0, pin_memory: bool = False
) -> Iterator[tuple[dict[str, Any], StreamPosition]]:
    """Each micro-batch of ``chunks`` from its start position on, with the position after it.

    Chunks come from this process (``workers=0``) or from DataLoader workers (see
    :func:`~tokenmask.collate.stream.micro_batches`); the micro-batches of the start position's
    chunk that it counts as done are passed over. With a ``chunks.rate`` schedule each
    micro-batch is collated here, at the rate of its number in the run: ``first`` for the first
    one yielded (the micro-batches the run took before the start position), then one more each
    (:class:`RatedStream`).
    """
    if chunks.rate is not None:
        yield from RatedStream(chunks, first=first, workers=workers, pin_memory=pin_memory).batches(chunks.rate)
        return
    for batch, _, position in _positioned(chunks, workers=workers, pin_memory=pin_memory):
        yield batch, position


class RatedStream:
    """A rank's streamed micro-batches under a masking-rate schedule: blocks read once, collated
    here, each at its step's rate.

    The rate depends on the schedule's horizon, which a token or time limit fits as the run
    goes. A new horizon is a new :class:`~tokenmask.collate.rate.RateSchedule` for
    :meth:`batches`, which reads on from where the stream stands: the corpus is not read again
    up to the position (a Hub dataset not downloaded again), and the blocks already packed ahead
    are masked at the new rates.

    Args:
        chunks: the rank's chunks, packed and shuffled but not collated (``chunks.rate`` set).
        first: the number in the run of the first micro-batch (those taken before the start position).
        workers, pin_memory: as :func:`positioned_batches`.
    """

    def __init__(self, chunks: ChunkBatches, *, first: int = 0, workers: int = 0, pin_memory: bool = False) -> None:
        if chunks.rate is None:
            raise ValueError("a RatedStream collates blocks that ChunkBatches left uncollated: give it a rate")
        self.collator = chunks.collator
        self.taken = first
        """The run's micro-batches handed out so far (the next one's number)."""
        self._blocks = _positioned(chunks, workers=workers, pin_memory=pin_memory)

    def batches(self, rate: RateSchedule) -> Iterator[tuple[dict[str, Any], StreamPosition]]:
        """The next micro-batches, each collated at ``rate``'s rate for its number, with the position after it."""
        for blocks, masks_of, position in self._blocks:
            batch = self.collator.collate(blocks, epoch=masks_of, mlm_probability=rate.rate_of(self.taken))
            self.taken += 1
            yield batch, position


def _positioned(chunks: ChunkBatches, *, workers: int, pin_memory: bool) -> Iterator[tuple[Any, int, StreamPosition]]:
    """``(micro-batch, masks_of, position after it)`` from ``chunks``' start position on: the
    micro-batch collated, or its list of blocks when ``chunks.rate`` leaves collating to the caller."""
    skip = chunks.start.batch
    for item in micro_batches(chunks, workers=workers, pin_memory=pin_memory, prefetch=2):
        for number in range(skip, len(item["batches"])):
            position = StreamPosition(int(item["epoch"]), int(item["chunk"]), int(item["first_document"]), number + 1)
            yield item["batches"][number], int(item["masks_of"]), position
        skip = 0
