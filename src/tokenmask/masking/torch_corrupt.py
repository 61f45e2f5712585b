""":mod:`.corrupt` in torch: the same mask / random / keep choices and replacements, where the tensors are.

The :class:`~tokenmask.masking.corrupt.Outcome` codes and the draws (the high half of the
``SELECT`` words, the ``REPLACE`` stream) are the numpy path's; the vocabulary is a
:class:`~tokenmask.masking.torch_vocab.DeviceTables` on the targets' device.
"""

from __future__ import annotations

import torch

from tokenmask.masking.config import IGNORE_INDEX, CorruptionConfig
from tokenmask.masking.corrupt import Outcome
from tokenmask.masking.keys import Stream, threshold32
from tokenmask.masking.torch_keys import high32, stream_bits_at, unit_float
from tokenmask.masking.torch_units import first_positions, unit_starts
from tokenmask.masking.torch_vocab import DeviceTables


def choose_outcomes(
    targets: torch.Tensor, select_bits: torch.Tensor, corruption: CorruptionConfig, units: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`~tokenmask.masking.corrupt.choose_outcomes` in torch: ``(flat, codes)``, ``(N,)``
    int64 target indices and their int8 :class:`Outcome` codes."""
    flat = targets.reshape(-1).nonzero().squeeze(1)
    source = flat
    if corruption.per_unit and units is not None:
        width = targets.shape[1]
        source = flat - flat % width + first_positions(units, unit_starts(units)).reshape(-1)[flat]
    draws = high32(select_bits.reshape(-1)[source])
    codes = torch.full(flat.shape, int(Outcome.KEEP), dtype=torch.int8, device=flat.device)
    codes[draws < threshold32(corruption.mask_replace_prob + corruption.random_replace_prob)] = int(Outcome.RANDOM)
    codes[draws < threshold32(corruption.mask_replace_prob)] = int(Outcome.MASK)
    return flat, codes


def apply_outcomes(
    input_ids: torch.Tensor, flat: torch.Tensor, codes: torch.Tensor, keys: torch.Tensor, vocab: DeviceTables
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`~tokenmask.masking.corrupt.apply_outcomes` in torch: ``(inputs, labels)``, new
    ``(B, T)`` int64 tensors; ``input_ids`` (contiguous) is not modified. ``keys`` are the
    ``(B,)`` row keys of :func:`~tokenmask.masking.torch_keys.row_keys`."""
    at_targets = input_ids.reshape(-1)[flat]
    labels = torch.full_like(input_ids, IGNORE_INDEX)
    labels.view(-1)[flat] = at_targets
    corrupted = torch.where(codes == int(Outcome.MASK), vocab.mask_token_id, at_targets)
    if vocab.replaceable.numel():  # else no target is RANDOM (mask_tokens keeps them)
        rows, cols = flat // input_ids.shape[1], flat % input_ids.shape[1]
        drawn = vocab.draw(unit_float(stream_bits_at(keys, Stream.REPLACE, rows, cols)))
        corrupted = torch.where(codes == int(Outcome.RANDOM), drawn, corrupted)
    inputs = input_ids.clone()
    inputs.view(-1)[flat] = corrupted
    return inputs, labels
