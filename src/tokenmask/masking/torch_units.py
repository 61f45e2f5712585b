"""The keys and unit maps of :mod:`.keys` and :mod:`.units`, on torch tensors where they are.

Same numbers bit for bit, on the CPU or an accelerator: the 64-bit counter words are int64
tensors read as two's complement (products and sums wrap modulo 2^64 as uint64 ones do; right
shifts are made logical by masking), and every table (span bounds, n-gram cdf) is the numpy
path's own. Nothing here copies to the host; only :func:`given_units`' input check syncs.
"""

from __future__ import annotations

import torch

from tokenmask.masking.keys import _GAMMA, _MUL1, _MUL2, Stream, _mix_int
from tokenmask.masking.units import NO_UNIT, geometric_bounds, ngram_cdf


def _signed(word: int) -> int:
    """A 64-bit word (a Python int in ``[0, 2^64)``) as the int64 with the same bits."""
    return word - (1 << 64) if word >= 1 << 63 else word


_GAMMA_S, _MUL1_S, _MUL2_S = _signed(_GAMMA), _signed(_MUL1), _signed(_MUL2)
_LOW32 = (1 << 32) - 1


def shift_right(words: torch.Tensor, bits: int) -> torch.Tensor:
    """Logical right shift of int64 words read as uint64 (torch's ``>>`` copies the sign bit)."""
    return (words >> bits) & ((1 << (64 - bits)) - 1)


def mix64(words: torch.Tensor) -> torch.Tensor:
    """:func:`tokenmask.masking.keys.mix64` on int64 tensors: the SplitMix64 finaliser."""
    words = words ^ shift_right(words, 30)
    words = words * _MUL1_S
    words = words ^ shift_right(words, 27)
    words = words * _MUL2_S
    return words ^ shift_right(words, 31)


def row_keys(example_ids: torch.Tensor, *, seed: int, epoch: int) -> torch.Tensor:
    """:meth:`RowKeys.derive <tokenmask.masking.keys.RowKeys.derive>`: ``(B,)`` int64 keys."""
    base = _signed(_mix_int(_mix_int(seed) + epoch * _GAMMA))
    return mix64(example_ids.reshape(-1).to(torch.int64) * _GAMMA_S + base)


def stream_bits(keys: torch.Tensor, stream: Stream, positions: torch.Tensor) -> torch.Tensor:
    """:meth:`RowKeys.bits <tokenmask.masking.keys.RowKeys.bits>`: ``(B, N)`` int64 words for
    ``(N,)`` shared or ``(B, N)`` per-row positions."""
    stream_keys = keys ^ _signed(_mix_int(int(stream) * _GAMMA))
    return mix64(stream_keys[:, None] + (positions + 1) * _GAMMA_S)


def stream_bits_at(keys: torch.Tensor, stream: Stream, rows: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """:meth:`RowKeys.bits_at <tokenmask.masking.keys.RowKeys.bits_at>`: ``(N,)`` words at ``(row, position)`` pairs."""
    stream_keys = keys ^ _signed(_mix_int(int(stream) * _GAMMA))
    return mix64(stream_keys[rows] + (positions + 1) * _GAMMA_S)


def low32(words: torch.Tensor) -> torch.Tensor:
    """The low 32 bits of the words, as non-negative int64."""
    return words & _LOW32


def high32(words: torch.Tensor) -> torch.Tensor:
    """The high 32 bits of the words, as non-negative int64."""
    return shift_right(words, 32)


def unit_float(words: torch.Tensor) -> torch.Tensor:
    """Uniform float64 in ``[0, 1)`` from the top 53 bits, as :func:`tokenmask.masking.keys.unit_float`."""
    return shift_right(words, 11).to(torch.float64) * (1.0 / (1 << 53))


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


def _length_uniforms(words: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """``(B, T)`` uniforms, one per word index (T bounds the words of a row: no host sync for
    the true count; the numpy path draws the same words, fewer of them)."""
    return unit_float(stream_bits(keys, Stream.UNIT_LENGTH, torch.arange(words.shape[1], device=words.device)))


def span_units(words: torch.Tensor, keys: torch.Tensor, *, geometric_p: float = 0.2, max_words: int = 10) -> torch.Tensor:
    """:func:`tokenmask.masking.units.span_units`: SpanBERT spans of whole words."""
    bounds = torch.as_tensor(geometric_bounds(geometric_p, max_words), device=words.device)
    survival = 1.0 - _length_uniforms(words, keys)
    lengths = 1 + bounds.numel() - torch.searchsorted(bounds, survival, right=False)
    return group_words(words, lengths)


def ngram_units(words: torch.Tensor, keys: torch.Tensor, *, max_n: int = 3) -> torch.Tensor:
    """:func:`tokenmask.masking.units.ngram_units`: whole-word n-grams with ``P(n) ∝ 1/n``."""
    cdf = torch.as_tensor(ngram_cdf(max_n), device=words.device)
    return group_words(words, torch.searchsorted(cdf, _length_uniforms(words, keys), right=True) + 1)


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
