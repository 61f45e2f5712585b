"""Selection: exact hand-worked cases, rates, floor and cap; priority units (terms) first."""

import numpy as np
import pytest

from tokenmask.masking import SelectionConfig
from tokenmask.masking.keys import RowKeys, Stream, low32
from tokenmask.masking.select import fill_probability, priority_units, select_tokens, select_units
from tokenmask.masking.units import token_units, word_units

T, F = True, False


def keys_of(*fractions: float) -> np.ndarray:
    """Hand-made 32-bit selection keys: key / 2^32 = fraction."""
    return (np.array([fractions]) * 2**32).astype(np.uint32)


FOUR = token_units(np.array([[T, T, T, T]]))
KEYS = keys_of(0.9, 0.1, 0.7, 0.3)


def test_bernoulli_takes_keys_below_p():
    assert select_units(FOUR, KEYS, SelectionConfig(mlm_probability=0.5, min_masks_per_sequence=0)).tolist() == [[F, T, F, T]]


def test_floor_adds_the_next_smallest_keys():
    # below 0.5: units 1 (.1) and 3 (.3); the floor of 3 adds unit 2 (.7).
    chosen = select_units(FOUR, KEYS, SelectionConfig(mlm_probability=0.5, min_masks_per_sequence=3))
    assert chosen.tolist() == [[F, T, T, T]]


def test_cap_keeps_the_smallest_keys():
    chosen = select_units(FOUR, KEYS, SelectionConfig(mlm_probability=0.5, max_predictions=1))
    assert chosen.tolist() == [[F, T, F, F]]


def test_exact_takes_round_p_n_tokens():
    # 4 eligible, p = 0.5 -> 2 targets, the two smallest keys.
    chosen = select_units(FOUR, KEYS, SelectionConfig(mlm_probability=0.5, mode="exact"))
    assert chosen.tolist() == [[F, T, F, T]]


def test_exact_counts_tokens_of_whole_words():
    # words of 2, 1, 3 tokens with keys .5, .2, .9; 6 eligible, p = 0.5 -> budget 3 tokens.
    # Key order: word 1 (1 token, 1 covered), word 0 (2 tokens, 3 covered): budget met.
    words = word_units(np.array([[0, 0, 1, 2, 2, 2]]), np.ones((1, 6), dtype=bool))
    keys = keys_of(0.5, 0.6, 0.2, 0.9, 0.1, 0.1)  # only keys at word starts count
    chosen = select_units(words, keys, SelectionConfig(mlm_probability=0.5, mode="exact"))
    assert chosen.tolist() == [[T, T, T, F, F, F]]


def test_exact_may_overshoot_by_the_last_unit():
    # words of 3 and 1 tokens, keys .1 and .5; p = 0.25 of 4 -> budget 1; the first unit
    # taken already covers 3 tokens.
    words = word_units(np.array([[0, 0, 0, 1]]), np.ones((1, 4), dtype=bool))
    chosen = select_units(words, keys_of(0.1, 0.0, 0.0, 0.5), SelectionConfig(mlm_probability=0.25, mode="exact"))
    assert chosen.tolist() == [[T, T, T, F]]


def test_rows_without_eligible_tokens_get_no_target():
    units = token_units(np.array([[F, F, F], [F, T, F]]))
    chosen = select_units(units, keys_of(0.9, 0.9, 0.9).repeat(2, 0), SelectionConfig(min_masks_per_sequence=2))
    assert chosen.tolist() == [[F, F, F], [F, T, F]]


@pytest.mark.parametrize("mode", ["bernoulli", "exact"])
@pytest.mark.parametrize("floor, cap", [(0, None), (1, None), (3, 5), (0, 2)])
def test_select_tokens_fast_path_equals_general_path(mode, floor, cap):
    rng = np.random.default_rng(1)
    eligible = rng.random((64, 40)) < 0.7
    eligible[:5] = False
    eligible[5:10, 3:] = False
    keys = low32(RowKeys.derive(np.arange(64), seed=0).bits(Stream.SELECT, np.arange(40)))
    config = SelectionConfig(mlm_probability=0.2, mode=mode, min_masks_per_sequence=floor, max_predictions=cap)
    assert np.array_equal(select_tokens(eligible, keys, config), select_units(token_units(eligible), keys, config))


def test_bernoulli_rate_on_1e5_tokens():
    # 200 x 512 eligible tokens, p = 0.15: sd of the share = sqrt(.15*.85/102400) = 0.0011;
    # band = 5 sd. The floor of 1 never binds on 512 tokens (P(no target) = 0.85^512 ≈ 0).
    eligible = np.ones((200, 512), dtype=bool)
    keys = low32(RowKeys.derive(np.arange(200), seed=7).bits(Stream.SELECT, np.arange(512)))
    share = select_tokens(eligible, keys, SelectionConfig(mlm_probability=0.15)).mean()
    assert abs(share - 0.15) < 5 * 0.0011


def test_exact_rate_is_exact_per_row():
    rng = np.random.default_rng(2)
    eligible = rng.random((50, 100)) < 0.8
    keys = low32(RowKeys.derive(np.arange(50), seed=0).bits(Stream.SELECT, np.arange(100)))
    chosen = select_tokens(eligible, keys, SelectionConfig(mlm_probability=0.15, mode="exact"))
    expected = np.maximum(np.floor(0.15 * eligible.sum(axis=1) + 0.5), 1)
    assert np.array_equal(chosen.sum(axis=1), expected)
    assert not np.any(chosen & ~eligible)


# Priority units (terms): six token units with keys .9 .1 .7 .3 .5 .8, no floor unless said.
SIX = token_units(np.ones((1, 6), dtype=bool))
SIX_KEYS = keys_of(0.9, 0.1, 0.7, 0.3, 0.5, 0.8)


def test_bernoulli_takes_every_term_and_fills_the_rest_at_q():
    # terms at 0 (.9) and 2 (.7): both taken. p = 0.5, E = 6, P = 2: q = (3 - 2) / (6 - 2) = 0.25;
    # of the others (.1 .3 .5 .8) only unit 1 (.1) is below .25.
    terms = np.array([[T, F, T, F, F, F]])
    chosen = select_units(SIX, SIX_KEYS, SelectionConfig(mlm_probability=0.5, min_masks_per_sequence=0), priority=terms)
    assert chosen.tolist() == [[T, T, T, F, F, F]]


def test_bernoulli_terms_over_the_rate_take_everything_else_out():
    # a term of 3 tokens (key .9) and 3 single tokens (.1 .2 .3); p = 0.25, E = 6: p E = 1.5 < P = 3,
    # so q = 0: the term alone, though the other keys are all below p.
    units = word_units(np.array([[0, 0, 0, 1, 2, 3]]), np.ones((1, 6), dtype=bool))
    keys, terms = keys_of(0.9, 0.0, 0.0, 0.1, 0.2, 0.3), np.array([[F, T, F, F, F, F]])
    config = SelectionConfig(mlm_probability=0.25, min_masks_per_sequence=0)
    assert select_units(units, keys, config, priority=terms).tolist() == [[T, T, T, F, F, F]]
    # the floor of 2 units adds the next key in order: unit 1 (.1)
    floored = SelectionConfig(mlm_probability=0.25, min_masks_per_sequence=2)
    assert select_units(units, keys, floored, priority=terms).tolist() == [[T, T, T, T, F, F]]


def test_cap_drops_other_units_before_terms_then_terms_by_key():
    # terms at 0 (.9) and 2 (.7); order: 2, 0, then 1 (.1), 3 (.3)...; a cap of 1 keeps unit 2.
    terms = np.array([[T, F, T, F, F, F]])
    chosen = select_units(SIX, SIX_KEYS, SelectionConfig(mlm_probability=0.5, max_predictions=1), priority=terms)
    assert chosen.tolist() == [[F, F, T, F, F, F]]


def test_exact_spends_the_budget_on_terms_first():
    # terms at 4 (.5) and 5 (.8); p = 0.5 of 6 -> budget 3: the two terms (2 tokens), then the
    # smallest other key, unit 1 (.1).
    terms = np.array([[F, F, F, F, T, T]])
    chosen = select_units(SIX, SIX_KEYS, SelectionConfig(mlm_probability=0.5, mode="exact"), priority=terms)
    assert chosen.tolist() == [[F, T, F, F, T, T]]


def test_exact_terms_over_the_budget_are_taken_by_key():
    # terms at 0 (.9), 2 (.7) and 5 (.8); p = 1/3 of 6 -> budget 2: terms in key order 2 (.7),
    # 5 (.8); term 0 and the others (keys .1 .3 .5, all smaller) are left.
    terms = np.array([[T, F, T, F, F, T]])
    chosen = select_units(SIX, SIX_KEYS, SelectionConfig(mlm_probability=1 / 3, mode="exact"), priority=terms)
    assert chosen.tolist() == [[F, F, T, F, F, T]]


def test_a_unit_with_a_term_token_is_a_priority_unit_whole():
    # a span of words 0..2 (tokens 1-3) holds the term token 2: the whole span goes first.
    units = np.array([[-1, 0, 0, 0, 1, 1, -1]])
    assert priority_units(units, np.array([[F, F, T, F, F, F, T]])).tolist() == [[F, T, T, T, F, F, F]]


def test_fill_probability_hand_worked():
    # E = 100: P = 0 -> p; P = 5 -> (15 - 5) / 95; P = 40 > 15 -> 0; P = E -> 0.
    q = fill_probability(0.15, np.array([100, 100, 100, 100]), np.array([0, 5, 40, 100]))
    assert q.tolist() == pytest.approx([0.15, 10 / 95, 0.0, 0.0])


@pytest.mark.parametrize("mode", ["bernoulli", "exact"])
@pytest.mark.parametrize("floor, cap", [(0, None), (1, None), (3, 5)])
def test_rows_without_terms_are_selected_as_without_priority(mode, floor, cap):
    rng = np.random.default_rng(3)
    words = np.cumsum(rng.random((64, 40)) < 0.6, axis=1)
    eligible = rng.random((64, 40)) < 0.9
    units = word_units(words, eligible)
    keys = low32(RowKeys.derive(np.arange(64), seed=0).bits(Stream.SELECT, np.arange(40)))
    terms = (rng.random((64, 40)) < 0.05) & (np.arange(64) % 2 == 0)[:, None]  # terms in even rows only
    config = SelectionConfig(mlm_probability=0.2, mode=mode, min_masks_per_sequence=floor, max_predictions=cap)
    plain, first = select_units(units, keys, config), select_units(units, keys, config, priority=terms)
    assert np.array_equal(first[1::2], plain[1::2])
    assert np.array_equal(select_units(units, keys, config, priority=np.zeros_like(terms)), plain)


def test_bernoulli_with_terms_on_1e5_tokens():
    # 200 rows x 512 tokens; 2-token terms at tokens 10k+3, 10k+4 in about half the k (P ≈ 51 per
    # row, 10% < p = 15%). Every term is selected; the other tokens (units of one token) are
    # taken at q_r = (p E - P_r) / (E - P_r) ≈ 0.056 per row, independently (their keys are their
    # own hashes): their count is Poisson-binomial, mean Σ q_r n_r and variance Σ q_r (1 - q_r) n_r
    # (≈ 5,150 and 70²); band = 5 sd. The total share then has sd 70 / 102,400 ≈ 0.0007 around p.
    rows, width, p = 200, 512, 0.15
    rng = np.random.default_rng(5)
    word_ids = np.tile(np.arange(width), (rows, 1))
    terms = np.zeros((rows, width), dtype=bool)
    for k in range(width // 10):
        on = rng.random(rows) < 0.5
        terms[on, 10 * k + 3 : 10 * k + 5] = True
        word_ids[on, 10 * k + 4] = 10 * k + 3
    eligible = np.ones((rows, width), dtype=bool)
    units = word_units(word_ids, eligible)
    keys = low32(RowKeys.derive(np.arange(rows), seed=9).bits(Stream.SELECT, np.arange(width)))
    chosen = select_units(units, keys, SelectionConfig(mlm_probability=p, min_masks_per_sequence=0), priority=terms)
    assert chosen[terms].all()
    n_other = (~terms).sum(axis=1)
    q = fill_probability(p, np.full(rows, width), terms.sum(axis=1))
    mean, sd = (q * n_other).sum(), np.sqrt((q * (1 - q) * n_other).sum())
    assert 0.04 < q.mean() < 0.08 and sd > 50  # the setup is what the comment says
    assert abs((chosen & ~terms).sum() - mean) < 5 * sd
    assert abs(chosen.mean() - p) < 5 * sd / chosen.size
