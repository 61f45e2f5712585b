"""Corruption of selected targets: [MASK], a random replaceable token, or the token kept.

The choice is made per token (BERT) or once per unit (SpanBERT, read at the unit's first
token) from the high half of the ``SELECT`` words; random replacements come from the
``REPLACE`` stream, only from
the replaceable ids of :class:`~tokenmask.masking.vocab.VocabTables`. Work is done at the
target positions only.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np

from tokenmask.masking.config import IGNORE_INDEX, CorruptionConfig
from tokenmask.masking.keys import RowKeys, Stream, threshold32, unit_float
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
    select_bits: np.ndarray,
    corruption: CorruptionConfig,
    units: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Decide mask / random / keep for every target.

    The draw of a target is the high 32 bits of its ``SELECT`` word (independent of the low
    bits that selected it), or of its unit's first token with ``corruption.per_unit``:
    MASK below ``mask_replace_prob``, RANDOM below ``mask_replace_prob + random_replace_prob``,
    KEEP otherwise.

    Args:
        targets: ``(B, T)`` bool.
        select_bits: ``(B, T)`` uint64 ``SELECT`` words.
        corruption: the probabilities and whether to decide per unit.
        units: ``(B, T)`` unit map, needed for per-unit decisions.

    Returns:
        ``(flat, codes)``: the flat (row-major) indices of the targets, ``(N,)`` int64, and
        their :class:`Outcome` codes, ``(N,)`` int8.

    With 0.8 / 0.1: a target whose draw / 2^32 is 0.5 is masked, 0.85 random, 0.95 kept.
    """
    flat = np.flatnonzero(targets)
    source = flat
    if corruption.per_unit and units is not None:
        width = targets.shape[1]
        source = flat - flat % width + first_positions(units, unit_starts(units)).ravel()[flat]
    draws = select_bits.ravel()[source] >> 32
    codes = np.full(flat.shape, _KEEP, dtype=np.int8)
    codes[draws < threshold32(corruption.mask_replace_prob + corruption.random_replace_prob)] = _RANDOM
    codes[draws < threshold32(corruption.mask_replace_prob)] = _MASK
    return flat, codes


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
        rows, cols = np.divmod(flat[replaced], original.shape[1])
        corrupted[replaced] = vocab.draw(unit_float(keys.bits_at(Stream.REPLACE, rows, cols)))
    inputs = original.copy()
    inputs.ravel()[flat] = corrupted
    return inputs, labels
