"""Presets of every family build, train with the sparse head and round-trip."""

import pytest
import torch
from transformers import AutoModelForMaskedLM

from tokenmask.train.heads import masked_lm_loss, split_masked_lm
from tokenmask.train.models import PRESETS, build_model

V = 300
FAMILY_CLASS = {"bert": "BertForMaskedLM", "roberta": "RobertaForMaskedLM", "modernbert": "ModernBertForMaskedLM"}
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
    assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads) == (preset.layers, preset.hidden, preset.heads)
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
