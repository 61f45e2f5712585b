"""Target selection over units: which units become prediction targets.

Every unit gets a 32-bit key: the ``SELECT`` word at its first token. Bernoulli
selection takes the units whose key is below ``p · 2^32``; exact selection takes units in key
order until the token budget is met. Both are a prefix of the units sorted by key, which is
how ``min_masks_per_sequence`` and ``max_predictions`` compose with either mode.
"""

from __future__ import annotations

import numpy as np

from tokenmask.masking.config import SelectionConfig
from tokenmask.masking.keys import threshold32
from tokenmask.masking.units import spread_from_starts, token_units, unit_starts

_NO_KEY = np.int64(1 << 40)  # sorts after every 32-bit key


def select_tokens(eligible: np.ndarray, select_keys: np.ndarray, selection: SelectionConfig) -> np.ndarray:
    """:func:`select_units` for the token strategy (each eligible token its own unit), faster.

    Same result as ``select_units(token_units(eligible), select_keys, selection)``.
    """
    if selection.mode == "exact":
        return select_units(token_units(eligible), select_keys, selection)
    targets = select_keys < threshold32(selection.mlm_probability)
    targets &= eligible
    counts = np.count_nonzero(targets, axis=1)
    suspects = counts < selection.min_masks_per_sequence
    if selection.max_predictions is not None:
        suspects |= counts > selection.max_predictions
    rows = np.flatnonzero(suspects)
    if rows.size:
        units = token_units(eligible[rows])
        targets[rows] = _select_prefix(units, select_keys[rows], unit_starts(units), selection)
    return targets


def select_units(units: np.ndarray, select_keys: np.ndarray, selection: SelectionConfig) -> np.ndarray:
    """Choose target units and return the target mask.

    Args:
        units: ``(B, T)`` unit map (-1 where not eligible), see :mod:`tokenmask.masking.units`.
        select_keys: ``(B, T)`` uint32 keys, the low halves of the ``SELECT`` words; the
            key at a unit's first token is that unit's key.
        selection: rate, mode, floor and cap.

    Returns:
        ``(B, T)`` bool, True exactly on the tokens of selected units.

    Example (bernoulli, p = 0.5, keys / 2^32 = [.9, .1, .7, .3] at 4 token units,
    ``min_masks_per_sequence=3``): the units below 0.5 are 1 and 3; the floor adds the next
    smallest key, unit 2 -> ``[F, T, T, T]``.
    """
    keys = select_keys
    starts = unit_starts(units)
    if selection.mode == "exact":
        return _select_prefix(units, keys, starts, selection)

    chosen_starts = starts & (keys < threshold32(selection.mlm_probability))
    targets = spread_from_starts(chosen_starts, starts)
    targets &= units >= 0
    n_selected = np.count_nonzero(chosen_starts, axis=1)
    needs_fix = n_selected < selection.min_masks_per_sequence
    if needs_fix.any():  # rows with too few: only those that have enough units to take
        needs_fix &= n_selected < np.count_nonzero(starts, axis=1)
    if selection.max_predictions is not None:
        needs_fix |= np.count_nonzero(targets, axis=1) > selection.max_predictions
    rows = np.flatnonzero(needs_fix)
    if rows.size:
        targets[rows] = _select_prefix(units[rows], keys[rows], starts[rows], selection)
    return targets


def _select_prefix(
    units: np.ndarray,
    keys: np.ndarray,
    starts: np.ndarray,
    selection: SelectionConfig,
) -> np.ndarray:
    """The general path: sort units by key and take a prefix of the right length per row."""
    batch, width = units.shape
    is_unit = units >= 0
    flat = (np.arange(batch)[:, None] * width + units)[is_unit]
    unit_len = np.bincount(flat, minlength=batch * width).reshape(batch, width)
    unit_key = np.full((batch, width), _NO_KEY, dtype=np.int64)
    start_rows, start_cols = np.nonzero(starts)
    unit_key[start_rows, units[start_rows, start_cols]] = keys[start_rows, start_cols]
    unit_key[unit_len == 0] = _NO_KEY

    order = np.argsort(unit_key, axis=1, kind="stable")  # (B, U) units by key
    sorted_len = np.take_along_axis(unit_len, order, axis=1)
    covered = np.cumsum(sorted_len, axis=1)  # tokens taken after the j-th unit
    n_units = (unit_len > 0).sum(axis=1)

    if selection.mode == "exact":
        n_eligible = is_unit.sum(axis=1)
        budget = np.floor(selection.mlm_probability * n_eligible + 0.5)
        n_take = ((covered - sorted_len) < budget[:, None]).sum(axis=1)
    else:
        n_take = (unit_key < threshold32(selection.mlm_probability)).sum(axis=1)
    if selection.max_predictions is not None:
        n_take = np.minimum(n_take, (covered <= selection.max_predictions).sum(axis=1))
    # The floor wins over the cap: a unit longer than the cap is still taken if needed.
    n_take = np.maximum(n_take, np.minimum(selection.min_masks_per_sequence, n_units))
    n_take = np.minimum(n_take, n_units)

    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(width)[None, :].repeat(batch, axis=0), axis=1)
    unit_rank = np.take_along_axis(rank, np.maximum(units, 0), axis=1)
    return is_unit & (unit_rank < n_take[:, None])
