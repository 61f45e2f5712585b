"""Fine-tuning augmentation: labels untouched, off at evaluation, protection, rates."""

import pytest
import torch

from tokenmask import MaskingAugmenter, augment_text
from tokenmask.blocks.encode import encode_texts


def classification_batch(tokenizer, texts):
    return [{**tokenizer(t), "labels": i % 3, "id": i} for i, t in enumerate(texts)]


def test_class_labels_untouched_and_only_mask_tokens(bert_tokenizer, lines):
    features = classification_batch(bert_tokenizer, lines[:32])
    augmenter = MaskingAugmenter(bert_tokenizer, rate=0.2, seed=1)
    batch = augmenter(features)
    assert batch["labels"].tolist() == [i % 3 for i in range(32)]
    plain = MaskingAugmenter(bert_tokenizer, rate=0.2).eval()(features)
    changed = batch["input_ids"] != plain["input_ids"]
    assert changed.any()
    assert (batch["input_ids"][changed] == bert_tokenizer.mask_token_id).all()
    specials = torch.isin(plain["input_ids"], torch.tensor(bert_tokenizer.all_special_ids))
    assert not (changed & specials).any()
    assert "token_type_ids" in batch


def test_eval_mode_is_a_no_op(bert_tokenizer, lines):
    features = classification_batch(bert_tokenizer, lines[:8])
    augmenter = MaskingAugmenter(bert_tokenizer, rate=0.5).eval()
    batch = augmenter(features)
    for row, feature in enumerate(features):
        n = len(feature["input_ids"])
        assert batch["input_ids"][row, :n].tolist() == feature["input_ids"]
    augmenter.train()
    assert not torch.equal(augmenter(features)["input_ids"], batch["input_ids"])


def test_token_labels_are_padded_not_changed(bert_tokenizer, lines):
    features = [{**bert_tokenizer(t), "labels": list(range(len(bert_tokenizer(t)["input_ids"])))} for t in lines[:4]]
    batch = MaskingAugmenter(bert_tokenizer, rate=0.3)(features)
    for row, feature in enumerate(features):
        n = len(feature["labels"])
        assert batch["labels"][row, :n].tolist() == feature["labels"]
        assert (batch["labels"][row, n:] == -100).all()


def test_protected_spans_are_never_masked(bert_tokenizer, lines):
    features = classification_batch(bert_tokenizer, lines[:50])
    for f in features:
        f["protected_spans"] = [[1, 4]]
    batch = MaskingAugmenter(bert_tokenizer, rate=0.9)(features)
    assert not (batch["input_ids"][:, 1:4] == bert_tokenizer.mask_token_id).any()
    assert (batch["input_ids"][:, 4:] == bert_tokenizer.mask_token_id).any()


def test_rate_on_1e4_tokens(bert_tokenizer, lines):
    # ~3e4 eligible tokens, rate 0.1, no floor: sd = sqrt(.1*.9/3e4) = 0.0017; band = 5 sd.
    features = classification_batch(bert_tokenizer, lines[:3000])
    batch = MaskingAugmenter(bert_tokenizer, rate=0.1)(features)
    plain = MaskingAugmenter(bert_tokenizer).eval()(features)
    eligible = (plain["attention_mask"] == 1) & ~torch.isin(plain["input_ids"], torch.tensor(bert_tokenizer.all_special_ids))
    share = (batch["input_ids"] == bert_tokenizer.mask_token_id)[eligible].float().mean().item()
    assert eligible.sum() > 25_000
    assert abs(share - 0.1) < 5 * 0.0017


def test_whole_word_augmentation(roberta_tokenizer, lines):
    features = [{**f, "labels": 0} for f in encode_texts(lines[:20], roberta_tokenizer)]
    batch = MaskingAugmenter(roberta_tokenizer, rate=0.3, strategy="whole_word")(features)
    for row, feature in enumerate(features):
        words = feature["word_ids"]
        masked = (batch["input_ids"][row, : len(words)] == roberta_tokenizer.mask_token_id).tolist()
        for w in set(words) - {-1}:
            assert len({m for m, x in zip(masked, words) if x == w}) == 1


def test_augmenter_settings_are_checked(bert_tokenizer):
    with pytest.raises(ValueError, match="rate"):
        MaskingAugmenter(bert_tokenizer, rate=1.5)
    with pytest.raises(ValueError, match="strategy"):
        MaskingAugmenter(bert_tokenizer, strategy="span")
    assert MaskingAugmenter(bert_tokenizer, rate=0.0)([{"input_ids": [101, 2000, 102], "labels": 1}])["input_ids"].tolist() == [
        [101, 2000, 102]
    ]


def test_augment_text_replaces_words_and_keeps_the_rest(tokenizers):
    text = "Shall I compare thee to a summer's day? Thou art more lovely and more temperate."
    for name, tokenizer in tokenizers.items():
        out = augment_text(text, tokenizer, rate=0.3, seed=4)
        assert out == augment_text(text, tokenizer, rate=0.3, seed=4), name
        assert tokenizer.mask_token in out, name
        # everything outside the masks is the original text, in order
        rest = out.split(tokenizer.mask_token)
        position = 0
        for piece in rest:
            found = text.find(piece, position)
            assert found >= 0, (name, piece)
            position = found + len(piece)
    assert augment_text(text, tokenizers["bert-base-uncased"], rate=0.0) == text
    assert augment_text("", tokenizers["bert-base-uncased"], rate=0.5) == ""
    with pytest.raises(ValueError, match="rate"):
        augment_text(text, tokenizers["bert-base-uncased"], rate=2.0)


def test_augment_text_word_granularity_masks_whole_words(bert_tokenizer):
    text = "unbelievable extraordinary circumstances notwithstanding"
    outs = {augment_text(text, bert_tokenizer, rate=0.5, seed=s) for s in range(10)}
    for out in outs:
        for word in out.split():
            assert word == "[MASK]" or word in text.split()


def test_augment_text_token_granularity_masks_pieces(bert_tokenizer):
    # per ##am ##bula ##ting, cart ##ographer ##s, un ##para ##lle ##led: by token, a word may
    # lose some of its pieces only (by word, never: see the test above)
    text = "thou perambulating cartographers unparalleled"
    outs = {augment_text(text, bert_tokenizer, rate=0.5, seed=s, granularity="token") for s in range(10)}
    assert any(word not in text.split() and word != "[MASK]" for out in outs for word in out.split())
    by_word = {augment_text(text, bert_tokenizer, rate=0.5, seed=s) for s in range(10)}
    assert all(word in text.split() or word == "[MASK]" for out in by_word for word in out.split())
    with pytest.raises(ValueError, match="granularity must be 'word' or 'token'"):
        augment_text(text, bert_tokenizer, granularity="sentence")


def test_multi_label_soft_and_string_labels_pass_unchanged(bert_tokenizer, lines):
    augmenter = MaskingAugmenter(bert_tokenizer, rate=0.3)
    soft = [{**bert_tokenizer(t), "labels": [0.7, 0.2, 0.1]} for t in lines[:3]]
    assert torch.allclose(augmenter(soft)["labels"], torch.tensor([[0.7, 0.2, 0.1]] * 3))
    multi = [{**bert_tokenizer(t), "labels": [1, 0, 1, 1]} for t in lines[:3]]
    assert augmenter(multi)["labels"].tolist() == [[1, 0, 1, 1]] * 3
    named = [{**bert_tokenizer(t), "labels": "fresh"} for t in lines[:2]]
    assert augmenter(named)["labels"] == ["fresh", "fresh"]


def test_whole_word_augmentation_without_word_ids(bert_tokenizer):
    features = [{**bert_tokenizer("unbelievable extraordinary circumstances"), "labels": 0, "id": i} for i in range(30)]
    batch = MaskingAugmenter(bert_tokenizer, rate=0.5, strategy="whole_word")(features)
    tokens = bert_tokenizer.convert_ids_to_tokens(features[0]["input_ids"])
    pieces = [i for i, t in enumerate(tokens) if t.startswith("##")]
    for row in range(30):
        masked = (batch["input_ids"][row] == bert_tokenizer.mask_token_id).tolist()
        for i in pieces:  # a continuation piece is masked exactly when the piece before it is
            assert masked[i] == masked[i - 1]


def test_left_padding_is_honoured(bert_tokenizer, lines):
    tokenizer = bert_tokenizer.__class__.from_pretrained(bert_tokenizer.name_or_path)
    tokenizer.padding_side = "left"
    features = [{**tokenizer(t), "labels": list(range(len(tokenizer(t)["input_ids"])))} for t in lines[:3]]
    batch = MaskingAugmenter(tokenizer, rate=0.0)(features)
    for row, feature in enumerate(features):
        n = len(feature["input_ids"])
        assert batch["input_ids"][row, -n:].tolist() == feature["input_ids"]
        assert batch["labels"][row, -n:].tolist() == feature["labels"]
        assert (batch["labels"][row, :-n] == -100).all() and not batch["attention_mask"][row, :-n].any()


def test_protected_spans_are_checked_and_epochs_validated(bert_tokenizer):
    augmenter = MaskingAugmenter(bert_tokenizer, rate=0.5)
    with pytest.raises(ValueError, match="outside it"):
        augmenter([{"input_ids": [101, 2000, 102], "protected_spans": [[1, 9]], "labels": 0}])
    with pytest.raises(ValueError, match="epoch"):
        augmenter.set_epoch(-1)


def test_set_rate_changes_the_rate_and_zero_turns_it_off(bert_tokenizer, lines):
    features = classification_batch(bert_tokenizer, lines[:300])
    augmenter = MaskingAugmenter(bert_tokenizer, rate=0.3, seed=2)
    fresh = MaskingAugmenter(bert_tokenizer, rate=0.1, seed=2)
    augmenter.set_rate(0.1)
    assert augmenter.rate == 0.1
    assert torch.equal(augmenter(features)["input_ids"], fresh(features)["input_ids"])  # as if built at 0.1
    augmenter.set_rate(0.0)
    plain = MaskingAugmenter(bert_tokenizer).eval()(features)
    assert torch.equal(augmenter(features)["input_ids"], plain["input_ids"])
    with pytest.raises(ValueError, match="rate must be in"):
        augmenter.set_rate(-0.1)


def test_a_plain_loop_without_set_epoch_gets_new_masks_every_pass(bert_tokenizer, lines):
    features = classification_batch(bert_tokenizer, lines[:64])
    augmenter = MaskingAugmenter(bert_tokenizer, rate=0.3, seed=3)
    first, second = augmenter(features), augmenter(features)  # the same examples again: a new pass
    assert augmenter.epoch == 1 and not torch.equal(first["input_ids"], second["input_ids"])
    assert torch.equal(second["input_ids"], augmenter.collate(features, epoch=1)["input_ids"])
    assert torch.equal(second["labels"], first["labels"])  # the task labels, kept
    augmenter.set_epoch(0)
    assert torch.equal(augmenter(features)["input_ids"], first["input_ids"])
