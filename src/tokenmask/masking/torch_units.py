""":mod:`.units` in torch: the same unit maps, on torch tensors where they are.

Same numbers bit for bit, on the CPU or an accelerator: the length tables (span bounds, n-gram
cdf) are the numpy path's own (:mod:`.lengths`), searched the same way. Nothing here copies to
the host; only :func:`given_units`' input check syncs.
"""

from __future__ import annotations

import torch

from tokenmask.masking.keys import Stream
from tokenmask.masking.lengths import geometric_bounds, ngram_cdf
from tokenmask.masking.torch_keys import stream_bits, unit_float
from tokenmask.masking.units import NO_UNIT


def _positions(like: torch.Tensor) -> torch.Tensor:
    """``(1, T)`` int64 positions on ``like``'s device."""
    return torch.arange(like.shape[1], device=like.device)[None, :]


def token_units(eligible: torch.Tensor) -> torch.Tensor:
    """:func:`tokenmask.masking.units.token_units`: each eligible token its own unit."""
    return torch.where(eligible, eligible.cumsum(dim=1) - 1, NO_UNIT)


def word_units(word_ids: torch.Tensor, eligible: torch.Tensor) -> torch.Tensor:
    """:func:`tokenmask.masking.units.word_units`: all pieces of a word form one unit."""
    starts = eligible.clone()
    starts[:, 1:] &= ~eligible[:, :-1] | (word_ids[:, 1:] != word_ids[:, :-1])
    units = starts.cumsum(dim=1) - 1
    return torch.where(eligible, units, NO_UNIT)


def term_token_units(word_ids: torch.Tensor, term_mask: torch.Tensor, eligible: torch.Tensor) -> torch.Tensor:
    """:func:`tokenmask.masking.units.term_token_units`: a term's tokens one unit, other tokens their own."""
    own = word_ids.max().clamp(min=0) + 1 + _positions(word_ids)  # a fresh id per token
    return word_units(torch.where(term_mask.bool() & (word_ids >= 0), word_ids, own), eligible)


def unit_starts(units: torch.Tensor) -> torch.Tensor:
    """:func:`tokenmask.masking.units.unit_starts`: True at the first token of every unit."""
    running = units.cummax(dim=1).values
    previous = torch.full_like(running, NO_UNIT)
    previous[:, 1:] = running[:, :-1]
    return units > previous


def spread_from_starts(values: torch.Tensor, starts: torch.Tensor) -> torch.Tensor:
    """:func:`tokenmask.masking.units.spread_from_starts`: a boolean from each unit's first token to all of it."""
    encoded = torch.where(starts, _positions(values) * 2 + values.long(), 0)
    return (encoded.cummax(dim=1).values & 1).bool()


def first_positions(units: torch.Tensor, starts: torch.Tensor) -> torch.Tensor:
    """:func:`tokenmask.masking.units.first_positions`: the position of each token's unit start."""
    return torch.where(starts, _positions(units), 0).cummax(dim=1).values


def geometric_lengths(uniform: torch.Tensor, p: float, max_length: int) -> torch.Tensor:
    """:func:`tokenmask.masking.units.geometric_lengths`: Geometric(p) lengths clipped to ``max_length``."""
    bounds = torch.as_tensor(geometric_bounds(p, max_length), device=uniform.device)
    return 1 + bounds.numel() - torch.searchsorted(bounds, 1.0 - uniform, right=False)


def ngram_lengths(uniform: torch.Tensor, max_n: int) -> torch.Tensor:
    """:func:`tokenmask.masking.units.ngram_lengths`: n in {1, …, max_n} with ``P(n) ∝ 1/n``."""
    cdf = torch.as_tensor(ngram_cdf(max_n), device=uniform.device)
    return torch.searchsorted(cdf, uniform, right=True) + 1


def group_words(words: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """:func:`tokenmask.masking.units.group_words`: consecutive words in groups of ``lengths``
    words, cut at non-unit tokens. ``lengths`` is ``(B, W)``, W at least the words of any row."""
    batch, n_words = lengths.shape
    if n_words == 0:
        return words.clone()
    ends = lengths.cumsum(dim=1)
    group_start = torch.zeros((batch, n_words + 1), dtype=torch.bool, device=words.device)
    group_start.scatter_(1, (ends - lengths).clamp(max=n_words), True)
    # Cut at breaks: a word whose first token follows a non-unit token (not at row start).
    is_unit = words >= 0
    previous_is_unit = torch.zeros_like(is_unit)
    previous_is_unit[:, 1:] = is_unit[:, :-1]
    seen_unit = torch.zeros_like(is_unit)
    seen_unit[:, 1:] = is_unit.cummax(dim=1).values[:, :-1]
    breaks = unit_starts(words) & ~previous_is_unit & seen_unit
    group_start.scatter_(1, torch.where(breaks, words, n_words), True)  # column n_words: no break
    group_of_word = group_start[:, :n_words].cumsum(dim=1) - 1  # (B, W)
    return torch.where(is_unit, group_of_word.gather(1, words.clamp(min=0)), NO_UNIT)


def span_units(words: torch.Tensor, keys: torch.Tensor, *, geometric_p: float = 0.2, max_words: int = 10) -> torch.Tensor:
    """:func:`tokenmask.masking.units.span_units`: SpanBERT spans of whole words."""
    return group_words(words, geometric_lengths(_length_uniforms(words, keys), geometric_p, max_words))


def ngram_units(words: torch.Tensor, keys: torch.Tensor, *, max_n: int = 3) -> torch.Tensor:
    """:func:`tokenmask.masking.units.ngram_units`: whole-word n-grams with ``P(n) ∝ 1/n``."""
    return group_words(words, ngram_lengths(_length_uniforms(words, keys), max_n))


def _length_uniforms(words: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """``(B, T)`` uniforms, one per word index (T bounds the words of a row: no host sync for
    the true count; the numpy path draws the same words, fewer of them)."""
    return unit_float(stream_bits(keys, Stream.UNIT_LENGTH, torch.arange(words.shape[1], device=words.device)))


def given_units(spans: torch.Tensor, eligible: torch.Tensor) -> torch.Tensor:
    """:func:`tokenmask.masking.units.given_units`: caller-supplied token spans, each one unit.

    Raises:
        ValueError: a span is empty, out of range, unsorted or overlapping.
    """
    batch, width = eligible.shape
    starts, ends = spans[..., 0], spans[..., 1]
    valid = starts >= 0
    if bool((valid & ((ends <= starts) | (ends > width))).any()):
        raise ValueError(f"given spans must satisfy 0 <= start < end <= {width} (sequence length)")
    if bool((valid[:, 1:] & (starts[:, 1:] < ends[:, :-1])).any()):
        raise ValueError("given spans must be sorted by start and must not overlap")
    span_index = torch.arange(spans.shape[1], device=spans.device).expand_as(starts)
    marker = torch.full((batch, width + 1), NO_UNIT, dtype=torch.int64, device=eligible.device)
    marker.scatter_(1, torch.where(valid, starts, width), torch.where(valid, span_index, NO_UNIT))
    latest = marker[:, :width].cummax(dim=1).values  # (B, T) last span started at or before t
    span_end = torch.where(valid, ends, 0).gather(1, latest.clamp(min=0))
    inside = (latest >= 0) & (_positions(eligible) < span_end)
    return torch.where(inside & eligible, latest, NO_UNIT)
