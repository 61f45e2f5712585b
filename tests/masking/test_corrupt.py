"""Corruption: exact outcome application, the 80/10/10 split, replacement draws."""

import numpy as np
import pytest

from tokenmask.masking import IGNORE_INDEX, CorruptionConfig, Outcome, VocabTables
from tokenmask.masking.corrupt import apply_outcomes, choose_outcomes, outcome_map
from tokenmask.masking.keys import RowKeys, Stream
from tokenmask.masking.units import word_units

VOCAB = VocabTables.from_ids(200, mask_token_id=103, protected_ids=[0, 101, 102], excluded_from_replacement=[1, 2])


def test_apply_outcomes_hand_worked():
    ids = np.array([[101, 7, 8, 9, 102]])
    keys = RowKeys.derive(np.array([0]), seed=0)
    flat, codes = np.array([1, 3]), np.array([Outcome.MASK, Outcome.KEEP], dtype=np.int8)
    inputs, labels = apply_outcomes(ids, flat, codes, keys, VOCAB)
    assert inputs.tolist() == [[101, 103, 8, 9, 102]]
    assert labels.tolist() == [[IGNORE_INDEX, 7, IGNORE_INDEX, 9, IGNORE_INDEX]]
    assert ids.tolist() == [[101, 7, 8, 9, 102]]  # not mutated
    assert outcome_map(ids.shape, flat, codes).tolist() == [[0, 1, 0, 3, 0]]


def test_random_replacements_are_replaceable_ids_only():
    ids = np.full((50, 200), 5, dtype=np.int64)
    keys = RowKeys.derive(np.arange(50), seed=1)
    flat = np.arange(ids.size)
    codes = np.full(flat.shape, Outcome.RANDOM, dtype=np.int8)
    inputs, labels = apply_outcomes(ids, flat, codes, keys, VOCAB)
    drawn = inputs.ravel()
    assert not VOCAB.protected[drawn].any()
    assert not np.isin(drawn, [1, 2]).any()
    # 10^4 uniform draws over 194 ids: every id appears (P(miss) = (1 - 1/194)^10^4 ≈ 4e-23).
    assert set(drawn.tolist()) == set(VOCAB.replaceable.tolist())
    assert (labels == 5).all()


def test_frequency_weighted_replacements():
    counts = np.zeros(200)
    counts[10], counts[20] = 3, 1
    vocab = VocabTables.from_ids(200, mask_token_id=103, protected_ids=[0], replace_counts=counts)
    assert vocab.replaceable.tolist() == [10, 20]
    keys = RowKeys.derive(np.arange(100), seed=2)
    ids = np.full((100, 200), 5, dtype=np.int64)
    flat = np.arange(ids.size)
    inputs, _ = apply_outcomes(ids, flat, np.full(flat.shape, Outcome.RANDOM, np.int8), keys, vocab)
    # share of id 10 ~ 0.75, sd = sqrt(.75*.25/2e4) = 0.0031; band = 5 sd.
    assert abs(np.mean(inputs == 10) - 0.75) < 5 * 0.0031
    assert set(np.unique(inputs).tolist()) == {10, 20}


@pytest.mark.parametrize("mask_p, random_p", [(0.8, 0.1), (1.0, 0.0), (0.5, 0.5), (0.0, 0.0)])
def test_outcome_split_on_1e5_targets(mask_p, random_p):
    # 10^5 targets; each share has sd <= sqrt(.25/1e5) = 0.0016; band = 5 sd.
    targets = np.ones((200, 500), dtype=bool)
    bits = RowKeys.derive(np.arange(200), seed=3).bits(Stream.SELECT, np.arange(500))
    flat, codes = choose_outcomes(targets, bits, CorruptionConfig(mask_replace_prob=mask_p, random_replace_prob=random_p))
    assert flat.size == targets.size
    for outcome, expected in ((Outcome.MASK, mask_p), (Outcome.RANDOM, random_p), (Outcome.KEEP, 1 - mask_p - random_p)):
        assert abs(np.mean(codes == outcome) - expected) < 5 * 0.0016


def test_per_unit_choice_is_shared_by_the_unit():
    word_ids = np.repeat(np.arange(100), 3)[None, :].repeat(20, 0)  # words of 3 tokens
    units = word_units(word_ids, np.ones_like(word_ids, dtype=bool))
    bits = RowKeys.derive(np.arange(20), seed=4).bits(Stream.SELECT, np.arange(300))
    flat, codes = choose_outcomes(np.ones_like(units, dtype=bool), bits, CorruptionConfig(per_unit=True), units)
    dense = outcome_map(units.shape, flat, codes).reshape(20, 100, 3)
    assert (dense == dense[..., :1]).all()
    assert len(np.unique(dense)) == 3  # all three outcomes occur across 2,000 units
