""":mod:`.vocab` in torch: a :class:`~tokenmask.masking.vocab.VocabTables`' lookup tables on one device.

Copied there once per vocabulary and device (:func:`device_tables`); the random replacement
draw is :meth:`VocabTables.draw`'s, on the device.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import torch

from tokenmask.masking.vocab import VocabTables


@dataclass(frozen=True)
class DeviceTables:
    """:class:`~tokenmask.masking.vocab.VocabTables` as tensors on one device (the same attributes)."""

    mask_token_id: int
    protected: torch.Tensor  # (V,) bool
    replaceable: torch.Tensor  # (R,) int64
    replace_cdf: torch.Tensor | None  # (R,) float64

    @property
    def size(self) -> int:
        """Number of ids ``V``."""
        return int(self.protected.shape[0])

    def draw(self, uniform: torch.Tensor) -> torch.Tensor:
        """:meth:`VocabTables.draw <tokenmask.masking.vocab.VocabTables.draw>`: replacement ids for
        uniform draws in ``[0, 1)``; same shape, int64."""
        size, cdf = self.replaceable.numel(), self.replace_cdf
        index = (uniform * size).long() if cdf is None else torch.searchsorted(cdf, uniform, right=True)
        return self.replaceable[index.clamp(max=size - 1)]


_TABLES: weakref.WeakKeyDictionary[VocabTables, dict[torch.device, DeviceTables]] = weakref.WeakKeyDictionary()


def device_tables(vocab: VocabTables, device: torch.device) -> DeviceTables:
    """``vocab``'s tables on ``device``, copied there once per vocabulary and device."""
    per_device = _TABLES.setdefault(vocab, {})
    if device not in per_device:
        cdf = None if vocab.replace_cdf is None else torch.as_tensor(vocab.replace_cdf, device=device)
        per_device[device] = DeviceTables(
            vocab.mask_token_id,
            torch.as_tensor(vocab.protected, device=device),
            torch.as_tensor(vocab.replaceable, device=device),
            cdf,
        )
    return per_device[device]
