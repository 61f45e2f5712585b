"""Length-grouped batches: every example once per epoch, new batches each epoch, the same in
every run, and less padding than random batches."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenmask.labelled.sampler import LengthGroupedBatches, padded_slots


def review_lengths(n=3000, seed=0):
    """Lengths spread like review snippets: 3 to ~80 tokens, median ~26."""
    return np.clip(np.random.default_rng(seed).gamma(4.0, 6.7, n).astype(int) + 3, 3, 80).tolist()


def test_padded_slots_by_hand():
    assert padded_slots([3, 5, 2], [[0, 1], [2]]) == 2 * 5 + 1 * 2
    assert padded_slots([3, 5, 2], []) == 0


@settings(max_examples=80, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 100), max_size=400),
    batch_size=st.integers(1, 40),
    window=st.one_of(st.none(), st.integers(1, 8)),
    epoch=st.integers(0, 5),
    shuffle=st.booleans(),
)
def test_every_example_once_per_epoch(lengths, batch_size, window, epoch, shuffle):
    sampler = LengthGroupedBatches(lengths, batch_size, seed=3, window=window, shuffle=shuffle)
    sampler.set_epoch(epoch)
    batches = list(sampler)
    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
    assert len(batches) == len(sampler)
    assert sum(len(batch) < batch_size for batch in batches) <= 1  # one short batch at most
    dropping = LengthGroupedBatches(lengths, batch_size, seed=3, window=window, shuffle=shuffle, drop_last=True)
    dropping.set_epoch(epoch)
    kept = list(dropping)
    assert len(kept) == len(dropping) == len(lengths) // batch_size
    assert all(len(batch) == batch_size for batch in kept)


def test_batches_change_with_the_epoch_not_with_the_run():
    lengths = review_lengths()
    first = LengthGroupedBatches(lengths, 32, seed=7)
    epochs = []
    for epoch in range(3):
        first.set_epoch(epoch)
        epochs.append(first.batches())
    second = LengthGroupedBatches(lengths, 32, seed=7)  # a second run
    for epoch in (2, 0, 1):  # in any order: no hidden state carried between epochs
        second.set_epoch(epoch)
        assert list(second) == epochs[epoch]
    assert epochs[0] != epochs[1] != epochs[2] != epochs[0]
    assert {tuple(sorted(b)) for b in epochs[0]} != {tuple(sorted(b)) for b in epochs[1]}  # other batch-mates
    other_seed = LengthGroupedBatches(lengths, 32, seed=8)
    assert other_seed.batches() != epochs[0]


def test_grouping_pads_far_less_than_random_batches():
    lengths = review_lengths()
    total = sum(lengths)
    random_order = np.random.default_rng(0).permutation(len(lengths))
    random_batches = [random_order[i : i + 32].tolist() for i in range(0, len(lengths), 32)]
    grouped = padded_slots(lengths, LengthGroupedBatches(lengths, 32).batches())
    # Random batches of 32 are as wide as their longest of 32 draws: ~1.9x the real tokens here.
    # Sorting windows of 50 batches leaves each batch within a few tokens of its rows' lengths.
    assert padded_slots(lengths, random_batches) > 1.5 * total
    assert grouped < 1.1 * total
    assert padded_slots(lengths, LengthGroupedBatches(lengths, 32, window=None).batches()) <= grouped
    assert padded_slots(lengths, LengthGroupedBatches(lengths, 32, window=1).batches()) > 1.5 * total  # no sorting


def test_without_shuffle_batches_are_sorted_longest_first_every_epoch():
    sampler = LengthGroupedBatches([2, 9, 4, 9, 1], 2, shuffle=False)
    assert sampler.batches() == [[1, 3], [2, 0], [4]]
    sampler.set_epoch(4)
    assert sampler.batches() == [[1, 3], [2, 0], [4]]


def test_works_as_a_dataloader_batch_sampler():
    rows = [{"input_ids": list(range(n)), "id": i} for i, n in enumerate(review_lengths(200))]
    sampler = LengthGroupedBatches([len(r["input_ids"]) for r in rows], 16, seed=1)
    loader = torch.utils.data.DataLoader(rows, batch_sampler=sampler, collate_fn=lambda batch: batch)
    assert [[r["id"] for r in batch] for batch in loader] == sampler.batches()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"batch_size": 0}, "batch_size must be >= 1"),
        ({"window": 0}, "window must be >= 1 batch or None"),
        ({"seed": -1}, "seed must be >= 0"),
        ({"lengths": [3, -1]}, "lengths must be >= 0"),
    ],
)
def test_bad_settings_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        LengthGroupedBatches(**{"lengths": [3, 4], "batch_size": 2, **kwargs})
    with pytest.raises(ValueError, match="epoch must be >= 0"):
        LengthGroupedBatches([1], 1).set_epoch(-1)
