"""Corruption of selected targets: [MASK], a random replaceable token, or the token kept.

The choice is made per token (BERT) or once per unit (SpanBERT, read at the unit's first
token) from the ``CHOICE`` stream; random replacements come from the ``REPLACE`` stream, only from
the replaceable ids of :class:`~tokenmask.masking.vocab.VocabTables`. Work is done at the
target positions only.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np

from tokenmask.masking.config import IGNORE_INDEX, CorruptionConfig
from tokenmask.masking.keys import RowKeys, Stream, threshold32
from tokenmask.masking.units import first_positions, unit_starts
from tokenmask.masking.vocab import VocabTables


class Outcome(IntEnum):
    """What happened at a position."""

    NONE = 0  # not a target
    MASK = 1  # replaced by the mask token
    RANDOM = 2  # replaced by a random replaceable token
    KEEP = 3  # target, left unchanged


_MASK, _RANDOM, _KEEP = int(Outcome.MASK), int(Outcome.RANDOM), int(Outcome.KEEP)  # hot path


def choose_outcomes(
    targets: np.ndarray,
    keys: RowKeys,
    corruption: CorruptionConfig,
    units: np.ndarray | None = None,
    *,
    select_keys: np.ndarray | None = None,
    probability: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Decide mask / random / keep for every target.

    Each target gets a uniform draw ``u``: MASK if ``u < mask_replace_prob``, RANDOM if
    ``u < mask_replace_prob + random_replace_prob``, KEEP otherwise. ``u`` comes from the
    ``CHOICE`` stream (at the unit's first token when ``corruption.per_unit``). For the token
    strategy, pass the selection keys and probability: a token selected because its key ``k``
    fell below ``p · 2^32`` then reuses ``u = k / (p · 2^32)``, which is uniform given that it
    was selected, and saves a hash; targets added by the floor still use ``CHOICE``.

    Args:
        targets: ``(B, T)`` bool.
        keys: the batch's row keys.
        corruption: the probabilities and whether to decide per unit.
        units: ``(B, T)`` unit map, needed for per-unit decisions.
        select_keys: ``(B, T)`` uint32 selection keys (token strategy, per-token decisions only).
        probability: the selection probability those keys were compared with.

    Returns:
        ``(flat, codes)``: the flat (row-major) indices of the targets, ``(N,)`` int64, and
        their :class:`Outcome` codes, ``(N,)`` int8.

    With 0.8 / 0.1: a target whose draw is 0.5 is masked, 0.85 random, 0.95 kept.
    """
    flat = np.flatnonzero(targets)
    width = targets.shape[1]
    mask_below = corruption.mask_replace_prob
    random_below = corruption.mask_replace_prob + corruption.random_replace_prob
    if select_keys is not None and probability is not None and not corruption.per_unit:
        key = select_keys.ravel()[flat]
        codes = _codes(key, threshold32(probability * mask_below), threshold32(probability * random_below))
        forced = key >= threshold32(probability)
        if forced.any():
            chosen = flat[forced]
            rows = chosen // width
            choice = keys.bits32_at(Stream.CHOICE, rows, chosen - rows * width)
            codes[forced] = _codes(choice, threshold32(mask_below), threshold32(random_below))
        return flat, codes
    rows = flat // width
    cols = flat - rows * width
    if corruption.per_unit and units is not None:
        cols = first_positions(units, unit_starts(units)).ravel()[flat]
    choice = keys.bits32_at(Stream.CHOICE, rows, cols)
    return flat, _codes(choice, threshold32(mask_below), threshold32(random_below))


def _codes(draws: np.ndarray, mask_below: int, random_below: int) -> np.ndarray:
    """Outcome codes of 32-bit draws: ``< mask_below`` MASK, ``< random_below`` RANDOM, else KEEP."""
    codes = np.full(draws.shape, _KEEP, dtype=np.int8)
    codes[draws < random_below] = _RANDOM
    codes[draws < mask_below] = _MASK
    return codes


def outcome_map(shape: tuple[int, int], flat: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Dense ``(B, T)`` int8 :class:`Outcome` codes from target indices and codes."""
    outcome = np.zeros(shape, dtype=np.int8)
    outcome.ravel()[flat] = codes
    return outcome


def apply_outcomes(
    input_ids: np.ndarray,
    flat: np.ndarray,
    codes: np.ndarray,
    keys: RowKeys,
    vocab: VocabTables,
) -> tuple[np.ndarray, np.ndarray]:
    """Build corrupted inputs and labels; ``input_ids`` is not modified.

    Args:
        input_ids: ``(B, T)`` int64.
        flat: ``(N,)`` flat indices of the targets, from :func:`choose_outcomes`.
        codes: ``(N,)`` their :class:`Outcome` codes.
        keys: the batch's row keys (random replacements use the ``REPLACE`` stream).
        vocab: mask token and replaceable ids.

    Returns:
        ``(inputs, labels)``, both ``(B, T)`` int64: labels are the original id at targets
        and ``IGNORE_INDEX`` (-100) elsewhere.

    ``input_ids = [[101, 7, 8, 9, 102]]``, ``flat = [1, 3]``, ``codes = [MASK, KEEP]``, mask id 103
    ``->  inputs [[101, 103, 8, 9, 102]]``, labels ``[[-100, 7, -100, 9, -100]]``.
    """
    original = np.ascontiguousarray(input_ids)
    at_targets = original.ravel()[flat]
    labels = np.full(original.shape, IGNORE_INDEX, dtype=np.int64)
    labels.ravel()[flat] = at_targets
    corrupted = np.where(codes == _MASK, vocab.mask_token_id, at_targets)
    replaced = np.flatnonzero(codes == _RANDOM)
    if replaced.size:
        rows = flat[replaced] // original.shape[1]
        cols = flat[replaced] - rows * original.shape[1]
        corrupted[replaced] = vocab.draw(keys.bits32_at(Stream.REPLACE, rows, cols) * (1.0 / 2**32))
    inputs = original.copy()
    inputs.ravel()[flat] = corrupted
    return inputs, labels
