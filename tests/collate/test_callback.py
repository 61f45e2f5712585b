"""The Hugging Face Trainer with MaskingCallback: new masks each epoch, no augmentation at eval."""

import logging

import pytest
import torch
from transformers import BertConfig, BertForMaskedLM, BertForSequenceClassification, Trainer, TrainingArguments

from tokenmask import MaskingAugmenter, MaskingCallback, MaskingCollator
from tokenmask.blocks.encode import encode_texts


def tiny_config(tokenizer, **extra):
    return BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        **extra,
    )


def arguments(tmp_path, **overrides):
    settings = dict(
        output_dir=str(tmp_path),
        per_device_train_batch_size=8,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        remove_unused_columns=False,
        logging_strategy="no",
    )
    settings.update(overrides)
    return TrainingArguments(**settings)


class RecordingCollator(MaskingCollator):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.seen = []  # (epoch, {id: labels})

    def __call__(self, features):
        batch = super().__call__(features)
        self.seen.append((self.epoch, {int(f["id"]): batch["labels"][i] for i, f in enumerate(features)}))
        return batch


@pytest.mark.parametrize("callback", [True, False], ids=["callback", "counted"])
def test_masks_change_every_epoch(bert_tokenizer, lines, tmp_path, callback):
    # without the callback the collator counts passes, which works here: the Trainer collates in its process
    features = encode_texts(lines[:16], bert_tokenizer)
    collator = RecordingCollator(bert_tokenizer, strategy="whole_word", seed=0)
    trainer = Trainer(
        model=BertForMaskedLM(tiny_config(bert_tokenizer)),
        args=arguments(tmp_path, num_train_epochs=2),
        train_dataset=features,
        data_collator=collator,
        callbacks=[MaskingCallback(collator)] if callback else [],
    )
    trainer.train()
    assert [epoch for epoch, _ in collator.seen] == [0, 0, 1, 1]  # 16 examples in batches of 8
    epochs = sorted({epoch for epoch, _ in collator.seen})
    by_epoch = [{k: v for e, batch in collator.seen if e == epoch for k, v in batch.items()} for epoch in epochs]
    assert by_epoch[0].keys() == by_epoch[1].keys() == set(range(16))
    changed = sum(not torch.equal(by_epoch[0][i], by_epoch[1][i]) for i in range(16))
    assert changed >= 12  # a 10-20 token line keeps its exact mask with small probability


def test_warns_when_the_trainer_would_drop_our_keys_or_keep_the_epoch_from_workers(bert_tokenizer, tmp_path, caplog):
    callback = MaskingCallback(MaskingCollator(bert_tokenizer))
    with caplog.at_level(logging.WARNING, logger="tokenmask.collate.callback"):
        callback.on_train_begin(arguments(tmp_path), None, None)
        assert caplog.text == ""
        callback.on_train_begin(arguments(tmp_path, remove_unused_columns=True), None, None)
        assert "remove_unused_columns" in caplog.text and "persistent" not in caplog.text
        persistent = arguments(tmp_path, dataloader_num_workers=2, dataloader_persistent_workers=True)
        callback.on_train_begin(persistent, None, None)
    assert "set_epoch never reaches them" in caplog.text


class RecordingAugmenter(MaskingAugmenter):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls = []  # (training, number of mask tokens)

    def __call__(self, features):
        batch = super().__call__(features)
        masks = int((batch["input_ids"] == self.tokenizer.mask_token_id).sum())
        self.calls.append((self.training, masks))
        return batch


def test_augmentation_is_off_while_the_trainer_evaluates(bert_tokenizer, lines, tmp_path):
    features = [{**bert_tokenizer(t), "labels": i % 2, "id": i} for i, t in enumerate(lines[:16])]
    augmenter = RecordingAugmenter(bert_tokenizer, rate=0.5, seed=0)
    trainer = Trainer(
        model=BertForSequenceClassification(tiny_config(bert_tokenizer, num_labels=2)),
        args=arguments(tmp_path, max_steps=2, eval_strategy="steps", eval_steps=1, per_device_eval_batch_size=8),
        train_dataset=features,
        eval_dataset=features[:8],
        data_collator=augmenter,
        callbacks=[MaskingCallback(augmenter)],
    )
    trainer.train()
    training = [masks for on, masks in augmenter.calls if on]
    evaluation = [masks for on, masks in augmenter.calls if not on]
    assert len(training) >= 2 and all(m > 0 for m in training)
    assert len(evaluation) >= 2 and all(m == 0 for m in evaluation)
    assert not augmenter.training  # left in eval mode after train()
