"""Selection: exact hand-worked cases, rates, floor and cap."""

import numpy as np
import pytest

from tokenmask.masking import SelectionConfig
from tokenmask.masking.keys import RowKeys, Stream, low32
from tokenmask.masking.select import select_tokens, select_units
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
