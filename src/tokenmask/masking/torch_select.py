""":mod:`.select` in torch: the same target selection over units, on torch tensors where they are.

Where the numpy path fixes a subset of rows (the floor or the cap acts), this one computes the
fix for every row and keeps it where needed: the same targets, with no data-dependent shapes.
The key constants (:data:`~tokenmask.masking.select.AFTER_PRIORITY`,
:data:`~tokenmask.masking.select.NO_KEY`) are the numpy path's own.
"""

from __future__ import annotations

import torch

from tokenmask.masking.config import SelectionConfig
from tokenmask.masking.keys import threshold32
from tokenmask.masking.select import AFTER_PRIORITY, NO_KEY
from tokenmask.masking.torch_units import spread_from_starts, token_units, unit_starts


def select_tokens(eligible: torch.Tensor, select_keys: torch.Tensor, selection: SelectionConfig) -> torch.Tensor:
    """:func:`~tokenmask.masking.select.select_tokens` in torch."""
    if selection.mode == "exact":
        return select_units(token_units(eligible), select_keys, selection)
    targets = (select_keys < threshold32(selection.mlm_probability)) & eligible
    counts = targets.sum(dim=1)
    suspects = counts < selection.min_masks_per_sequence
    if selection.max_predictions is not None:
        suspects |= counts > selection.max_predictions
    if bool(suspects.any()):  # rare: fix those rows by the general path
        units = token_units(eligible)
        fixed = _select_prefix(units, select_keys, unit_starts(units), selection)
        targets = torch.where(suspects[:, None], fixed, targets)
    return targets


def select_units(
    units: torch.Tensor, select_keys: torch.Tensor, selection: SelectionConfig, *, priority: torch.Tensor | None = None
) -> torch.Tensor:
    """:func:`~tokenmask.masking.select.select_units` in torch: ``(B, T)`` bool targets.

    Rows are fixed by the general path where the floor or the cap acts; computing it for every
    row and keeping it where needed gives the same targets as the numpy path's row subset.
    """
    starts = unit_starts(units)
    bound: int | torch.Tensor | None = None
    if priority is not None:
        first = priority_units(units, priority)  # (B, T)
        if selection.mode == "exact":
            return _select_prefix(units, _priority_keys(select_keys, first), starts, selection)
        q = fill_probability(selection.mlm_probability, (units >= 0).sum(dim=1), first.sum(dim=1))
        q_threshold = torch.round(q * (1 << 32)).long()[:, None]  # (B, 1)
        chosen_starts = starts & (first | (select_keys < q_threshold))
        fix_keys, bound = _priority_keys(select_keys, first), AFTER_PRIORITY + q_threshold
    elif selection.mode == "exact":
        return _select_prefix(units, select_keys, starts, selection)
    else:
        chosen_starts = starts & (select_keys < threshold32(selection.mlm_probability))
        fix_keys = select_keys

    targets = spread_from_starts(chosen_starts, starts) & (units >= 0)
    n_selected = chosen_starts.sum(dim=1)
    needs_fix = (n_selected < selection.min_masks_per_sequence) & (n_selected < starts.sum(dim=1))
    if selection.max_predictions is not None:
        needs_fix |= targets.sum(dim=1) > selection.max_predictions
    if bool(needs_fix.any()):  # the same prefix, in the priority order where there is one
        fixed = _select_prefix(units, fix_keys, starts, selection, bound)
        targets = torch.where(needs_fix[:, None], fixed, targets)
    return targets


def _priority_keys(select_keys: torch.Tensor, first: torch.Tensor) -> torch.Tensor:
    """``(B, T)`` int64 keys that sort every priority unit (``first``) before every other unit."""
    return torch.where(first, 0, AFTER_PRIORITY) + select_keys


def priority_units(units: torch.Tensor, priority: torch.Tensor) -> torch.Tensor:
    """:func:`~tokenmask.masking.select.priority_units` in torch: ``(B, T)`` bool."""
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
    unit_key = torch.full((batch, width + 1), NO_KEY, dtype=torch.int64, device=units.device)
    unit_key.scatter_(1, torch.where(starts, units, width), keys.to(torch.int64))
    unit_key = torch.where(unit_len == 0, NO_KEY, unit_key[:, :width])

    order = torch.sort(unit_key, dim=1, stable=True).indices  # (B, U) units by key
    sorted_len = unit_len.gather(1, order)
    covered = sorted_len.cumsum(dim=1)  # tokens taken after the j-th unit
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
