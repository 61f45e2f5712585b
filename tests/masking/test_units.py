"""Unit maps: exact hand-worked cases, and the span / n-gram length distributions."""

import numpy as np
import pytest

from tokenmask.masking.keys import RowKeys
from tokenmask.masking.units import (
    first_positions,
    geometric_lengths,
    given_units,
    group_words,
    merge_words,
    ngram_lengths,
    ngram_units,
    span_units,
    spread_from_starts,
    term_token_units,
    token_units,
    unit_starts,
    word_units,
)

T, F = True, False


def test_token_units():
    assert token_units(np.array([[F, T, T, F, T]])).tolist() == [[-1, 0, 1, -1, 2]]


def test_word_units_group_pieces_and_split_at_ineligible_tokens():
    # [CLS] play ##ing now [SEP] ##ing(continuation after a special) [SEP]
    word_ids = np.array([[-1, 0, 0, 1, -1, 1, -1]])
    eligible = np.array([[F, T, T, T, F, T, F]])
    assert word_units(word_ids, eligible).tolist() == [[-1, 0, 0, 1, -1, 2, -1]]


def test_unit_starts_and_first_positions():
    units = np.array([[-1, 0, 0, 1, -1, 1, 2]])  # unit 1 interrupted by an ineligible token
    assert unit_starts(units).tolist() == [[F, T, F, T, F, F, T]]
    first = first_positions(units, unit_starts(units))
    assert first[0, [1, 2, 3, 5, 6]].tolist() == [1, 1, 3, 3, 6]


def test_spread_from_starts():
    values = np.array([[F, T, F, F, F]])
    starts = np.array([[T, T, F, T, F]])
    assert spread_from_starts(values, starts).tolist() == [[F, T, T, F, F]]


def test_group_words_cuts_consecutive_groups_and_at_breaks():
    words = np.array([[-1, 0, 1, 1, 2, 3, -1]])
    assert group_words(words, np.array([[3, 1, 1, 1]])).tolist() == [[-1, 0, 0, 0, 0, 1, -1]]
    # A special token between words 1 and 2 cuts the 3-word group.
    words = np.array([[-1, 0, 1, -1, 2, 3, -1]])
    assert group_words(words, np.array([[3, 1, 1, 1]])).tolist() == [[-1, 0, 0, -1, 1, 2, -1]]


def test_given_units():
    eligible = np.ones((1, 6), dtype=bool)
    spans = np.array([[[1, 3], [4, 5], [-1, -1]]])
    assert given_units(spans, eligible).tolist() == [[-1, 0, 0, -1, 1, -1]]
    eligible[0, 2] = False  # an ineligible token inside a span stays out of it
    assert given_units(spans, eligible).tolist() == [[-1, 0, -1, -1, 1, -1]]


@pytest.mark.parametrize(
    "spans, message",
    [([[[2, 2]]], "start < end"), ([[[0, 9]]], "start < end"), ([[[2, 4], [3, 5]]], "overlap"), ([[[3, 4], [0, 1]]], "overlap")],
)
def test_given_units_rejects_bad_spans(spans, message):
    with pytest.raises(ValueError, match=message):
        given_units(np.array(spans), np.ones((1, 6), dtype=bool))


def test_geometric_lengths_exact_quantiles():
    # P(L = 1) = p = 0.2: u < 0.2 -> 1; P(L <= 2) = 0.36: u in [0.2, 0.36) -> 2.
    u = np.array([0.0, 0.19, 0.21, 0.35, 0.37, 0.999999])
    assert geometric_lengths(u, 0.2, 10).tolist() == [1, 1, 2, 2, 3, 10]
    assert geometric_lengths(u, 1.0, 10).tolist() == [1] * 6


def test_ngram_lengths_exact_quantiles():
    # P(n) = 6/11, 3/11, 2/11: cumulative 0.5454, 0.8181, 1.
    assert ngram_lengths(np.array([0.0, 0.54, 0.55, 0.81, 0.82, 0.99]), 3).tolist() == [1, 1, 2, 2, 3, 3]


def _group_lengths(units: np.ndarray) -> np.ndarray:
    """Lengths (in tokens = words here) of all units but the last of each row (truncated)."""
    out = []
    for row in units:
        counts = np.bincount(row[row >= 0])
        out.extend(counts[:-1].tolist())
    return np.array(out)


def test_span_lengths_follow_the_clipped_geometric():
    # 200 rows x 1000 one-token words -> ~36k complete spans. For each length k the share
    # has binomial sd sqrt(q(1-q)/n) <= 0.0027; band = 5 sd.
    words = np.tile(np.arange(1000), (200, 1))
    units = span_units(words, RowKeys.derive(np.arange(200), seed=3), geometric_p=0.2, max_words=10)
    lengths = _group_lengths(units)
    n = lengths.size
    assert n > 30_000
    for k in range(1, 11):
        expected = 0.2 * 0.8 ** (k - 1) if k < 10 else 0.8**9
        share = np.mean(lengths == k)
        assert abs(share - expected) < 5 * np.sqrt(expected * (1 - expected) / n), (k, share, expected)
    assert lengths.max() == 10 and lengths.min() == 1


def test_ngram_lengths_follow_inverse_n():
    words = np.tile(np.arange(1000), (100, 1))
    lengths = _group_lengths(ngram_units(words, RowKeys.derive(np.arange(100), seed=4), max_n=3))
    n = lengths.size
    for k, expected in ((1, 6 / 11), (2, 3 / 11), (3, 2 / 11)):
        share = np.mean(lengths == k)
        assert abs(share - expected) < 5 * np.sqrt(expected * (1 - expected) / n)


def test_spans_start_on_word_starts_and_cover_whole_words():
    # words of 1-3 pieces; a span unit never splits a word.
    rng = np.random.default_rng(0)
    pieces = rng.integers(1, 4, size=300)
    word_ids = np.repeat(np.arange(300), pieces)[None, :]
    words = word_units(word_ids, np.ones_like(word_ids, dtype=bool))
    units = span_units(words, RowKeys.derive(np.array([0]), seed=0))
    for w in range(300):
        assert len(set(units[0][word_ids[0] == w].tolist())) == 1


def test_merge_words_by_word_spans():
    # words 1..2 and 4..5 merged: word 2 takes id 1, word 5 id 4; specials (-1) and word 3 unchanged
    word_ids = np.array([-1, 0, 1, 1, 2, 3, 4, 5, 5, -1])
    merged = merge_words(word_ids, np.array([[1, 3], [4, 6]]))
    assert merged.tolist() == [-1, 0, 1, 1, 1, 3, 4, 4, 4, -1]
    assert merge_words(word_ids, np.zeros((0, 2), dtype=np.int64)).tolist() == word_ids.tolist()
    assert merged is not word_ids and word_ids.tolist() == [-1, 0, 1, 1, 2, 3, 4, 5, 5, -1]


def test_term_token_units_keep_terms_together_and_split_other_words():
    # [CLS] a ##b (term, merged id 1) c ##d (not a term) [SEP]: the term is one unit, c and ##d one each
    word_ids = np.array([[-1, 0, 1, 1, 2, 2, -1]])
    terms = np.array([[0, 0, 1, 1, 0, 0, 0]])
    eligible = np.array([[False, True, True, True, True, True, False]])
    assert term_token_units(word_ids, terms, eligible).tolist() == [[-1, 0, 1, 1, 2, 3, -1]]
