"""MaskingCollator on real tokenizers of every family: properties, determinism, errors, ecosystem."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from transformers import BatchEncoding

from tokenmask import MaskingCollator
from tokenmask.blocks.encode import encode_texts
from tokenmask.masking import IGNORE_INDEX, CorruptionConfig, MaskingConfig, SelectionConfig, UnitConfig, mask_tokens
from tokenmask.text.token_tables import tables_from_tokenizer, word_start_table

FAMILIES = ["bert-base-uncased", "roberta-gpt2", "trained-wordpiece", "trained-bpe", "trained-unigram"]
WORD_STRATEGIES = ["whole_word", "span", "ngram"]


@pytest.fixture(scope="module")
def sample(lines):
    return lines[:400]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("strategy", ["token", *WORD_STRATEGIES])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_collator_properties_on_real_tokenizers(tokenizers, sample, family, strategy, data):
    tokenizer = tokenizers[family]
    picks = data.draw(st.lists(st.integers(0, len(sample) - 1), min_size=1, max_size=6))
    texts = [sample[i] for i in picks]
    if data.draw(st.booleans()):
        texts.append(data.draw(st.text(min_size=1, max_size=40)))
    features = encode_texts(texts, tokenizer, max_length=64)
    if data.draw(st.booleans()):  # without word ids: the tokenizer's decoder supplies them
        features = [{k: v for k, v in f.items() if k != "word_ids"} for f in features]
    collator = MaskingCollator(tokenizer, strategy=strategy, mlm_probability=0.3, seed=5)
    originals = [list(f["input_ids"]) for f in features]
    batch = collator(features)

    assert [list(f["input_ids"]) for f in features] == originals, "examples were mutated"
    ids, labels, attention = batch["input_ids"], batch["labels"], batch["attention_mask"]
    assert ids.shape == labels.shape == attention.shape
    vocab = collator.vocab
    protected = torch.from_numpy(vocab.protected)
    for row, original in enumerate(originals):
        n = len(original)
        row_labels, row_ids = labels[row, :n], ids[row, :n]
        original_t = torch.tensor(original)
        targets = row_labels != IGNORE_INDEX
        assert torch.equal(row_labels[targets], original_t[targets])
        assert not (targets & protected[original_t]).any(), "a special token was selected"
        assert torch.equal(row_ids[~targets], original_t[~targets])
        changed = targets & (row_ids != original_t) & (row_ids != vocab.mask_token_id)
        assert not protected[row_ids[changed]].any(), "a protected id was drawn"
        if (~protected[original_t]).any():
            assert targets.any(), "a row with maskable tokens has no target"
        assert (labels[row, n:] == IGNORE_INDEX).all() and (attention[row, n:] == 0).all()


@pytest.mark.parametrize("family", FAMILIES)
def test_mask_does_not_depend_on_batch_neighbours_or_padding(tokenizers, sample, family):
    tokenizer = tokenizers[family]
    features = encode_texts(sample[:12], tokenizer)
    collator = MaskingCollator(tokenizer, strategy="span", seed=1)
    collator.set_epoch(0)  # every call draws epoch 0's masks (unset, the second call would count a new pass)
    together = collator(features)
    reordered = collator(features[::-1][:7])
    padded = MaskingCollator(tokenizer, strategy="span", seed=1, pad_to_multiple_of=64)(features[5:6])
    for row in range(5, 12):
        n = len(features[row]["input_ids"])
        other = 11 - row
        assert torch.equal(together["labels"][row, :n], reordered["labels"][other, :n])
        assert torch.equal(together["input_ids"][row, :n], reordered["input_ids"][other, :n])
    n = len(features[5]["input_ids"])
    assert padded["input_ids"].shape[1] == 64
    assert torch.equal(padded["labels"][0, :n], together["labels"][5, :n])


def test_same_seed_same_masks_new_epoch_new_masks(bert_tokenizer, sample):
    features = encode_texts(sample[:64], bert_tokenizer)
    collator = MaskingCollator(bert_tokenizer, seed=3)
    first = collator(features)["labels"]
    assert torch.equal(first, MaskingCollator(bert_tokenizer, seed=3)(features)["labels"])
    collator.set_epoch(1)
    assert not torch.equal(first, collator(features)["labels"])
    collator.set_epoch(0)
    assert torch.equal(first, collator(features)["labels"])


def test_fallback_id_is_the_content(bert_tokenizer, sample):
    features = [{"input_ids": f["input_ids"]} for f in encode_texts(sample[:8], bert_tokenizer)]
    collator = MaskingCollator(bert_tokenizer, seed=0)
    a = collator(features)["labels"]
    b = collator.collate(features[4:] + features[:4], epoch=0)["labels"]
    assert torch.equal(a[:4, :20], b[4:, :20])


def test_inputs_as_lists_arrays_or_tensors_give_the_same_batch(bert_tokenizer, sample):
    features = encode_texts(sample[:5], bert_tokenizer)
    collator = MaskingCollator(bert_tokenizer, strategy="whole_word", seed=0)
    collator.set_epoch(0)
    as_lists = collator(features)
    as_arrays = collator([{**f, "input_ids": np.array(f["input_ids"]), "word_ids": np.array(f["word_ids"])} for f in features])
    as_tensors = collator(
        [
            {**f, "input_ids": torch.tensor(f["input_ids"]), "word_ids": [None if w < 0 else w for w in f["word_ids"]]}
            for f in features
        ]
    )
    for other in (as_arrays, as_tensors):
        assert torch.equal(as_lists["input_ids"], other["input_ids"])
        assert torch.equal(as_lists["labels"], other["labels"])


def test_other_keys_pass_through_and_padding_side_left(bert_tokenizer, sample):
    encoded = bert_tokenizer(sample[:3])
    features = [
        {
            "input_ids": encoded["input_ids"][i],
            "token_type_ids": encoded["token_type_ids"][i],
            "id": i,
            "weight": 0.5,
            "source": "play",
        }
        for i in range(3)
    ]
    right = MaskingCollator(bert_tokenizer, seed=0)(features)
    assert right["weight"].tolist() == [0.5] * 3 and right["source"] == ["play"] * 3
    assert right["token_type_ids"].shape == right["input_ids"].shape
    left_tokenizer = bert_tokenizer.__class__.from_pretrained(bert_tokenizer.name_or_path)
    left_tokenizer.padding_side = "left"
    left = MaskingCollator(left_tokenizer, seed=0)(features)
    for row in range(3):
        n = len(features[row]["input_ids"])
        assert torch.equal(left["input_ids"][row, -n:], right["input_ids"][row, :n])
        assert torch.equal(left["labels"][row, -n:], right["labels"][row, :n])
        assert left["attention_mask"][row, -n:].all() and not left["attention_mask"][row, :-n].any()


def test_given_spans_mask_whole_spans_only(bert_tokenizer):
    # [CLS] romeo and juliet met in verona [SEP]: spans "romeo and" and "met in"
    ids = bert_tokenizer("Romeo and Juliet met in Verona")["input_ids"]
    for seed in range(20):
        features = [{"input_ids": ids, "given_spans": [[1, 3], [4, 6]], "id": 0}]
        labels = MaskingCollator(bert_tokenizer, strategy="given", mlm_probability=0.5, seed=seed)(features)["labels"][0]
        targets = set((labels != IGNORE_INDEX).nonzero().flatten().tolist())
        assert targets in ({1, 2}, {4, 5}, {1, 2, 4, 5}), targets


def test_word_start_table_matches_word_ids_on_plain_words(tokenizers):
    # On text without punctuation, the decoder-based words agree with word_ids().
    text = "shall i compare thee to a summers day thou art more lovely and more temperate"
    for name, tokenizer in tokenizers.items():
        encoding = tokenizer(text, add_special_tokens=False)
        starts = word_start_table(tokenizer)[encoding["input_ids"]]
        words = encoding.word_ids()
        expected = [i == 0 or words[i] != words[i - 1] for i in range(len(words))]
        assert starts[1:].tolist() == expected[1:], name


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"mlm_probability": 0.0}, "mlm_probability must be in \\(0, 1\\]"),
        ({"mlm_probability": 1.2}, "mlm_probability must be in \\(0, 1\\]"),
        ({"mask_replace_prob": 0.8, "random_replace_prob": 0.3}, "must be <= 1"),
        ({"strategy": "sentences"}, "strategy must be one of"),
        ({"selection": "approximately"}, "selection must be one of"),
        ({"pad_to_multiple_of": 0}, "pad_to_multiple_of"),
    ],
)
def test_bad_settings_raise(bert_tokenizer, kwargs, message):
    with pytest.raises(ValueError, match=message):
        MaskingCollator(bert_tokenizer, **kwargs)


def test_tokenizer_without_mask_token_is_refused(trained_tokenizers, lines):
    from tokenmask.text.tokenizer import train_tokenizer

    tokenizer = train_tokenizer(lines[:200], kind="wordpiece", vocab_size=200)
    tokenizer.mask_token = None
    with pytest.raises(ValueError, match="no mask token"):
        MaskingCollator(tokenizer)


def test_bad_batches_raise(bert_tokenizer):
    collator = MaskingCollator(bert_tokenizer)
    with pytest.raises(ValueError, match="empty batch"):
        collator([])
    with pytest.raises(ValueError, match="'labels'"):
        collator([{"input_ids": [101, 2000, 102], "labels": 1}])
    with pytest.raises(ValueError, match="input_ids"):
        collator([{"text": "no ids"}])
    with pytest.raises(ValueError, match="same length"):
        collator([{"input_ids": [101, 2000, 102], "attention_mask": [1, 1]}])


def test_slow_tokenizer_without_word_ids_gets_a_clear_error(bert_tokenizer):
    class Slow:
        is_fast = False

    from tokenmask.text.token_tables import word_start_table as table

    with pytest.raises(ValueError, match="fast tokenizer"):
        table(Slow())


def test_replacements_never_draw_unused_placeholders(bert_tokenizer):
    vocab = tables_from_tokenizer(bert_tokenizer)
    tokens = bert_tokenizer.convert_ids_to_tokens(vocab.replaceable.tolist())
    assert not any(t.startswith("[unused") for t in tokens)
    assert "[MASK]" not in tokens and "[PAD]" not in tokens and "[CLS]" not in tokens
    assert len(tokens) == 30522 - 5 - 994


def test_dataloader_workers_do_not_change_the_masks(bert_tokenizer, sample):
    features = encode_texts(sample[:40], bert_tokenizer)

    def run(workers: int, batch_size: int) -> dict[int, torch.Tensor]:  # a first pass: epoch 0, counted in every worker
        collator = MaskingCollator(bert_tokenizer, strategy="whole_word", seed=2)
        loader = torch.utils.data.DataLoader(features, batch_size=batch_size, collate_fn=collator, num_workers=workers)
        out, start = {}, 0
        for batch in loader:
            for row in range(batch["labels"].shape[0]):
                n = len(features[start + row]["input_ids"])
                out[start + row] = batch["labels"][row, :n]
            start += batch["labels"].shape[0]
        return out

    single, parallel = run(0, 8), run(2, 5)
    assert all(torch.equal(single[i], parallel[i]) for i in single)


def test_works_as_trainer_data_collator(bert_tokenizer, sample):
    from transformers import BertConfig, BertForMaskedLM, Trainer, TrainingArguments

    config = BertConfig(
        vocab_size=len(bert_tokenizer),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    model = BertForMaskedLM(config)
    features = [{"input_ids": f["input_ids"], "id": f["id"]} for f in encode_texts(sample[:16], bert_tokenizer)]
    args = TrainingArguments(
        output_dir="/tmp/tokenmask-trainer-test",
        per_device_train_batch_size=8,
        max_steps=2,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        remove_unused_columns=False,
    )
    trainer = Trainer(model=model, args=args, train_dataset=features, data_collator=MaskingCollator(bert_tokenizer, seed=0))
    result = trainer.train()
    assert np.isfinite(result.training_loss)


def test_a_batch_with_nothing_to_mask_gets_labels_of_minus_100(bert_tokenizer):
    # as Hugging Face's collator: an empty line or a document of separators must not stop a run;
    # the floor of one target holds in every row that has something to mask
    collator = MaskingCollator(bert_tokenizer, seed=0)
    for features in ([{"input_ids": []}, {"input_ids": []}], [{"input_ids": [101, 102]}, {"input_ids": [101, 0, 102]}]):
        batch = collator(features)
        assert batch["labels"].shape == batch["input_ids"].shape and (batch["labels"] == IGNORE_INDEX).all()
    mixed = collator([{"input_ids": [101, 102]}, {"input_ids": [101, 2000, 102]}])["labels"]
    assert mixed.tolist() == [[IGNORE_INDEX] * 3, [IGNORE_INDEX, 2000, IGNORE_INDEX]]


def test_floor_wins_over_a_cap_smaller_than_every_unit(bert_tokenizer):
    # every word of "unparalleled tragedies" has 3-4 pieces; the cap of 1 token cannot hold one
    features = encode_texts(["unparalleled tragedies"], bert_tokenizer)
    labels = MaskingCollator(bert_tokenizer, strategy="whole_word", max_predictions=1, seed=0)(features)["labels"]
    assert (labels != IGNORE_INDEX).sum() >= 3


def test_given_spans_are_checked_against_their_own_example(bert_tokenizer):
    collator = MaskingCollator(bert_tokenizer, strategy="given")
    short = {"input_ids": [101, 2000, 2001, 102], "given_spans": [[1, 6]], "id": 0}
    long = {"input_ids": [101] + [2000] * 10 + [102], "given_spans": [[1, 2]], "id": 1}
    for batch in ([short], [short, long], [long, short]):
        with pytest.raises(ValueError, match="outside it"):
            collator(batch)
    with pytest.raises(ValueError, match="outside it"):
        collator([{**long, "given_spans": [[-3, 2]]}])
    assert (collator([{**long, "given_spans": []}])["labels"] == IGNORE_INDEX).all()  # no span: nothing to mask
    with pytest.raises(ValueError, match="given_spans"):
        collator([{"input_ids": [101, 2000, 102]}])


def test_keys_present_in_some_examples_only_are_refused(bert_tokenizer):
    collator = MaskingCollator(bert_tokenizer)
    with pytest.raises(ValueError, match="some examples have a 'id'"):
        collator([{"input_ids": [101, 2000, 102]}, {"input_ids": [101, 2001, 102], "id": 3}])
    with pytest.raises(ValueError, match="some examples have a 'attention_mask'"):
        collator([{"input_ids": [101, 2000, 102]}, {"input_ids": [101, 2001, 102], "attention_mask": [1, 1, 1]}])


def test_padding_without_a_pad_token_is_refused(roberta_tokenizer):
    from tokenmask.text.tokenizer import load_tokenizer

    tokenizer = load_tokenizer("roberta-gpt2")
    tokenizer.pad_token = None
    collator = MaskingCollator(tokenizer, seed=0)
    same_length = encode_texts(["to be or not", "that is the question"], tokenizer)
    assert collator([same_length[0], same_length[0]])["input_ids"].shape[0] == 2
    with pytest.raises(ValueError, match="no pad token"):
        collator(encode_texts(["to be", "that is the question of it all"], tokenizer))


def test_hugging_face_keywords(bert_tokenizer, sample):
    features = encode_texts(sample[:8], bert_tokenizer)
    by_flag = MaskingCollator(bert_tokenizer, whole_word_mask=True, seed=3)(features)
    by_strategy = MaskingCollator(bert_tokenizer, strategy="whole_word", seed=3)(features)
    assert torch.equal(by_flag["labels"], by_strategy["labels"])
    with pytest.raises(ValueError, match="mlm=True"):
        MaskingCollator(bert_tokenizer, mlm=False)
    with pytest.raises(ValueError, match="return_tensors"):
        MaskingCollator(bert_tokenizer, return_tensors="tf")
    with pytest.raises(ValueError, match="does not go with device"):
        MaskingCollator(bert_tokenizer, return_tensors="np", device="cpu")
    with pytest.raises(ValueError, match="conflicts"):
        MaskingCollator(bert_tokenizer, whole_word_mask=True, strategy="span")


def test_set_epoch_reaches_dataloader_workers(bert_tokenizer, sample):
    features = encode_texts(sample[:24], bert_tokenizer)
    collator = MaskingCollator(bert_tokenizer, seed=2)
    collator.set_epoch(1)
    expected = collator(features)["labels"]
    loader = torch.utils.data.DataLoader(features, batch_size=24, collate_fn=collator, num_workers=2)
    (batch,) = list(loader)
    assert torch.equal(batch["labels"], expected)
    collator.set_epoch(0)
    assert not torch.equal(collator(features)["labels"], expected)


def test_labels_in_any_example_are_refused(bert_tokenizer):
    with pytest.raises(ValueError, match="'labels'"):
        MaskingCollator(bert_tokenizer)([{"input_ids": [101, 2000, 102]}, {"input_ids": [101, 2001, 102], "labels": 0}])


@pytest.mark.parametrize(
    "keywords, masking",
    [
        ({}, MaskingConfig()),
        (
            {"strategy": "span", "span_geometric_p": 0.3, "span_max_words": 4, "mlm_probability": 0.3, "corrupt_per_unit": True},
            MaskingConfig(
                units=UnitConfig(strategy="span", span_geometric_p=0.3, span_max_words=4),
                selection=SelectionConfig(mlm_probability=0.3),
                corruption=CorruptionConfig(per_unit=True),
            ),
        ),
        (
            {
                "strategy": "ngram",
                "ngram_max_n": 2,
                "selection": "exact",
                "max_predictions": 6,
                "min_masks_per_sequence": 2,
                "mask_replace_prob": 0.5,
                "random_replace_prob": 0.3,
            },
            MaskingConfig(
                units=UnitConfig(strategy="ngram", ngram_max_n=2),
                selection=SelectionConfig(mode="exact", max_predictions=6, min_masks_per_sequence=2),
                corruption=CorruptionConfig(mask_replace_prob=0.5, random_replace_prob=0.3),
            ),
        ),
        ({"whole_word_mask": True}, MaskingConfig(units=UnitConfig(strategy="whole_word"))),
    ],
)
def test_from_config_equals_the_keyword_constructor(bert_tokenizer, sample, keywords, masking):
    features = encode_texts(sample[:16], bert_tokenizer)
    common = {"seed": 4, "pad_to_multiple_of": 8, "protected_ids": [1996]}  # 1996 = "the"
    by_keywords = MaskingCollator(bert_tokenizer, **keywords, **common)
    by_config = MaskingCollator.from_config(bert_tokenizer, masking, **common)
    assert by_config.masking == by_keywords.masking == masking
    for epoch in (0, 3):
        one, other = by_keywords.collate(features, epoch=epoch), by_config.collate(features, epoch=epoch)
        assert one.keys() == other.keys()
        assert all(torch.equal(one[key], other[key]) for key in one)
    with pytest.raises(ValueError, match="pad_to_multiple_of"):
        MaskingCollator.from_config(bert_tokenizer, masking, pad_to_multiple_of=0)


def test_a_rate_given_to_collate_changes_only_the_rate_and_not_the_collator(bert_tokenizer, sample):
    features = encode_texts(sample[:16], bert_tokenizer)
    collator = MaskingCollator(bert_tokenizer, strategy="whole_word", mlm_probability=0.3, seed=1)
    fresh = MaskingCollator(bert_tokenizer, strategy="whole_word", seed=1)  # 0.15
    for epoch in (0, 2):
        at_rate = collator.collate(features, epoch=epoch, mlm_probability=0.15)
        assert torch.equal(at_rate["labels"], fresh.collate(features, epoch=epoch)["labels"])
        assert torch.equal(at_rate["input_ids"], fresh.collate(features, epoch=epoch)["input_ids"])
    assert collator.masking == MaskingConfig(
        units=UnitConfig(strategy="whole_word"), selection=SelectionConfig(mlm_probability=0.3)
    )
    assert not torch.equal(collator.collate(features, epoch=0)["labels"], at_rate["labels"])


def test_the_keyword_constructor_gives_the_masks_of_commit_4ef3d17(bert_tokenizer, lines):
    # the hashes were computed with commit 4ef3d17's code, whose constructor stated its defaults
    # itself; the README's call, all defaults, and Hugging Face's positional arguments
    import hashlib

    features = encode_texts(lines[:32], bert_tokenizer)

    def digest(batch):
        hasher = hashlib.sha256()
        for key in ("input_ids", "labels"):
            hasher.update(batch[key].numpy().tobytes())
        return hasher.hexdigest()[:12]

    assert digest(MaskingCollator(bert_tokenizer, strategy="whole_word", mlm_probability=0.3, seed=6)(features)) == "30b47f65f68c"
    assert digest(MaskingCollator(bert_tokenizer)(features)) == "70adfe6b7e80"
    positional = MaskingCollator(bert_tokenizer, True, False, 0.2, 0.7, 0.2, 8, "pt", 3, strategy="span")
    assert digest(positional(features)) == "bb60fa50fc6c"


def test_the_keyword_defaults_are_the_masking_configs():
    # one source: MaskingConfig's declarations; the README's call keeps its masks
    import inspect

    defaults = {k: p.default for k, p in inspect.signature(MaskingCollator).parameters.items() if p.default is not p.empty}
    declared = MaskingConfig()
    assert (defaults["mlm_probability"], defaults["selection"], defaults["min_masks_per_sequence"]) == (
        declared.selection.mlm_probability, declared.selection.mode, declared.selection.min_masks_per_sequence,
    )  # fmt: skip
    assert (defaults["strategy"], defaults["span_max_words"], defaults["corrupt_per_unit"]) == (
        declared.units.strategy, declared.units.span_max_words, declared.corruption.per_unit,
    )  # fmt: skip
    assert MaskingCollator.__init__.__code__.co_varnames[1:10] == (
        "tokenizer", "mlm", "whole_word_mask", "mlm_probability", "mask_replace_prob", "random_replace_prob",
        "pad_to_multiple_of", "return_tensors", "seed",
    )  # Hugging Face's positional order  # fmt: skip


@pytest.mark.parametrize("strategy", ["token", "whole_word", "span"])
def test_masking_on_a_device_gives_the_host_batch(bert_tokenizer, sample, strategy, monkeypatch):
    # device= pads on the host, moves the batch and masks it there with torch: the same numbers.
    backends = []

    def spy(*args, backend, **kwargs):
        backends.append(backend)
        return mask_tokens(*args, backend=backend, **kwargs)

    monkeypatch.setattr("tokenmask.collate.masked.mask_tokens", spy)
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    features = encode_texts(sample[:12], bert_tokenizer)
    on_host = MaskingCollator(bert_tokenizer, strategy=strategy, seed=4)(features)
    for device in devices:
        on_device = MaskingCollator(bert_tokenizer, strategy=strategy, seed=4, device=device)(features)
        assert set(on_device) == set(on_host)
        for key in ("input_ids", "attention_mask", "labels"):
            assert on_device[key].device.type == device
            assert torch.equal(on_device[key].cpu(), on_host[key]), key
    assert backends == ["numpy"] + ["torch"] * len(devices)


def test_the_hugging_face_call_forms(bert_tokenizer, sample):
    # DataCollatorForLanguageModeling(tokenizer, mlm, whole_word_mask, mlm_probability, ...) positionally,
    # examples as dicts, BatchEncodings or plain id sequences, a BatchEncoding back, "pt" or "np".
    features = encode_texts(sample[:8], bert_tokenizer)
    by_keywords = MaskingCollator(bert_tokenizer, whole_word_mask=True, mlm_probability=0.3, seed=5)
    positional = MaskingCollator(bert_tokenizer, True, True, 0.3, 0.8, 0.1, None, "pt", 5)
    expected = by_keywords(features)
    got = positional(features)
    assert isinstance(got, BatchEncoding) and torch.equal(got["labels"], expected["labels"])

    ids_only = [{"input_ids": f["input_ids"]} for f in features]
    token = MaskingCollator(bert_tokenizer, seed=2)
    token.set_epoch(0)  # every form is the same examples again: pinned, they get the same masks
    from_dicts = token(ids_only)
    for form in ([f["input_ids"] for f in features], [np.array(f["input_ids"]) for f in features],
                 [torch.tensor(f["input_ids"]) for f in features]):  # fmt: skip
        from_ids = token(form)
        assert torch.equal(from_ids["input_ids"], from_dicts["input_ids"]) and torch.equal(
            from_ids["labels"], from_dicts["labels"]
        )
    from_encodings = token([bert_tokenizer(text) for text in sample[:8]])
    assert from_encodings["input_ids"].shape[0] == 8 and (from_encodings["labels"] != IGNORE_INDEX).any()

    as_numpy = token(ids_only, return_tensors="np")
    assert isinstance(as_numpy, BatchEncoding)
    for key in ("input_ids", "attention_mask", "labels"):
        assert isinstance(as_numpy[key], np.ndarray) and np.array_equal(as_numpy[key], from_dicts[key].numpy())
    numpy_default = MaskingCollator(bert_tokenizer, seed=2, return_tensors="np")(ids_only)
    assert isinstance(numpy_default["labels"], np.ndarray)
    with pytest.raises(ValueError, match="return_tensors"):
        token(ids_only, return_tensors="jax")
