"""Micro-batches forever, sharded by data-parallel rank and DataLoader worker.

The examples (usually memory-mapped blocks, :mod:`tokenmask.blocks.store`) are read by index:
each epoch has a seeded order, cut into *global* batches of ``batch_size * world`` examples;
rank ``r`` takes the ``r``-th slice of each, and within a rank DataLoader worker ``w`` of
``n`` collates every ``n``-th micro-batch. The DataLoader hands a rank its workers' batches
in turn, so what a rank trains on, and the masks (a pure function of seed, epoch, example id
and the rate of a micro-batch's step), depend neither on the number of workers nor, taken
together, on the number of ranks. Memory is the examples' mapping plus a few batches in
flight, whatever the corpus size.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from tokenmask.collate.pad import Feature
from tokenmask.collate.rate import RateSchedule


@dataclass(frozen=True)
class Shard:
    """This process's place among the data-parallel processes: ``rank`` of ``world``."""

    rank: int = 0
    world: int = 1

    def __post_init__(self) -> None:
        if not 0 <= self.rank < self.world:
            raise ValueError(f"rank must be in [0, world); got rank {self.rank} of {self.world}")

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @classmethod
    def from_environment(cls) -> Shard:
        """The place ``torchrun`` / ``accelerate launch`` gave this process (``RANK``, ``WORLD_SIZE``); alone: 0 of 1."""
        return cls(int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1)))


class EpochCollator(Protocol):
    """Turns examples into a batch with the masks of an epoch, and optionally a masking rate,
    given as arguments (e.g. :class:`~tokenmask.collate.collator.MaskingCollator`; rate None:
    the collator's own): no state changes over a run, so a collator copied into DataLoader
    workers masks exactly as the original."""

    def collate(self, features: Sequence[Feature], *, epoch: int, mlm_probability: float | None = None) -> dict[str, Any]: ...


def epoch_order(count: int, *, seed: int, epoch: int) -> torch.Tensor:
    """The examples' order in ``epoch``: a permutation of ``range(count)`` fixed by (seed, epoch)."""
    return torch.randperm(count, generator=torch.Generator().manual_seed(seed * 1000 + epoch))


class MicroBatches(IterableDataset):
    """A rank's micro-batches forever, from micro-batch ``skip`` on; new order each epoch.

    Micro-batch ``k`` of rank ``r`` holds ``order[(i * world + r) * batch_size :][:batch_size]``
    where ``i = k mod per_epoch`` and ``per_epoch = len(examples) // (batch_size * world)``:
    every example appears once per epoch in all ranks together, except the fewer than
    ``batch_size * world`` left over by the cut (a different few each epoch).

    ``examples = range(8)``, batch 2, world 2, one epoch's order ``[5, 1, 7, 0, 2, 6, 3, 4]``:
    rank 0 gets ``[5, 1], [2, 6]``, rank 1 ``[7, 0], [3, 4]``.

    Args:
        examples: a sequence of examples (``len`` and ``x[i]``).
        collator: turns a list of examples into a batch with the masks of an epoch
            (:class:`EpochCollator`); the stream passes the epoch and never changes the collator.
        batch_size: examples per micro-batch on each rank.
        seed: decides the order.
        dupe_factor: static masking: the collator gets ``epoch % dupe_factor``; None (dynamic)
            gives it the epoch.
        skip: micro-batches passed over without collating (resuming).
        shard: this process's rank and the world size.
        rate: a masking-rate schedule: micro-batch ``k`` of the run (``skip`` included) is
            masked at ``rate.rate_of(k)``; None: at the collator's own rate.

    Raises:
        ValueError: fewer examples than one global batch.
    """

    def __init__(
        self,
        examples: Sequence[Feature],
        collator: EpochCollator,
        *,
        batch_size: int,
        seed: int,
        dupe_factor: int | None = None,
        skip: int = 0,
        shard: Shard = Shard(),
        rate: RateSchedule | None = None,
    ) -> None:
        self.per_epoch = len(examples) // (batch_size * shard.world)
        if self.per_epoch == 0:
            raise ValueError(
                f"{len(examples)} training examples do not fill one batch of {batch_size}"
                + (f" on each of {shard.world} processes" if shard.world > 1 else "")
            )
        self.examples, self.collator = examples, collator
        self.batch_size, self.seed, self.dupe_factor = batch_size, seed, dupe_factor
        self.skip, self.shard, self.rate = skip, shard, rate

    def indices(self, worker: int = 0, workers: int = 1) -> Iterator[tuple[int, int, list[int]]]:
        """``(number, epoch, example indices)`` of this rank's micro-batches: every ``workers``-th,
        from ``worker``; ``number`` counts the run's micro-batches from 0, the skipped ones included."""
        epoch, offset = divmod(self.skip, self.per_epoch)
        number = self.skip
        while True:
            order = epoch_order(len(self.examples), seed=self.seed, epoch=epoch)
            for index in range(offset, self.per_epoch):
                if (number - self.skip) % workers == worker:
                    start = (index * self.shard.world + self.shard.rank) * self.batch_size
                    yield number, epoch, order[start : start + self.batch_size].tolist()
                number += 1
            epoch, offset = epoch + 1, 0

    def __iter__(self) -> Iterator[dict[str, Any]]:
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        for number, epoch, chosen in self.indices(worker, workers):
            masks_of = epoch % self.dupe_factor if self.dupe_factor else epoch  # static / dynamic masking
            rate = None if self.rate is None else self.rate.rate_of(number)
            yield self.collator.collate(fetch(self.examples, chosen), epoch=masks_of, mlm_probability=rate)


def fetch(examples: Sequence[Feature], indices: list[int]) -> list[Feature]:
    """``[examples[i] for i in indices]``, in one call where the sequence reads batches
    (``__getitems__``, as torch's DataLoader uses: the block store's rows come as numpy views)."""
    getitems = getattr(examples, "__getitems__", None)
    return list(getitems(indices)) if getitems is not None else [examples[i] for i in indices]


def micro_batches(
    stream: IterableDataset, *, workers: int = 0, pin_memory: bool = False, prefetch: int = 4
) -> Iterator[dict[str, Any]]:
    """Iterate ``stream`` (:class:`MicroBatches`, or any stream of collated items) in this
    process (``workers=0``) or collated by DataLoader workers, ``prefetch`` items ahead each
    (into page-locked memory with ``pin_memory``, for non-blocking copies to a GPU).

    With workers, the DataLoader takes one batch from each worker in turn, so the sequence is
    the same as without; the stream (and its collator) is copied into each worker, so what
    changes over a run must be in the stream when it is made (a :class:`RateSchedule` for a
    horizon): a change made afterwards does not reach them.
    """
    if workers == 0:
        return iter(stream)
    # its own generator: the DataLoader draws its workers' base seed from it, not from the global
    # random state (which dropout uses), so a run with workers trains exactly as one without
    loader = DataLoader(
        stream, batch_size=None, num_workers=workers, prefetch_factor=prefetch, generator=torch.Generator(),
        worker_init_fn=_ignore_stop_signals, pin_memory=pin_memory,
    )  # fmt: skip
    return iter(loader)


def _ignore_stop_signals(worker: int) -> None:
    """Ctrl-C and SIGTERM reach a job's whole process group; the training process stops its
    workers itself once it has saved a checkpoint, so the workers must not die first."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
