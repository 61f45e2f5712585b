"""Stratified training samples: label shares kept, same seed same sample, nested across sizes."""

from collections import Counter

import pytest

from tokenmask.labelled.subsets import stratified_order, stratified_sample

# 62.8% fresh like Rotten Tomatoes' validation side; and a three-label set
TWO = ["fresh"] * 628 + ["rotten"] * 372
THREE = ["a"] * 500 + ["b"] * 300 + ["c"] * 200


@pytest.mark.parametrize("labels, slack", [(TWO, 1.0), (THREE, 2.0)], ids=["two labels", "three labels"])
@pytest.mark.parametrize("seed", [0, 1, 7])
def test_every_size_keeps_the_label_shares(labels, slack, seed):
    """Two labels: each label's count is n·share rounded down or up (|count - n·share| < 1);
    with more labels, within 2 (the bound proved in stratified_order's docstring)."""
    shares = {label: count / len(labels) for label, count in Counter(labels).items()}
    for size in list(range(1, 60)) + [100, 300, 999]:
        counts = Counter(labels[i] for i in stratified_sample(labels, size, seed=seed))
        assert sum(counts.values()) == size
        for label, share in shares.items():
            assert abs(counts[label] - size * share) < slack, (size, label, counts)


def test_same_seed_same_sample_other_seed_other_sample():
    assert stratified_sample(TWO, 100, seed=3) == stratified_sample(TWO, 100, seed=3)
    assert stratified_sample(TWO, 100, seed=3) != stratified_sample(TWO, 100, seed=4)
    assert stratified_order(TWO, seed=5) != stratified_order(TWO, seed=6)


def test_samples_of_one_seed_are_nested():
    small, middle, large = (set(stratified_sample(THREE, n, seed=2)) for n in (100, 300, 999))
    assert small < middle < large


def test_all_and_too_large_take_everything_in_order():
    assert stratified_sample(TWO, None, seed=0) == list(range(1000))
    assert stratified_sample(TWO, 5000, seed=0) == list(range(1000))
    assert sorted(stratified_order(TWO, seed=0)) == list(range(1000))


def test_size_below_one_is_refused():
    with pytest.raises(ValueError, match="sizes must be >= 1"):
        stratified_sample(TWO, 0, seed=0)
