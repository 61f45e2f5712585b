"""The masking pass on torch tensors where they are: :mod:`.select` and :mod:`.corrupt` in torch.

:func:`mask_on_device` gives what the numpy pass gives, bit for bit, without leaving the
tensors' device: no ``.numpy()``, no host copy of the batch. It syncs with the device where
the output's size depends on the data (the targets' count) and where an input is checked.
:func:`tokenmask.masking.mask.mask_tokens` picks between the two (``backend=``).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import torch

from tokenmask.masking import torch_units as tu
from tokenmask.masking.config import IGNORE_INDEX, CorruptionConfig, SelectionConfig, UnitConfig
from tokenmask.masking.corrupt import Outcome
from tokenmask.masking.keys import Stream, threshold32
from tokenmask.masking.select import _AFTER_PRIORITY, _NO_KEY
from tokenmask.masking.units import build_units
from tokenmask.masking.vocab import VocabTables


@dataclass(frozen=True)
class DeviceTables:
    """A :class:`VocabTables`' lookup tables as tensors on one device."""

    protected: torch.Tensor  # (V,) bool
    replaceable: torch.Tensor  # (R,) int64
    replace_cdf: torch.Tensor | None  # (R,) float64


_TABLES: weakref.WeakKeyDictionary[VocabTables, dict[torch.device, DeviceTables]] = weakref.WeakKeyDictionary()


def device_tables(vocab: VocabTables, device: torch.device) -> DeviceTables:
    """``vocab``'s tables on ``device``, copied there once per vocabulary and device."""
    per_device = _TABLES.setdefault(vocab, {})
    if device not in per_device:
        cdf = None if vocab.replace_cdf is None else torch.as_tensor(vocab.replace_cdf, device=device)
        per_device[device] = DeviceTables(
            torch.as_tensor(vocab.protected, device=device), torch.as_tensor(vocab.replaceable, device=device), cdf
        )
    return per_device[device]


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
        ValueError: ids outside the vocabulary, or missing word ids / spans for the strategy.
    """
    tables = device_tables(vocab, ids.device)
    eligible = _eligible(ids, vocab, tables, attention_mask, special_tokens_mask)  # (B, T)
    keys = tu.row_keys(example_ids.to(ids.device), seed=seed, epoch=epoch)  # (B,)
    if ids.numel() == 0:
        empty = torch.zeros(0, dtype=torch.int64, device=ids.device)
        return DeviceMasked(ids.clone(), ids.clone(), empty, empty.to(torch.int8), eligible, None)
    select_bits = tu.stream_bits(keys, Stream.SELECT, torch.arange(ids.shape[1], device=ids.device))  # (B, T)
    select_keys = tu.low32(select_bits)
    terms = None if term_mask is None else term_mask.to(ids.device).bool()
    units = None
    if unit_config.strategy == "token" and terms is None:
        targets = select_tokens(eligible, select_keys, selection)
    else:
        units = build_units(
            unit_config, eligible, keys, word_ids=_on(word_ids, ids), given_spans=_on(given_spans, ids), term_mask=terms,
            ops=tu,
        )  # fmt: skip
        targets = select_units(units, select_keys, selection, priority=terms)
    flat, codes = choose_outcomes(targets, select_bits, corruption, units)
    inputs, labels = apply_outcomes(ids, flat, codes, keys, vocab, tables)
    return DeviceMasked(inputs, labels, flat, codes, eligible, units)


def _on(tensor: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor | None:
    return None if tensor is None else tensor.to(device=like.device, dtype=torch.int64)


def _eligible(
    ids: torch.Tensor,
    vocab: VocabTables,
    tables: DeviceTables,
    attention_mask: torch.Tensor | None,
    special_tokens_mask: torch.Tensor | None,
) -> torch.Tensor:
    """:func:`~tokenmask.masking.mask.eligible_positions` in torch: ``(B, T)`` bool."""
    if ids.numel():
        low, high = int(ids.min()), int(ids.max())
        if low < 0 or high >= vocab.size:
            raise ValueError(f"input_ids must lie in [0, {vocab.size}) (the vocabulary); got values in [{low}, {high}]")
    eligible = ~tables.protected[ids]
    if special_tokens_mask is not None:
        eligible &= ~special_tokens_mask.to(ids.device).bool()
    if attention_mask is not None:
        eligible &= attention_mask.to(ids.device).bool()
    return eligible


def select_tokens(eligible: torch.Tensor, select_keys: torch.Tensor, selection: SelectionConfig) -> torch.Tensor:
    """:func:`~tokenmask.masking.select.select_tokens` in torch."""
    if selection.mode == "exact":
        return select_units(tu.token_units(eligible), select_keys, selection)
    targets = (select_keys < threshold32(selection.mlm_probability)) & eligible
    counts = targets.sum(dim=1)
    suspects = counts < selection.min_masks_per_sequence
    if selection.max_predictions is not None:
        suspects |= counts > selection.max_predictions
    if bool(suspects.any()):  # rare: fix those rows by the general path
        units = tu.token_units(eligible)
        fixed = _select_prefix(units, select_keys, tu.unit_starts(units), selection)
        targets = torch.where(suspects[:, None], fixed, targets)
    return targets


def select_units(
    units: torch.Tensor, select_keys: torch.Tensor, selection: SelectionConfig, *, priority: torch.Tensor | None = None
) -> torch.Tensor:
    """:func:`~tokenmask.masking.select.select_units` in torch: ``(B, T)`` bool targets.

    Rows are fixed by the general path where the floor or the cap acts; computing it for every
    row and keeping it where needed gives the same targets as the numpy path's row subset.
    """
    starts = tu.unit_starts(units)
    bound: int | torch.Tensor | None = None
    if priority is not None:
        first = priority_units(units, priority)
        if selection.mode == "exact":
            return _select_prefix(units, _priority_keys(select_keys, first), starts, selection)
        q = fill_probability(selection.mlm_probability, (units >= 0).sum(dim=1), first.sum(dim=1))
        q_threshold = torch.round(q * (1 << 32)).long()[:, None]  # (B, 1)
        chosen_starts = starts & (first | (select_keys < q_threshold))
        fix_keys, bound = _priority_keys(select_keys, first), _AFTER_PRIORITY + q_threshold
    elif selection.mode == "exact":
        return _select_prefix(units, select_keys, starts, selection)
    else:
        chosen_starts = starts & (select_keys < threshold32(selection.mlm_probability))
        fix_keys = select_keys

    targets = tu.spread_from_starts(chosen_starts, starts) & (units >= 0)
    n_selected = chosen_starts.sum(dim=1)
    needs_fix = (n_selected < selection.min_masks_per_sequence) & (n_selected < starts.sum(dim=1))
    if selection.max_predictions is not None:
        needs_fix |= targets.sum(dim=1) > selection.max_predictions
    if bool(needs_fix.any()):
        fixed = _select_prefix(units, fix_keys, starts, selection, bound)
        targets = torch.where(needs_fix[:, None], fixed, targets)
    return targets


def _priority_keys(select_keys: torch.Tensor, first: torch.Tensor) -> torch.Tensor:
    return torch.where(first, 0, int(_AFTER_PRIORITY)) + select_keys


def priority_units(units: torch.Tensor, priority: torch.Tensor) -> torch.Tensor:
    """:func:`~tokenmask.masking.select.priority_units` in torch."""
    is_unit = units >= 0
    marked = torch.zeros((units.shape[0], units.shape[1] + 1), dtype=torch.bool, device=units.device)
    marked.scatter_(1, torch.where(priority & is_unit, units, units.shape[1]), True)  # last column: none
    return is_unit & marked.gather(1, units.clamp(min=0))


def fill_probability(p: float, n_eligible: torch.Tensor, n_priority: torch.Tensor) -> torch.Tensor:
    """:func:`~tokenmask.masking.select.fill_probability` in torch (float64, ``(B,)``)."""
    eligible, taken = n_eligible.to(torch.float64), n_priority.to(torch.float64)
    rest = eligible - taken
    q = torch.where(rest > 0, (p * eligible - taken) / torch.where(rest > 0, rest, 1.0), 0.0)
    return torch.where(taken > 0, q.clamp(0.0, 1.0), torch.full_like(q, p))


def _select_prefix(
    units: torch.Tensor,
    keys: torch.Tensor,
    starts: torch.Tensor,
    selection: SelectionConfig,
    threshold: int | torch.Tensor | None = None,
) -> torch.Tensor:
    """:func:`~tokenmask.masking.select._select_prefix` in torch: units sorted by key, a prefix per row."""
    batch, width = units.shape
    is_unit = units >= 0
    slot = torch.where(is_unit, units, width)  # column `width` collects the non-units
    ones = torch.ones_like(units)
    unit_len = torch.zeros((batch, width + 1), dtype=torch.int64, device=units.device).scatter_add_(1, slot, ones)[:, :width]
    unit_key = torch.full((batch, width + 1), int(_NO_KEY), dtype=torch.int64, device=units.device)
    unit_key.scatter_(1, torch.where(starts, units, width), keys.to(torch.int64))
    unit_key = torch.where(unit_len == 0, int(_NO_KEY), unit_key[:, :width])

    order = torch.sort(unit_key, dim=1, stable=True).indices  # (B, U) units by key
    sorted_len = unit_len.gather(1, order)
    covered = sorted_len.cumsum(dim=1)
    n_units = (unit_len > 0).sum(dim=1)

    if selection.mode == "exact":
        budget = torch.floor(selection.mlm_probability * is_unit.sum(dim=1).to(torch.float64) + 0.5)
        n_take = ((covered - sorted_len) < budget[:, None]).sum(dim=1)
    else:
        bound = threshold32(selection.mlm_probability) if threshold is None else threshold
        n_take = (unit_key < bound).sum(dim=1)
    if selection.max_predictions is not None:
        n_take = torch.minimum(n_take, (covered <= selection.max_predictions).sum(dim=1))
    # The floor wins over the cap: a unit longer than the cap is still taken if needed.
    n_take = torch.maximum(n_take, n_units.clamp(max=selection.min_masks_per_sequence))
    n_take = torch.minimum(n_take, n_units)

    rank = torch.empty_like(order).scatter_(1, order, torch.arange(width, device=units.device).expand(batch, width))
    return is_unit & (rank.gather(1, units.clamp(min=0)) < n_take[:, None])


def choose_outcomes(
    targets: torch.Tensor, select_bits: torch.Tensor, corruption: CorruptionConfig, units: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`~tokenmask.masking.corrupt.choose_outcomes` in torch: ``(flat, codes)``."""
    flat = targets.reshape(-1).nonzero().squeeze(1)
    source = flat
    if corruption.per_unit and units is not None:
        width = targets.shape[1]
        source = flat - flat % width + tu.first_positions(units, tu.unit_starts(units)).reshape(-1)[flat]
    draws = tu.high32(select_bits.reshape(-1)[source])
    codes = torch.full(flat.shape, int(Outcome.KEEP), dtype=torch.int8, device=flat.device)
    codes[draws < threshold32(corruption.mask_replace_prob + corruption.random_replace_prob)] = int(Outcome.RANDOM)
    codes[draws < threshold32(corruption.mask_replace_prob)] = int(Outcome.MASK)
    return flat, codes


def apply_outcomes(
    ids: torch.Tensor, flat: torch.Tensor, codes: torch.Tensor, keys: torch.Tensor, vocab: VocabTables, tables: DeviceTables
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`~tokenmask.masking.corrupt.apply_outcomes` in torch: ``(inputs, labels)``, new tensors."""
    at_targets = ids.reshape(-1)[flat]
    labels = torch.full_like(ids, IGNORE_INDEX)
    labels.view(-1)[flat] = at_targets
    corrupted = torch.where(codes == int(Outcome.MASK), vocab.mask_token_id, at_targets)
    random = codes == int(Outcome.RANDOM)
    rows, cols = flat // ids.shape[1], flat % ids.shape[1]
    uniform = tu.unit_float(tu.stream_bits_at(keys, Stream.REPLACE, rows, cols))
    corrupted = torch.where(random, _draw(tables, uniform), corrupted)
    inputs = ids.clone()
    inputs.view(-1)[flat] = corrupted
    return inputs, labels


def _draw(tables: DeviceTables, uniform: torch.Tensor) -> torch.Tensor:
    """:meth:`VocabTables.draw` on the device."""
    size = tables.replaceable.numel()
    cdf = tables.replace_cdf
    index = (uniform * size).long() if cdf is None else torch.searchsorted(cdf, uniform, right=True)
    return tables.replaceable[index.clamp(max=size - 1)]
