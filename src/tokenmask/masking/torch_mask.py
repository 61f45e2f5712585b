""":mod:`.mask` in torch: the whole masking pass on tensors where they are.

:func:`mask_on_device` gives what the numpy pass gives, bit for bit, without leaving the
tensors' device: no ``.numpy()``, no host copy of the batch. It syncs with the device where
the output's size depends on the data (the targets' count) and where an input is checked.
:func:`tokenmask.masking.mask.mask_tokens` picks between the two (``backend=``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from tokenmask.masking import torch_units
from tokenmask.masking.config import CorruptionConfig, SelectionConfig, UnitConfig
from tokenmask.masking.keys import Stream
from tokenmask.masking.torch_corrupt import apply_outcomes, choose_outcomes
from tokenmask.masking.torch_keys import low32, row_keys, stream_bits
from tokenmask.masking.torch_select import select_tokens, select_units
from tokenmask.masking.torch_vocab import DeviceTables, device_tables
from tokenmask.masking.units import build_units
from tokenmask.masking.vocab import VocabTables, warn_of_unknown_ids


@dataclass(frozen=True)
class DeviceMasked:
    """What :func:`mask_on_device` found, every tensor on the input's device (see
    :class:`~tokenmask.masking.mask.MaskedBatch` for the meaning of each)."""

    input_ids: torch.Tensor
    labels: torch.Tensor
    target_index: torch.Tensor
    target_outcome: torch.Tensor
    eligible: torch.Tensor
    strategy_units: torch.Tensor | None


def eligible_positions(
    input_ids: torch.Tensor,
    vocab: DeviceTables,
    *,
    attention_mask: torch.Tensor | None = None,
    special_tokens_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """:func:`~tokenmask.masking.mask.eligible_positions` in torch: ``(B, T)`` bool.

    Raises:
        ValueError: a negative id.
    """
    low, high = (int(input_ids.min()), int(input_ids.max())) if input_ids.numel() else (0, 0)
    if low < 0:
        raise ValueError(f"input_ids must be >= 0 (token ids); got {low}")
    if high >= vocab.size:  # ids beyond the vocabulary are ordinary tokens
        warn_of_unknown_ids(vocab.size)
        blocked = vocab.protected[input_ids.clamp(max=vocab.size - 1)] & (input_ids < vocab.size)
    else:
        blocked = vocab.protected[input_ids]
    if special_tokens_mask is not None:
        blocked |= special_tokens_mask.to(input_ids.device).bool()
    eligible = ~blocked
    if attention_mask is not None:
        eligible &= attention_mask.to(input_ids.device).bool()
    return eligible


def mask_on_device(
    ids: torch.Tensor,
    example_ids: torch.Tensor,
    *,
    vocab: VocabTables,
    seed: int,
    epoch: int,
    unit_config: UnitConfig,
    selection: SelectionConfig,
    corruption: CorruptionConfig,
    attention_mask: torch.Tensor | None = None,
    special_tokens_mask: torch.Tensor | None = None,
    word_ids: torch.Tensor | None = None,
    given_spans: torch.Tensor | None = None,
    term_mask: torch.Tensor | None = None,
) -> DeviceMasked:
    """:func:`~tokenmask.masking.mask.mask_tokens` in torch: the same arguments, ``(B, T)``
    int64 ``ids`` on any device, the same numbers.

    Raises:
        ValueError: a negative id, or missing word ids / spans for the strategy.
    """
    tables = device_tables(vocab, ids.device)
    eligible = eligible_positions(ids, tables, attention_mask=attention_mask, special_tokens_mask=special_tokens_mask)  # (B, T)
    keys = row_keys(example_ids.to(ids.device), seed=seed, epoch=epoch)  # (B,)
    if ids.numel() == 0:
        empty = torch.zeros(0, dtype=torch.int64, device=ids.device)
        return DeviceMasked(ids.clone(), ids.clone(), empty, empty.to(torch.int8), eligible, None)
    select_bits = stream_bits(keys, Stream.SELECT, torch.arange(ids.shape[1], device=ids.device))  # (B, T) int64
    select_keys = low32(select_bits)
    terms = None if term_mask is None else term_mask.to(ids.device).bool()
    targets, units = _select_targets(
        eligible, select_keys, keys, unit_config, selection, _on(word_ids, ids), _on(given_spans, ids), terms
    )
    flat, codes = choose_outcomes(targets, select_bits, corruption, units)
    inputs, labels = apply_outcomes(ids, flat, codes, keys, tables)
    return DeviceMasked(inputs, labels, flat, codes, eligible, units)


def _on(tensor: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor | None:
    """``tensor`` as int64 on ``like``'s device; None stays None."""
    return None if tensor is None else tensor.to(device=like.device, dtype=torch.int64)


def _select_targets(
    eligible: torch.Tensor,
    select_keys: torch.Tensor,
    keys: torch.Tensor,
    unit_config: UnitConfig,
    selection: SelectionConfig,
    word_ids: torch.Tensor | None,
    given_spans: torch.Tensor | None,
    term_mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``mask._select_targets`` in torch: ``(targets, unit map)``, the map None for the token
    strategy without terms; the unit map is built by the shared :func:`build_units` with the
    torch unit functions."""
    if unit_config.strategy == "token" and term_mask is None:
        return select_tokens(eligible, select_keys, selection), None
    units = build_units(
        unit_config, eligible, keys, word_ids=word_ids, given_spans=given_spans, term_mask=term_mask, ops=torch_units
    )
    return select_units(units, select_keys, selection, priority=term_mask), units
