"""Batches of examples of similar length, so that padding per batch wastes few token slots.

Fine-tuning examples stay one row each and vary in length (review snippets run from 3 to
about 80 tokens): padded to a fixed length, most slots are padding; padded per batch, a batch
is as wide as its longest row. Grouping rows of similar length makes that width close to
every row's. Which examples share a batch, and the order of the batches, change every epoch
and depend only on ``(seed, epoch)``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from tokenmask.blocks.pack import batched

DEFAULT_WINDOW = 50
"""Batches' worth of examples sorted together (Hugging Face's ``LengthGroupedSampler`` uses 50)."""


class LengthGroupedBatches:
    """A ``batch_sampler`` for ``torch.utils.data.DataLoader``: lists of example indices.

    Each epoch: shuffle the indices (seeded by ``(seed, epoch)``), cut them into windows of
    ``window * batch_size``, sort each window by length (longest first), cut it into
    batches, shuffle the order of all the batches. A larger window pads less but draws
    batch-mates from a narrower set; ``window=None`` sorts everything at once. With
    ``shuffle=False`` (evaluation) the indices are sorted by length, longest first, the same
    every epoch.

    Every index appears exactly once per epoch (``drop_last`` drops the one short batch).

    Args:
        lengths: tokens per example, e.g. ``[len(e["input_ids"]) for e in examples]``.
        batch_size: examples per batch.
        seed: with the epoch, decides everything random.
        shuffle: False for a fixed, fully sorted order.
        window: batches' worth of examples sorted together; None for all of them.
        drop_last: drop the batch shorter than ``batch_size``, if any.

    Example::

        batches = LengthGroupedBatches([len(e["input_ids"]) for e in data.train], 32, seed=0)
        loader = DataLoader(data.train, batch_sampler=batches, collate_fn=augmenter)
        for epoch in range(epochs):
            batches.set_epoch(epoch)  # new batches, the same for every run with this seed

    Raises:
        ValueError: a batch size or window below 1, a negative seed or length.
    """

    def __init__(
        self,
        lengths: Sequence[int],
        batch_size: int,
        *,
        seed: int = 0,
        shuffle: bool = True,
        window: int | None = DEFAULT_WINDOW,
        drop_last: bool = False,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1; got {batch_size}")
        if window is not None and window < 1:
            raise ValueError(f"window must be >= 1 batch or None (sort everything); got {window}")
        if seed < 0:
            raise ValueError(f"seed must be >= 0; got {seed}")
        self.lengths = np.asarray(lengths, dtype=np.int64).reshape(-1)  # (N,)
        if np.any(self.lengths < 0):
            raise ValueError("lengths must be >= 0")
        self.batch_size = int(batch_size)
        self.seed = int(seed)
        self.shuffle = bool(shuffle)
        self.window = window
        self.drop_last = bool(drop_last)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Use the batches of ``epoch`` from now on."""
        if epoch < 0:
            raise ValueError(f"epoch must be >= 0; got {epoch}")
        self.epoch = int(epoch)

    def __len__(self) -> int:
        n = len(self.lengths)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self.batches())

    def batches(self) -> list[list[int]]:
        """This epoch's batches, in order."""
        n = len(self.lengths)
        if not self.shuffle:
            order = _longest_first(np.arange(n), self.lengths)
            return _cut(order, self.batch_size, self.drop_last)
        generator = np.random.default_rng([self.seed, self.epoch])
        order = generator.permutation(n)
        span = max(n, 1) if self.window is None else self.window * self.batch_size
        windows = [_longest_first(order[i : i + span], self.lengths) for i in range(0, n, span)]
        order = np.concatenate(windows) if windows else order
        batches = _cut(order, self.batch_size, self.drop_last)
        return [batches[i] for i in generator.permutation(len(batches))]


def _longest_first(indices: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``indices`` sorted by length, longest first; ties keep their order (a stable sort)."""
    return indices[np.argsort(-lengths[indices], kind="stable")]


def _cut(order: np.ndarray, batch_size: int, drop_last: bool) -> list[list[int]]:
    batches = list(batched(order.tolist(), batch_size))
    if drop_last and batches and len(batches[-1]) < batch_size:
        batches.pop()
    return batches


def padded_slots(lengths: Sequence[int], batches: Sequence[Sequence[int]]) -> int:
    """Token slots of the batches padded per batch: each batch's size times its longest row.

    ``padded_slots([3, 5, 2], [[0, 1], [2]])  ->  2 * 5 + 1 * 2 = 12``
    """
    sizes = np.asarray(lengths, dtype=np.int64)
    return int(sum(len(batch) * int(sizes[list(batch)].max(initial=0)) for batch in batches))


class DistinctBatches:
    """Shuffled batches in which no two examples share a key (a retrieval pair's positive text), as far as the epoch allows.

    In-batch negatives: another pair's positive is a negative of this pair's query, so two pairs
    with one positive in a batch would teach the query to push its own answer away. Each epoch
    shuffles (by ``seed`` and the epoch), then fills batches in order, swapping in the next
    example of a new key when one repeats. The number of batches is always ``ceil(N / batch_size)``
    (resuming counts on it), so a key may repeat in the epoch's last batches when too few others
    are left; the loss also leaves such duplicates out of the negatives.

    ``keys = [0, 0, 1, 2]``, ``batch_size = 2`` -> e.g. ``[[1, 0], [3, 2]]``: never both 0 and 1 together.
    """

    def __init__(self, keys: Sequence[int], batch_size: int, *, seed: int = 0) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1; got {batch_size}")
        self.keys = np.asarray(keys, dtype=np.int64).reshape(-1)  # (N,)
        self.batch_size = int(batch_size)
        self.seed = int(seed)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Draw the order of ``epoch`` from now on."""
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return -(-len(self.keys) // self.batch_size)

    def batches(self) -> list[list[int]]:
        """This epoch's batches, in order."""
        order = np.random.default_rng([self.seed, self.epoch]).permutation(len(self.keys)).tolist()
        batches: list[list[int]] = []
        for first in range(0, len(order), self.batch_size):
            seen: set[int] = set()
            for slot in range(first, min(first + self.batch_size, len(order))):
                if int(self.keys[order[slot]]) in seen:  # swap in the next example of a new key, if any is left
                    later = next((j for j in range(slot + 1, len(order)) if int(self.keys[order[j]]) not in seen), None)
                    if later is not None:
                        order[slot], order[later] = order[later], order[slot]
                seen.add(int(self.keys[order[slot]]))
            batches.append(order[first : first + self.batch_size])
        return batches
