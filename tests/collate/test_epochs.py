"""Counted epochs: a collator never given the epoch moves on when an example comes back."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from tokenmask import MaskingCollator
from tokenmask.blocks.encode import encode_texts
from tokenmask.collate import epochs as epochs_module
from tokenmask.collate.epochs import Epochs


def counted(batches: list[list[int]], epochs: Epochs | None = None) -> list[int]:
    epochs = epochs or Epochs()
    return [epochs.of(np.array(ids)) for ids in batches]


def test_a_pass_is_counted_when_an_example_comes_back():
    # ids 0-5 in batches of two, three times over: 0 on the first pass, 1 and 2 after
    assert counted([[0, 1], [2, 3], [4, 5]] * 3) == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    # a batch that straddles two passes: 1 came back, so the whole batch is the new pass
    assert counted([[0, 1], [2, 3], [1, 4], [0, 2]]) == [0, 0, 1, 1]
    # the same id twice in one call is one example in one epoch; it comes back in the next call
    assert counted([[7, 7], [7]]) == [0, 1]


def test_a_repeated_example_within_a_pass_moves_the_count_too():
    # ids from tokens: a text seen twice in a pass (id 3) gets new masks, and the count moves on with
    # it; 0 and 1 coming back then meet epoch 1, already new to them, so the count stays
    assert counted([[0, 1], [2, 3], [3, 4], [5, 6], [0, 1]]) == [0, 0, 1, 1, 1]


def test_set_stops_the_counting_and_refuses_a_negative_epoch():
    epochs = Epochs()
    assert counted([[0], [0]], epochs) == [0, 1]
    epochs.set(5)
    assert counted([[0], [0], [1]], epochs) == [5, 5, 5] and epochs.given
    with pytest.raises(ValueError, match="epoch must be >= 0"):
        epochs.set(-1)


def test_a_pass_longer_than_the_ids_kept_is_noticed_at_the_first_kept_one(monkeypatch):
    monkeypatch.setattr(epochs_module, "TRACKED", 4)
    # ids 0-3 are kept, 4-7 are not (the set is full): 6 coming back is not seen, 1 is
    assert counted([[0, 1], [2, 3], [4, 5], [6, 7], [6], [1, 2]]) == [0, 0, 0, 0, 0, 1]


def test_the_collator_counts_per_pass_and_the_masks_are_those_of_set_epoch(bert_tokenizer, lines):
    features = encode_texts(lines[:12], bert_tokenizer)  # ids 0-11
    counting = MaskingCollator(bert_tokenizer, seed=3)
    got = [counting(features[i : i + 4])["labels"] for i in (0, 4, 8, 0, 4, 8)]
    assert counting.epoch == 1
    pinned = MaskingCollator(bert_tokenizer, seed=3)
    for index, start in enumerate((0, 4, 8, 0, 4, 8)):
        expected = pinned.collate(features[start : start + 4], epoch=index // 3)["labels"]
        assert torch.equal(got[index], expected)


def test_dataloader_workers_without_set_epoch_warn_once_per_epoch(bert_tokenizer, lines):
    features = encode_texts(lines[:16], bert_tokenizer)
    collator = MaskingCollator(bert_tokenizer, seed=0)

    def warned(features):  # what the collator warns in the worker, sent back with the batch
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            collator(features)
        return [str(w.message) for w in caught]

    def epoch() -> list[str]:
        loader = torch.utils.data.DataLoader(features, batch_size=4, num_workers=2, collate_fn=warned)
        return [message for messages in loader for message in messages]

    (message,) = epoch()  # four batches on two workers: the first worker's first call warns
    assert "DataLoader workers" in message and "collator.set_epoch(epoch)" in message
    assert len(epoch()) == 1  # a new epoch starts new workers from the same collator: once more
    collator(features[:4])  # a batch looked at in the main process: the workers still look around
    assert len(epoch()) == 1
    collator.set_epoch(0)
    assert epoch() == []


def test_data_parallel_ranks_without_set_epoch_warn_on_the_first_rank(bert_tokenizer, lines, monkeypatch):
    features = encode_texts(lines[:4], bert_tokenizer)
    monkeypatch.setattr(torch.distributed, "is_available", lambda: True)
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.distributed, "get_world_size", lambda: 2)
    for rank, expected in ((0, 1), (1, 0)):
        monkeypatch.setattr(torch.distributed, "get_rank", lambda rank=rank: rank)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            collator = MaskingCollator(bert_tokenizer)
            collator(features)
            collator(features)  # once per collator
        assert [("data-parallel ranks" in str(w.message)) for w in caught] == [True] * expected
    pinned = MaskingCollator(bert_tokenizer)
    pinned.set_epoch(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pinned(features)
