"""Which epoch's masks a collator's call draws: the epoch it was given, else one it counts.

Masks are a pure function of (seed, epoch, example, position). A collator never told the epoch
would draw the same masks on every pass over the data: static masking, silently, in any loop
that does not call ``set_epoch``. :class:`Epochs` counts the passes instead.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch


class Epochs:
    """The epoch of a collator's calls: the one given to :meth:`set`, else counted from the examples.

    Counted, the epoch starts at 0 and moves on by one when a call holds an example (by id)
    already seen since the last move. A plain loop over a dataset thus draws the masks of
    epochs 0, 1, 2, … on its passes, and no example gets one epoch's masks twice. Examples
    without an ``id`` are known by their tokens, so a repeated text counts as the same example
    and gets new masks too. The ids of the current pass are kept in a set (about 60 bytes an
    example). :meth:`set` stops the counting: from then on the epoch is the given one, as with
    ``MaskingCallback`` or a loop that calls ``set_epoch``.

    A DataLoader worker counts only its own calls, on its own copy of the collator, and a
    worker that is not persistent starts every epoch from the same copy: its masks would repeat
    each epoch. The first worker warns once per process that the epoch should be given.

    Example::

        epochs = Epochs()
        epochs.of(np.array([0, 1])), epochs.of(np.array([2, 3]))  # (0, 0): the first pass
        epochs.of(np.array([1, 0]))  # 1: example 1 came back
    """

    def __init__(self) -> None:
        self.current = 0
        self.given = False
        self._seen: set[int] = set()
        self._looked_for_workers = False

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
        if not self._looked_for_workers:
            self._looked_for_workers = True
            _warn_in_a_worker()
        ids = example_ids.tolist()
        if self._seen.isdisjoint(ids):
            self._seen.update(ids)
        else:
            self.current += 1
            self._seen = set(ids)
        return self.current


def _warn_in_a_worker() -> None:
    """Warn, in the first DataLoader worker only (one line per epoch, not one per worker)."""
    worker = torch.utils.data.get_worker_info()
    if worker is not None and worker.id == 0:
        warnings.warn(
            "a tokenmask collator in DataLoader workers was never given the epoch: each worker starts from "
            "a copy of it, so the masks may repeat from one epoch to the next; call collator.set_epoch(epoch) "
            "before iterating each epoch (MaskingCallback does it for the Trainer)",
            UserWarning,
            stacklevel=2,
        )
