"""Target selection over units: which units become prediction targets.

Every unit gets a 32-bit key: the ``SELECT`` word at its first token. Bernoulli
selection takes the units whose key is below ``p · 2^32``; exact selection takes units in key
order until the token budget is met. Both are a prefix of the units sorted by key, which is
how ``min_masks_per_sequence`` and ``max_predictions`` compose with either mode.

Priority units (those holding a term token) sort before all others: their keys are offset by
``-2^32`` relative to the rest, so they are taken first, in random order among themselves, and
the other units fill the rest of the rate (:func:`select_units`, ``priority=``).
"""

from __future__ import annotations

import numpy as np

from tokenmask.masking.config import SelectionConfig
from tokenmask.masking.keys import threshold32
from tokenmask.masking.units import spread_from_starts, token_units, unit_starts

AFTER_PRIORITY = 1 << 32
"""Added to the keys of non-priority units: one more than any 32-bit key, so every priority unit sorts first."""
NO_KEY = 1 << 40
"""The key of a unit slot that holds no unit: it sorts after every key, priority-offset or not."""


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


def select_units(
    units: np.ndarray,
    select_keys: np.ndarray,
    selection: SelectionConfig,
    *,
    priority: np.ndarray | None = None,
) -> np.ndarray:
    """Choose target units and return the target mask.

    Args:
        units: ``(B, T)`` unit map (-1 where not eligible), see :mod:`tokenmask.masking.units`.
        select_keys: ``(B, T)`` uint32 keys, the low halves of the ``SELECT`` words; the
            key at a unit's first token is that unit's key.
        selection: rate, mode, floor and cap.
        priority: ``(B, T)`` bool, True on tokens to select first (term occurrences). A unit
            holding any priority token is a priority unit, all of it (a span with a term and
            other words is taken whole). Priority units come before every other unit:

            - exact: the budget ``round(p · E)`` (E eligible tokens of the row) is spent on
              priority units first, in key order (when they exceed it, the ones with the
              smallest keys until it is met), then on the other units in key order;
            - bernoulli: every priority unit is a target, and each other unit is taken with
              probability ``q = max(0, (p·E - P) / (E - P))``, P the tokens of priority units,
              computed per row. Expected targets are then ``P + q (E - P) = p·E`` tokens when
              ``P <= p·E``, and ``P`` (all priority units, nothing else) when they exceed it.
              A row without priority tokens is selected exactly as with ``priority=None``.

            The floor and the cap act on the same key order: the floor adds the next other
            units, the cap drops the other units first, then priority units by their keys.

    Returns:
        ``(B, T)`` bool, True exactly on the tokens of selected units.

    Example (bernoulli, p = 0.5, keys / 2^32 = [.9, .1, .7, .3] at 4 token units,
    ``min_masks_per_sequence=3``): the units below 0.5 are 1 and 3; the floor adds the next
    smallest key, unit 2 -> ``[F, T, T, T]``. With ``priority=[[T, F, F, F]]`` (and no floor):
    unit 0 is taken, and the others at q = (0.5·4 - 1) / 3 = 1/3: units 1 (.1) and 3 (.3) ->
    ``[T, T, F, T]``.
    """
    starts = unit_starts(units)
    if priority is not None:
        first = priority_units(units, priority)  # (B, T)
        if selection.mode == "exact":
            return _select_prefix(units, _priority_keys(select_keys, first), starts, selection)
        q = fill_probability(selection.mlm_probability, np.count_nonzero(units >= 0, axis=1), np.count_nonzero(first, axis=1))
        q_threshold = np.round(q * (1 << 32)).astype(np.int64)[:, None]  # (B, 1)
        chosen_starts = starts & (first | (select_keys < q_threshold))
    elif selection.mode == "exact":
        return _select_prefix(units, select_keys, starts, selection)
    else:
        chosen_starts = starts & (select_keys < threshold32(selection.mlm_probability))

    targets = spread_from_starts(chosen_starts, starts)
    targets &= units >= 0
    n_selected = np.count_nonzero(chosen_starts, axis=1)
    needs_fix = n_selected < selection.min_masks_per_sequence
    if needs_fix.any():  # rows with too few: only those that have enough units to take
        needs_fix &= n_selected < np.count_nonzero(starts, axis=1)
    if selection.max_predictions is not None:
        needs_fix |= np.count_nonzero(targets, axis=1) > selection.max_predictions
    rows = np.flatnonzero(needs_fix)
    if rows.size and priority is not None:  # the same prefix, in the priority order
        keys = _priority_keys(select_keys[rows], first[rows])
        targets[rows] = _select_prefix(units[rows], keys, starts[rows], selection, AFTER_PRIORITY + q_threshold[rows])
    elif rows.size:
        targets[rows] = _select_prefix(units[rows], select_keys[rows], starts[rows], selection)
    return targets


def _priority_keys(select_keys: np.ndarray, first: np.ndarray) -> np.ndarray:
    """``(B, T)`` int64 keys that sort every priority unit (``first``) before every other unit."""
    return np.where(first, 0, AFTER_PRIORITY) + select_keys


def priority_units(units: np.ndarray, priority: np.ndarray) -> np.ndarray:
    """The tokens of every unit that holds a priority token: ``(B, T)`` bool.

    ``units = [[-1, 0, 0, 1, 2, -1]]``, ``priority = [[F, F, T, F, F, F]]``  ->  ``[[F, T, T, F, F, F]]``
    """
    batch, width = units.shape
    is_unit = units >= 0
    flat = np.arange(batch)[:, None] * width + np.maximum(units, 0)  # (B, T) row-major unit index
    marked = np.zeros(batch * width, dtype=bool)
    marked[flat[priority.astype(bool, copy=False) & is_unit]] = True
    return is_unit & marked[flat]


def fill_probability(p: float, n_eligible: np.ndarray, n_priority: np.ndarray) -> np.ndarray:
    """Per row, the probability ``q`` at which Bernoulli selection takes the non-priority units.

    ``q = max(0, (p·E - P) / (E - P))`` with E eligible tokens and P tokens of priority units,
    so that ``P + q (E - P) = p·E`` when ``P <= p·E``; ``q = p`` where ``P = 0`` and 0 where
    ``P = E``. All ``(B,)``.

    ``fill_probability(0.15, [100, 100, 100], [0, 5, 40])  ->  [0.15, 0.1053, 0.0]`` (10 / 95)
    """
    eligible = np.asarray(n_eligible, dtype=np.float64)
    taken = np.asarray(n_priority, dtype=np.float64)
    rest = eligible - taken
    q = np.divide(p * eligible - taken, rest, out=np.zeros_like(rest), where=rest > 0)
    return np.where(taken > 0, np.clip(q, 0.0, 1.0), p)


def _select_prefix(
    units: np.ndarray,
    keys: np.ndarray,
    starts: np.ndarray,
    selection: SelectionConfig,
    threshold: int | np.ndarray | None = None,
) -> np.ndarray:
    """The general path: sort units by key and take a prefix of the right length per row.

    ``keys`` are the 32-bit keys, or the priority-offset int64 ones; ``threshold`` is the
    Bernoulli key bound (an int, or ``(B, 1)`` per row), ``threshold32(p)`` when None.
    """
    batch, width = units.shape
    is_unit = units >= 0
    flat = (np.arange(batch)[:, None] * width + units)[is_unit]
    unit_len = np.bincount(flat, minlength=batch * width).reshape(batch, width)
    unit_key = np.full((batch, width), NO_KEY, dtype=np.int64)
    start_rows, start_cols = np.nonzero(starts)
    unit_key[start_rows, units[start_rows, start_cols]] = keys[start_rows, start_cols]
    unit_key[unit_len == 0] = NO_KEY

    order = np.argsort(unit_key, axis=1, kind="stable")  # (B, U) units by key
    sorted_len = np.take_along_axis(unit_len, order, axis=1)
    covered = np.cumsum(sorted_len, axis=1)  # tokens taken after the j-th unit
    n_units = (unit_len > 0).sum(axis=1)

    if selection.mode == "exact":
        n_eligible = is_unit.sum(axis=1)
        budget = np.floor(selection.mlm_probability * n_eligible + 0.5)
        n_take = ((covered - sorted_len) < budget[:, None]).sum(axis=1)
    else:
        bound = threshold32(selection.mlm_probability) if threshold is None else threshold
        n_take = (unit_key < bound).sum(axis=1)
    if selection.max_predictions is not None:
        n_take = np.minimum(n_take, (covered <= selection.max_predictions).sum(axis=1))
    # The floor wins over the cap: a unit longer than the cap is still taken if needed.
    n_take = np.maximum(n_take, np.minimum(selection.min_masks_per_sequence, n_units))
    n_take = np.minimum(n_take, n_units)

    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(width)[None, :].repeat(batch, axis=0), axis=1)
    unit_rank = np.take_along_axis(rank, np.maximum(units, 0), axis=1)
    return is_unit & (unit_rank < n_take[:, None])
