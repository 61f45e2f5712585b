"""Span and n-gram length distributions: hand-worked tables and probabilities, and their agreement."""

import numpy as np
import pytest

from tokenmask.masking.config import STRATEGIES, UnitConfig
from tokenmask.masking.lengths import (
    geometric_bounds,
    geometric_survival,
    ngram_cdf,
    ngram_weights,
    unit_length_probabilities,
)


def test_span_table_and_probabilities_hand_worked():
    # p = 0.5, clipped at 3 words: P(L > 0, 1, 2) = 1, 0.5, 0.25; P(L = k) = 0.5 P(L > k - 1) = 0.5, 0.25
    # below the clip, and the tail P(L = 3) = P(L > 2) = 0.25. The sampler's table: P(L > 2), P(L > 1).
    assert geometric_survival(0.5, 3).tolist() == [1.0, 0.5, 0.25]
    assert geometric_bounds(0.5, 3).tolist() == [0.25, 0.5]
    assert unit_length_probabilities(UnitConfig("span", span_geometric_p=0.5, span_max_words=3)).tolist() == [0.5, 0.25, 0.25]
    # p = 1: every span is one word (a table of zeros); one word at most: no table at all
    assert geometric_bounds(1.0, 3).tolist() == [0.0, 0.0]
    assert unit_length_probabilities(UnitConfig("span", span_geometric_p=1.0, span_max_words=3)).tolist() == [1.0, 0.0, 0.0]
    assert geometric_bounds(0.3, 1).size == 0
    assert unit_length_probabilities(UnitConfig("span", span_max_words=1)).tolist() == [1.0]


def test_ngram_table_and_probabilities_hand_worked():
    # weights 1, 1/2, 1/3 sum to 11/6: P(n) = 6/11, 3/11, 2/11, cumulative 6/11, 9/11 and exactly 1
    assert ngram_weights(3) == pytest.approx([1.0, 1 / 2, 1 / 3])
    assert ngram_cdf(3) == pytest.approx([6 / 11, 9 / 11, 1.0]) and ngram_cdf(3)[-1] == 1.0
    assert unit_length_probabilities(UnitConfig("ngram", ngram_max_n=3)) == pytest.approx([6 / 11, 3 / 11, 2 / 11])
    assert unit_length_probabilities(UnitConfig("ngram", ngram_max_n=1)).tolist() == [1.0]


@pytest.mark.parametrize("p, max_words", [(0.2, 10), (0.05, 30), (0.9, 4), (0.5, 2)])
def test_the_span_probabilities_are_what_the_sampler_table_holds(p, max_words):
    # The table holds P(L > k) for k = max_words - 1, …, 1: one minus the running sum of the probabilities.
    probabilities = unit_length_probabilities(UnitConfig("span", span_geometric_p=p, span_max_words=max_words))
    assert probabilities.shape == (max_words,) and probabilities.sum() == pytest.approx(1.0)
    tails = 1.0 - np.cumsum(probabilities)[:-1]  # P(L > k), k = 1, …, max_words - 1
    assert geometric_bounds(p, max_words) == pytest.approx(tails[::-1], abs=1e-12)


@pytest.mark.parametrize("max_n", [1, 2, 3, 7])
def test_the_ngram_probabilities_are_what_the_sampler_table_holds(max_n):
    probabilities = unit_length_probabilities(UnitConfig("ngram", ngram_max_n=max_n))
    assert probabilities.shape == (max_n,)
    assert ngram_cdf(max_n) == pytest.approx(np.cumsum(probabilities), abs=1e-12)


@pytest.mark.parametrize("strategy", [s for s in STRATEGIES if s not in ("span", "ngram")])
def test_strategies_that_draw_no_lengths_have_no_distribution(strategy):
    assert unit_length_probabilities(UnitConfig(strategy=strategy)) is None
