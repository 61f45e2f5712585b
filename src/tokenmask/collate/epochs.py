"""Which epoch's masks a collator's call draws: the epoch it was given, else one it counts.

Masks are a pure function of (seed, epoch, example, position). A collator never told the epoch
would draw the same masks on every pass over the data: static masking, silently, in any loop
that does not call ``set_epoch``. :class:`Epochs` counts the passes instead.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import torch

TRACKED = 1 << 18
"""The most example ids a pass keeps to notice a repeat (about 80 bytes each: 21 MB)."""


class Epochs:
    """The epoch of a collator's calls: the one given to :meth:`set`, else counted from the examples.

    Counted, the epoch starts at 0 and moves on by one when a call holds an example (by id)
    already seen since the last move, so no example meets one epoch's masks twice in a process.
    A pass keeps up to :data:`TRACKED` ids; past that, a repeat is noticed at the first id kept.
    What moves the count, and where counting fails (DataLoader workers, data-parallel ranks,
    resume; the first worker or rank warns): docs/masking.md, "What it guarantees".
    :meth:`set` stops the counting, as ``MaskingCallback`` or a loop calling ``set_epoch`` does.

    Example::

        epochs = Epochs()
        epochs.of(np.array([0, 1])), epochs.of(np.array([2, 3]))  # (0, 0): the first pass
        epochs.of(np.array([1, 0]))  # 1: example 1 came back
    """

    def __init__(self) -> None:
        self.current = 0
        self.given = False
        self._seen: set[int] = set()
        self._looked_in = 0  # the process that looked for workers and ranks: a fork or a copy looks again

    def set(self, epoch: int) -> None:
        """Draw the masks of ``epoch`` from now on, and stop counting.

        Raises:
            ValueError: a negative epoch.
        """
        if epoch < 0:
            raise ValueError(f"epoch must be >= 0; got {epoch}")
        self.current, self.given, self._seen = int(epoch), True, set()

    def of(self, example_ids: np.ndarray) -> int:
        """The epoch for a call on the ``(B,)`` ``example_ids``: the given one, or the count,
        moved on first when one of them was seen since the last move."""
        if self.given:
            return self.current
        if self._looked_in != os.getpid():
            self._looked_in = os.getpid()
            _warn_where_counts_part()
        ids = example_ids.tolist()
        if not self._seen.isdisjoint(ids):
            self.current += 1
            self._seen = set(ids)
        elif len(self._seen) < TRACKED:
            self._seen.update(ids)
        return self.current


def _warn_where_counts_part() -> None:
    """Warn, in the first DataLoader worker or data-parallel rank only, that this process sees a
    part of the calls: counting there cannot make every pass new."""
    worker = torch.utils.data.get_worker_info()
    distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
    if worker is not None and worker.id == 0:
        where = "DataLoader workers: each counts its own calls, and one that is not persistent starts every epoch afresh"
    elif worker is None and distributed and torch.distributed.get_world_size() > 1 and torch.distributed.get_rank() == 0:
        where = "data-parallel ranks: each counts the calls on its own part of the data"
    else:
        return
    warnings.warn(
        f"a tokenmask collator that was never given the epoch counts passes, which fails in {where}, so the "
        "masks may repeat from one epoch to the next; call collator.set_epoch(epoch) before iterating each "
        "epoch (MaskingCallback does it for the Trainer; with persistent_workers=True the workers never see it)",
        UserWarning,
        stacklevel=2,
    )
