"""Masking units: how tokens are grouped before selection (token, word, span, n-gram, given).

A unit map is a ``(B, T)`` int64 array: the unit index of each eligible token, numbered
0, 1, 2, … along the row in order of first appearance, and -1 on tokens that can never be
targets (special tokens, padding, protected ids). Selection then works on units only.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from tokenmask.masking.config import UnitConfig
from tokenmask.masking.keys import RowKeys, Stream, unit_float
from tokenmask.masking.lengths import geometric_bounds, ngram_cdf

if TYPE_CHECKING:
    import torch

Units = TypeVar("Units", np.ndarray, "torch.Tensor")
"""Arrays of one backend: numpy for this module's functions, torch for :mod:`.torch_units`'."""

NO_UNIT = -1


def token_units(eligible: np.ndarray) -> np.ndarray:
    """Every eligible token is its own unit.

    ``eligible = [[F, T, T, F]]  ->  [[-1, 0, 1, -1]]``
    """
    return np.where(eligible, np.cumsum(eligible, axis=1) - 1, NO_UNIT)


def word_units(word_ids: np.ndarray, eligible: np.ndarray) -> np.ndarray:
    """All pieces of a word form one unit.

    Words come from the tokenizer (``word_ids()``), never from spelling. A new unit starts at
    an eligible token whose word id differs from the previous token's, or whose previous
    token is not eligible.

    ``word_ids = [[-1, 0, 0, 1, 2, 2, -1]]`` (all but the ends eligible)
    ``->  [[-1, 0, 0, 1, 2, 2, -1]]``; with ``word_ids = [[-1, 0, 0, 0, 1, 1, -1]]``
    ``->  [[-1, 0, 0, 0, 1, 1, -1]]``.
    """
    starts = eligible.copy()
    starts[:, 1:] &= ~eligible[:, :-1] | (word_ids[:, 1:] != word_ids[:, :-1])
    units = np.cumsum(starts, axis=1)
    units -= 1
    units[~eligible] = NO_UNIT
    return units


def merge_words(word_ids: np.ndarray, spans: np.ndarray) -> np.ndarray:
    """Word ids with the words of each span merged into one word (PMI n-grams, terms).

    Args:
        word_ids: ``(..., T)`` int64 word index per token, -1 on special tokens.
        spans: ``(S, 2)`` int64 ``[start, end)`` word indices, sorted by start, not overlapping.

    Returns:
        ``word_ids`` where every word inside a span takes the span's first word id; the
        others are unchanged. Word-based strategies then treat each span as one word.

    ``word_ids = [-1, 0, 1, 1, 2, 3, -1]``, ``spans = [[1, 3]]``  ->  ``[-1, 0, 1, 1, 1, 3, -1]``
    """
    if len(spans) == 0:
        return word_ids.copy()
    starts, ends = spans[:, 0], spans[:, 1]
    span = np.searchsorted(starts, word_ids, side="right") - 1  # the last span starting at or before
    safe = np.maximum(span, 0)
    inside = (span >= 0) & (word_ids >= 0) & (word_ids < ends[safe])
    return np.where(inside, starts[safe], word_ids)


def term_token_units(word_ids: np.ndarray, term_mask: np.ndarray, eligible: np.ndarray) -> np.ndarray:
    """The token strategy with terms: the tokens of a term occurrence form one unit, every other
    eligible token is a unit of its own.

    ``word_ids`` are merged (a term's tokens share one id). ``word_ids = [[-1, 0, 1, 1, 2, -1]]``,
    ``term_mask = [[0, 0, 1, 1, 0, 0]]``, ``eligible`` all but the ends  ->  ``[[-1, 0, 1, 1, 2, -1]]``
    (and ``term_mask = 0`` everywhere  ->  ``[[-1, 0, 1, 2, 3, -1]]``).
    """
    width = word_ids.shape[1]
    own = int(word_ids.max(initial=0)) + 1 + np.arange(width)[None, :]  # a fresh id per token
    keys = np.where(term_mask.astype(bool) & (word_ids >= 0), word_ids, own)
    return word_units(keys, eligible)


def unit_starts(units: np.ndarray) -> np.ndarray:
    """Where each unit begins: ``(B, T)`` bool, True at the first token of every unit."""
    running = np.maximum.accumulate(units, axis=1)
    previous = np.empty_like(running)
    previous[:, 0] = NO_UNIT
    previous[:, 1:] = running[:, :-1]
    return units > previous


def spread_from_starts(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Copy a boolean from each unit's first token to all its tokens (a forward fill).

    ``values`` and ``starts`` are ``(B, T)`` bool; only ``values`` at starts are read.
    Positions outside units get the value of the last unit before them: mask them out.
    ``values = [[F, T, F, F, F]]``, ``starts = [[T, T, F, T, F]]``  ->  ``[[F, T, T, F, F]]``
    """
    width = values.shape[1]
    encoded = np.where(starts, np.arange(width)[None, :] * 2 + values, 0)  # position, value
    return (np.maximum.accumulate(encoded, axis=1) & 1).astype(bool)


def first_positions(units: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """For each token, the position of the first token of its unit; ``(B, T)`` int64.

    Positions of non-unit tokens are meaningless (but in range).
    """
    positions = np.where(starts, np.arange(units.shape[1])[None, :], 0)
    return np.maximum.accumulate(positions, axis=1)


def geometric_lengths(uniform: np.ndarray, p: float, max_length: int) -> np.ndarray:
    """Inverse-CDF draws of Geometric(p) on {1, 2, …}, clipped to ``max_length`` (the span
    lengths of :mod:`~tokenmask.masking.lengths`).

    ``uniform`` holds draws in ``[0, 1)``. ``L = 1 + #{k < max_length : (1 - p)^k >= 1 - u}``,
    the same as ``1 + floor(log(1 - u) / log(1 - p))`` clipped, but by comparisons against one
    table (:func:`~tokenmask.masking.lengths.geometric_bounds`), so that the torch path gets the
    same lengths bit for bit (two libraries' ``log`` may differ in the last bit).
    """
    bounds = geometric_bounds(p, max_length)
    survival = 1.0 - uniform  # in (0, 1]
    return (1 + bounds.size - np.searchsorted(bounds, survival, side="left")).astype(np.int64)


def ngram_lengths(uniform: np.ndarray, max_n: int) -> np.ndarray:
    """Draws of n in {1, …, max_n} with ``P(n) ∝ 1/n`` (max_n = 3: 6/11, 3/11, 2/11), by the
    table :func:`~tokenmask.masking.lengths.ngram_cdf`."""
    return np.searchsorted(ngram_cdf(max_n), uniform, side="right").astype(np.int64) + 1


def group_words(words: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Group consecutive word units into units of ``lengths[b, k]`` words each.

    Row ``b`` is cut into groups of ``lengths[b, 0]``, ``lengths[b, 1]``, … words (the last
    one truncated at the end of the row). A group never crosses a non-unit token (a special
    token between two documents): it is cut there.

    Args:
        words: ``(B, T)`` word unit map.
        lengths: ``(B, W)`` group lengths in words, ``W >= `` the number of words of any row.

    Returns:
        ``(B, T)`` unit map of the groups.

    ``words = [[-1, 0, 1, 1, 2, 3, -1]]``, ``lengths = [[3, 1, 1, 1]]``
    ``->  [[-1, 0, 0, 0, 0, 1, -1]]``
    """
    batch, _width = words.shape
    n_words = lengths.shape[1]
    if n_words == 0:
        return words.copy()
    ends = np.cumsum(lengths, axis=1)
    group_start = np.zeros((batch, n_words + 1), dtype=bool)
    begins = np.minimum(ends - lengths, n_words)
    group_start[np.arange(batch)[:, None], begins] = True
    group_start = group_start[:, :n_words]

    # Cut at breaks: a word whose first token follows a non-unit token (not at row start).
    starts = unit_starts(words)
    previous_is_unit = np.zeros_like(starts)
    previous_is_unit[:, 1:] = words[:, :-1] >= 0
    seen_unit = np.zeros_like(starts)
    seen_unit[:, 1:] = np.maximum.accumulate(words >= 0, axis=1)[:, :-1]
    breaks = starts & ~previous_is_unit & seen_unit
    rows, cols = np.nonzero(breaks)
    group_start[rows, words[rows, cols]] = True

    group_of_word = np.cumsum(group_start, axis=1) - 1  # (B, W)
    safe = np.maximum(words, 0)
    return np.where(words >= 0, np.take_along_axis(group_of_word, safe, axis=1), NO_UNIT)


def span_units(words: np.ndarray, keys: RowKeys, *, geometric_p: float = 0.2, max_words: int = 10) -> np.ndarray:
    """SpanBERT spans: consecutive whole words, lengths ~ Geometric(p) clipped to ``max_words``.

    The row's words are cut into consecutive spans of i.i.d. lengths; selecting spans
    uniformly then gives selected spans of exactly that length distribution, starting on word
    starts. Lengths are drawn from the ``UNIT_LENGTH`` stream, one per span index.
    """
    lengths = geometric_lengths(_length_uniforms(words, keys), geometric_p, max_words)
    return group_words(words, lengths)


def ngram_units(words: np.ndarray, keys: RowKeys, *, max_n: int = 3) -> np.ndarray:
    """Whole-word n-grams, n in 1..max_n with ``P(n) ∝ 1/n``, cut consecutively like spans."""
    return group_words(words, ngram_lengths(_length_uniforms(words, keys), max_n))


def _length_uniforms(words: np.ndarray, keys: RowKeys) -> np.ndarray:
    n_words = int(words.max(initial=NO_UNIT)) + 1
    return unit_float(keys.bits(Stream.UNIT_LENGTH, np.arange(n_words)))


def given_units(spans: np.ndarray, eligible: np.ndarray) -> np.ndarray:
    """Caller-supplied token spans, each one unit (e.g. entities); other tokens are not units.

    Args:
        spans: ``(B, S, 2)`` int64 ``[start, end)`` token offsets, sorted by start and not
            overlapping within a row; rows with fewer spans are padded with ``[-1, -1]``.
        eligible: ``(B, T)`` bool; ineligible tokens inside a span stay out of it.

    Returns:
        ``(B, T)`` unit map; unit ``s`` is span ``s`` of the row.

    Raises:
        ValueError: a span is empty, out of range, unsorted or overlapping.

    ``spans = [[[1, 3], [4, 5]]]``, T = 6, all eligible  ->  ``[[-1, 0, 0, -1, 1, -1]]``
    """
    batch, width = eligible.shape
    starts, ends = spans[..., 0], spans[..., 1]
    valid = starts >= 0
    if np.any(valid & ((ends <= starts) | (ends > width))):
        raise ValueError(f"given spans must satisfy 0 <= start < end <= {width} (sequence length)")
    previous_end = np.concatenate([np.zeros((batch, 1), dtype=ends.dtype), ends[:, :-1]], axis=1)
    if np.any(valid[:, 1:] & (starts[:, 1:] < previous_end[:, 1:])):
        raise ValueError("given spans must be sorted by start and must not overlap")
    span_index = np.broadcast_to(np.arange(spans.shape[1]), starts.shape)
    marker = np.full((batch, width), NO_UNIT, dtype=np.int64)
    rows = np.broadcast_to(np.arange(batch)[:, None], starts.shape)
    marker[rows[valid], starts[valid]] = span_index[valid]
    latest = np.maximum.accumulate(marker, axis=1)  # (B, T) last span started at or before t
    padded_ends = np.where(valid, ends, 0)
    inside = (latest >= 0) & (np.arange(width)[None, :] < np.take_along_axis(padded_ends, np.maximum(latest, 0), axis=1))
    return np.where(inside & eligible, latest, NO_UNIT)


def build_units(
    unit_config: UnitConfig,
    eligible: Units,
    keys: Any,
    *,
    word_ids: Units | None = None,
    given_spans: Units | None = None,
    term_mask: Units | None = None,
    ops: ModuleType | None = None,
) -> Units:
    """The ``(B, T)`` unit map of the configured strategy.

    ``ops`` holds the unit functions: this module (numpy arrays, the default) or
    :mod:`tokenmask.masking.torch_units` (torch tensors, with ``keys`` the ``(B,)`` key tensor);
    the choice of strategy is written once, here, for both.

    With phrases (strategy 'pmi', terms), ``word_ids`` are the merged ones: each phrase is one
    word, so 'pmi' is whole-word masking over them. ``term_mask`` (1 inside term occurrences)
    makes the token strategy keep each term's tokens together.

    Raises:
        ValueError: word ids missing for a word-based strategy, or spans missing for 'given'.
    """
    ops = ops or sys.modules[__name__]
    strategy = unit_config.strategy
    if strategy == "token":
        if term_mask is not None and word_ids is not None:
            return ops.term_token_units(word_ids, term_mask, eligible)
        return ops.token_units(eligible)
    if strategy == "given":
        if given_spans is None:
            raise ValueError("strategy 'given' needs given_spans ((B, S, 2) [start, end) offsets)")
        return ops.given_units(given_spans, eligible)
    if word_ids is None:
        raise ValueError(f"strategy {strategy!r} needs word_ids ((B, T), -1 for special tokens)")
    if word_ids.shape != eligible.shape:
        raise ValueError(f"word_ids has shape {tuple(word_ids.shape)}, input_ids {tuple(eligible.shape)}")
    words = ops.word_units(word_ids, eligible & (word_ids >= 0))
    if strategy in ("whole_word", "pmi"):
        return words
    if strategy == "span":
        return ops.span_units(words, keys, geometric_p=unit_config.span_geometric_p, max_words=unit_config.span_max_words)
    return ops.ngram_units(words, keys, max_n=unit_config.ngram_max_n)
