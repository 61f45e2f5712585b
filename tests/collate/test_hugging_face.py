"""MaskingCollator in place of Hugging Face's DataCollatorForLanguageModeling: what a user who swaps
the class name meets (the differences that remain are listed in docs/masking.md)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from transformers import BertTokenizerFast

from tokenmask import MaskingCollator
from tokenmask.blocks.encode import encode_texts
from tokenmask.masking import IGNORE_INDEX


@pytest.fixture(scope="module")
def specials_only(tmp_path_factory):
    """A WordPiece tokenizer whose five ids are all special: Hugging Face's collator tests use one."""
    folder = tmp_path_factory.mktemp("specials-only")
    (folder / "vocab.txt").write_text("[UNK]\n[CLS]\n[SEP]\n[PAD]\n[MASK]\n", encoding="utf-8")
    tokenizer = BertTokenizerFast.from_pretrained(folder)
    assert len(tokenizer) == 5 and set(tokenizer.all_special_ids) == set(range(5))
    return tokenizer


@pytest.fixture
def no_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


def targets_of(batch) -> torch.Tensor:
    return batch["labels"] != IGNORE_INDEX


def test_a_vocabulary_of_special_tokens_keeps_the_random_share_and_says_so(specials_only):
    features = [{"input_ids": list(range(1000)), "id": row} for row in range(2)]  # two rows, two masks
    with pytest.warns(UserWarning, match="no random replacement can be drawn") as caught:
        collator = MaskingCollator(specials_only, seed=42)
        collator.mlm_probability = 0.15  # another setting: no second warning
    assert len(caught) == 1 and caught[0].filename == __file__
    with pytest.warns(UserWarning, match="beyond the vocabulary's 5 ids"):  # ids 5..999 are no one's
        batch = collator(features)
    original = torch.arange(1000).expand(2, -1)
    targets = targets_of(batch)
    assert not targets[:, :5].any() and targets.sum() > 200  # specials never; about 15% of 995 per row
    assert torch.equal(batch["labels"][targets], original[targets])
    changed = batch["input_ids"] != original
    assert (batch["input_ids"][changed] == specials_only.mask_token_id).all()  # masked or kept, never drawn
    kept = (~changed & targets).sum() / targets.sum()
    assert 0.1 < kept < 0.3  # the random 10% kept as well as the kept 10%: 20%, sd 0.023 at ~300 targets


def test_no_replaceable_id_is_needed_without_random_replacements(specials_only, no_warnings):
    collator = MaskingCollator(specials_only, random_replace_prob=0.0, seed=0)
    batch = collator([{"input_ids": [1, 2, 3, 4, 0]}])  # specials only: nothing to mask, no error
    assert (batch["labels"] == IGNORE_INDEX).all()


def test_ids_the_tokenizer_does_not_know_are_ordinary_targets_never_drawn(bert_tokenizer):
    size = len(bert_tokenizer)
    features = [{"input_ids": [101, size + 7, 2000, size + 40, 102]}]
    collator = MaskingCollator(bert_tokenizer, mlm_probability=1.0, mask_replace_prob=0.0, random_replace_prob=1.0)
    with pytest.warns(UserWarning, match="another tokenizer"):
        batch = collator(features)
    assert batch["labels"].tolist() == [[IGNORE_INDEX, size + 7, 2000, size + 40, IGNORE_INDEX]]
    drawn = batch["input_ids"][0, 1:4]
    assert (drawn < size).all() and not torch.from_numpy(collator.vocab.protected)[drawn].any()


def test_sentence_pair_batches_of_special_tokens_pass_their_labels_through(specials_only):
    # next-sentence and sentence-order batches: every id special, the pair's label kept
    features = [{"input_ids": [0, 1, 2, 3, 4], "token_type_ids": [0, 0, 0, 1, 1], "next_sentence_label": i} for i in range(2)]
    batch = MaskingCollator(specials_only, random_replace_prob=0.0, pad_to_multiple_of=8)(features)
    assert batch["input_ids"].shape == batch["token_type_ids"].shape == (2, 8)
    assert (batch["labels"] == IGNORE_INDEX).all() and batch["next_sentence_label"].tolist() == [0, 1]


def test_a_plain_loop_without_set_epoch_gets_new_masks_every_epoch(bert_tokenizer, lines, no_warnings):
    features = [{**f, "row": i} for i, f in enumerate(encode_texts(lines[:48], bert_tokenizer))]  # "row" passes through
    collator = MaskingCollator(bert_tokenizer, strategy="whole_word", seed=1)
    loader = torch.utils.data.DataLoader(features, batch_size=8, shuffle=True, collate_fn=collator)
    seen: list[dict[int, torch.Tensor]] = []
    for _ in range(3):
        masks = {}
        for batch in loader:
            masks.update({int(i): row for i, row in zip(batch["row"], batch["labels"])})
        seen.append(masks)
    assert seen[0].keys() == seen[1].keys() == set(range(48))
    for epoch in (1, 2):
        changed = sum(not torch.equal(seen[epoch - 1][i], seen[epoch][i]) for i in range(48))
        assert changed >= 40  # a short line keeps its mask by chance now and then
        # each pass counted as one epoch: the masks set_epoch would have given
        expected = MaskingCollator(bert_tokenizer, strategy="whole_word", seed=1).collate(features, epoch=epoch)["labels"]
        assert all(torch.equal(seen[epoch][i], expected[i][: len(seen[epoch][i])]) for i in range(48))


def test_set_epoch_pins_the_masks_and_stops_the_counting(bert_tokenizer, lines):
    features = encode_texts(lines[:16], bert_tokenizer)
    collator = MaskingCollator(bert_tokenizer, seed=2)
    first, second = collator(features)["labels"], collator(features)["labels"]
    assert not torch.equal(first, second) and collator.epoch == 1
    collator.set_epoch(0)  # static masks, asked for: the same on every call
    assert all(torch.equal(collator(features)["labels"], first) for _ in range(3)) and collator.epoch == 0


def test_hugging_face_attributes_read_and_write_the_masking_settings(bert_tokenizer, lines):
    features = encode_texts(lines[:16], bert_tokenizer)
    collator = MaskingCollator(bert_tokenizer)
    assert (collator.mlm, collator.mlm_probability, collator.mask_replace_prob, collator.random_replace_prob) == (
        True,
        0.15,
        0.8,
        0.1,
    )
    assert (collator.whole_word_mask, collator.seed, collator.pad_to_multiple_of, collator.return_tensors) == (
        False,
        0,
        None,
        "pt",
    )

    collator.mlm_probability, collator.mask_replace_prob, collator.random_replace_prob = 0.3, 0.5, 0.4
    collator.seed, collator.pad_to_multiple_of = 7, 64
    constructed = MaskingCollator(
        bert_tokenizer, mlm_probability=0.3, mask_replace_prob=0.5, random_replace_prob=0.4, seed=7, pad_to_multiple_of=64
    )
    assert collator.masking == constructed.masking
    ours, theirs = collator.collate(features, epoch=0), constructed.collate(features, epoch=0)
    assert ours["input_ids"].shape[1] == 64 and torch.equal(ours["labels"], theirs["labels"])

    with pytest.warns(UserWarning, match="mask_replace_prob=1.0, random_replace_prob=0.0"):
        collator.whole_word_mask = True
    assert collator.masking.units.strategy == "whole_word"
    collator.whole_word_mask = False
    assert collator.masking.units.strategy == "token"
    collator.return_tensors = "np"
    assert isinstance(collator(features)["labels"], np.ndarray)

    with pytest.raises(ValueError, match="mlm_probability"):
        collator.mlm_probability = 1.5
    with pytest.raises(ValueError, match="set the share that goes down first"):
        collator.random_replace_prob = 0.6  # with mask_replace_prob 0.5
    with pytest.raises(ValueError, match="pad_to_multiple_of"):
        collator.pad_to_multiple_of = 0
    with pytest.raises(ValueError, match="mlm=True"):
        collator.mlm = False
    with pytest.raises(ValueError, match="return_tensors"):
        collator.return_tensors = "tf"
    assert collator.masking == constructed.masking  # a refused value changes nothing


def test_seed_none_draws_one_from_torch(bert_tokenizer):
    seeds = []
    for torch_seed in (0, 0, 1):
        torch.manual_seed(torch_seed)
        seeds.append(MaskingCollator(bert_tokenizer, seed=None).seed)
    assert seeds[0] == seeds[1] != seeds[2]
    collator = MaskingCollator(bert_tokenizer)
    collator.seed = None  # as Hugging Face's default: a drawn seed, not an error later
    assert isinstance(collator.seed, int) and collator.seed != 0


def test_the_masking_hooks_answer_as_hugging_faces_and_a_subclass_override_is_called(bert_tokenizer, lines):
    collator = MaskingCollator(bert_tokenizer, mlm_probability=0.3, seed=4)
    padded = bert_tokenizer(lines[:6], padding=True, return_tensors="pt")["input_ids"]
    before = padded.clone()
    inputs, labels = collator.torch_mask_tokens(padded)
    assert torch.equal(padded, before) and inputs.shape == labels.shape == padded.shape
    targets = labels != IGNORE_INDEX
    assert targets.any() and torch.equal(labels[targets], padded[targets]) and torch.equal(inputs[~targets], padded[~targets])
    as_numpy = MaskingCollator(bert_tokenizer, mlm_probability=0.3, seed=4).numpy_mask_tokens(padded.numpy())
    assert np.array_equal(as_numpy[0], inputs.numpy()) and np.array_equal(as_numpy[1], labels.numpy())
    # a loop of Hugging Face's own shape, calling the hook on each pass: new masks, counted there
    assert not torch.equal(collator.torch_mask_tokens(padded)[1], labels) and collator.epoch == 1

    class NeverTheComma(MaskingCollator):  # a subclass as written for Hugging Face's collator
        def torch_mask_tokens(self, inputs, special_tokens_mask=None, offset_mapping=None):
            inputs, labels = super().torch_mask_tokens(inputs, special_tokens_mask)
            comma = labels == 1010
            return torch.where(comma, labels, inputs), labels.masked_fill(comma, IGNORE_INDEX)

    features = [bert_tokenizer(line) for line in lines[:32]]
    subclass = NeverTheComma(bert_tokenizer, mlm_probability=0.5, seed=4)
    batch = subclass(features)
    commas = batch["input_ids"] == 1010
    assert commas.sum() > 10 and (batch["labels"][commas] == IGNORE_INDEX).all() and targets_of(batch).sum() > 100
    with pytest.raises(ValueError, match="'labels'"):  # refused on this path too
        subclass([{**features[0], "labels": 1}])
    with pytest.raises(ValueError, match="override collate"):  # padded ids alone carry no spans
        NeverTheComma(bert_tokenizer, strategy="given")([{**features[0], "given_spans": [[1, 2]]}])
    as_int32 = collator.torch_mask_tokens(padded.to(torch.int32))
    assert as_int32[0].dtype == as_int32[1].dtype == torch.int32  # the input's type, as Hugging Face's


def test_offset_mapping_is_dropped_as_hugging_face_drops_it(bert_tokenizer, lines):
    features = [bert_tokenizer(line, return_offsets_mapping=True) for line in lines[:4]]
    batch = MaskingCollator(bert_tokenizer, strategy="whole_word")(features)
    assert "offset_mapping" not in batch and set(batch) >= {"input_ids", "attention_mask", "labels", "token_type_ids"}


def test_whole_word_mask_keeps_80_10_10_and_names_hugging_faces_choice(bert_tokenizer, lines, no_warnings):
    features = encode_texts(lines[:400], bert_tokenizer)
    with pytest.warns(UserWarning, match="mask_replace_prob=1.0, random_replace_prob=0.0"):
        kept = MaskingCollator(bert_tokenizer, whole_word_mask=True, mlm_probability=0.3, seed=0)(features)
    targets = targets_of(kept)
    masked = (kept["input_ids"][targets] == bert_tokenizer.mask_token_id).float().mean()
    # 80% of ~1,300 targets: sd 0.011, so 4.5 sd either side is 0.75-0.85
    assert targets.sum() > 1000 and 0.75 < masked < 0.85
    like_theirs = MaskingCollator(bert_tokenizer, whole_word_mask=True, mask_replace_prob=1.0, random_replace_prob=0.0)
    batch = like_theirs(features)
    assert (batch["input_ids"][targets_of(batch)] == bert_tokenizer.mask_token_id).all()
