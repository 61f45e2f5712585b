"""The sparse head gives the full head's loss and gradients, for every known architecture."""

import pytest
import torch
from torch import nn
from transformers import (
    AlbertConfig,
    AlbertForMaskedLM,
    BertConfig,
    BertForMaskedLM,
    CamembertConfig,
    CamembertForMaskedLM,
    DebertaConfig,
    DebertaForMaskedLM,
    DebertaV2Config,
    DebertaV2ForMaskedLM,
    DistilBertConfig,
    DistilBertForMaskedLM,
    ElectraConfig,
    ElectraForMaskedLM,
    FunnelConfig,
    FunnelForMaskedLM,
    ModernBertConfig,
    ModernBertForMaskedLM,
    MPNetConfig,
    MPNetForMaskedLM,
    RobertaConfig,
    RobertaForMaskedLM,
    XLMRobertaConfig,
    XLMRobertaForMaskedLM,
)

from tokenmask.train.heads import HeadSupport, head_support, masked_lm_loss, split_masked_lm

V = 120
SHAPE = {"vocab_size": V, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}
NO_DROPOUT = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
DEBERTA_V3 = {"relative_attention": True, "position_buckets": 256, "pos_att_type": ["p2c", "c2p"], "max_relative_positions": -1,
              "position_biased_input": False, "norm_rel_ebd": "layer_norm", "share_att_key": True}  # fmt: skip
BERT_LIKE = {  # kind: (model class, config class, settings beyond SHAPE and NO_DROPOUT)
    "bert": (BertForMaskedLM, BertConfig, {}),
    "roberta": (RobertaForMaskedLM, RobertaConfig, {"pad_token_id": 1}),
    "xlm-roberta": (XLMRobertaForMaskedLM, XLMRobertaConfig, {"pad_token_id": 1}),
    "camembert": (CamembertForMaskedLM, CamembertConfig, {"pad_token_id": 1}),
    "albert": (AlbertForMaskedLM, AlbertConfig, {"embedding_size": 16}),  # the head goes 32 -> 16 -> V
    "electra": (ElectraForMaskedLM, ElectraConfig, {"embedding_size": 16}),  # embeddings projected 16 -> 32
    "mpnet": (MPNetForMaskedLM, MPNetConfig, {}),
    "deberta": (DebertaForMaskedLM, DebertaConfig, {}),
    "deberta-v2": (DebertaV2ForMaskedLM, DebertaV2Config, {}),  # legacy=True, the default: the cls head
    "deberta-v2-lm-predictions": (DebertaV2ForMaskedLM, DebertaV2Config, {"legacy": False}),  # takes the word embeddings
    "deberta-v3": (DebertaV2ForMaskedLM, DebertaV2Config, DEBERTA_V3),
}
KINDS = [*BERT_LIKE, "distilbert", "modernbert"]
LAST_LAYER_AT_TARGETS = {"bert", "roberta", "xlm-roberta", "camembert", "electra", "distilbert", "modernbert"}


def tiny(kind: str) -> nn.Module:
    """A 2-layer model of the family, hidden 32, 2 heads, every dropout 0."""
    torch.manual_seed(0)
    if kind in BERT_LIKE:
        model_class, config_class, extra = BERT_LIKE[kind]
        return model_class(config_class(**SHAPE, **NO_DROPOUT, **extra))
    if kind == "distilbert":
        return DistilBertForMaskedLM(
            DistilBertConfig(vocab_size=V, dim=32, n_layers=2, n_heads=2, hidden_dim=64, dropout=0.0, attention_dropout=0.0)
        )
    if kind == "modernbert":  # its dropouts are 0 by default
        return ModernBertForMaskedLM(ModernBertConfig(**SHAPE, pad_token_id=0))
    raise ValueError(kind)


def batch(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, V, (4, 12), generator=g)
    labels = torch.full_like(ids, -100)
    pick = torch.rand(ids.shape, generator=g) < 0.3
    labels[pick] = ids[pick]
    attention = torch.ones_like(ids)
    attention[2, 9:] = 0
    labels[2, 9:] = -100
    return {"input_ids": ids, "attention_mask": attention, "labels": labels}


@pytest.mark.parametrize("mode", ["eval", "train"])
@pytest.mark.parametrize("kind", KINDS)
def test_sparse_equals_full_head(kind, mode):
    model = tiny(kind).train(mode == "train")  # training mode: its own code path, with dropout 0
    assert all(m.p == 0.0 for m in model.modules() if isinstance(m, nn.Dropout))
    assert split_masked_lm(model) is not None
    assert head_support(model).last_layer == (kind in LAST_LAYER_AT_TARGETS)
    data = batch()
    sparse = masked_lm_loss(model, data, sparse=True)
    sparse.loss_sum.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    full = masked_lm_loss(model, data, sparse=False)
    full.loss_sum.backward()
    assert sparse.targets == full.targets == int((data["labels"] != -100).sum())
    assert sparse.correct == full.correct
    torch.testing.assert_close(sparse.loss_sum, full.loss_sum, rtol=1e-5, atol=1e-6)
    # the same loss reaches the same parameters: compare every gradient
    assert grads.keys() == {n for n, p in model.named_parameters() if p.grad is not None}
    for name, p in model.named_parameters():
        if p.grad is not None:
            torch.testing.assert_close(grads[name], p.grad, rtol=1e-4, atol=1e-6, msg=name)
    # and it matches the model's own mean loss times the number of targets
    own = model(**data).loss
    torch.testing.assert_close(own * full.targets, full.loss_sum, rtol=1e-5, atol=1e-4)


def _halved_forward(self, **inputs):
    out = BertForMaskedLM.forward(self, **inputs)
    out.logits = out.logits / 2
    return out


def test_unknown_models_fall_back_to_the_full_head():
    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = tiny("bert")

        def forward(self, **inputs):
            return self.inner(**inputs)

    data = batch(1)
    wrapped = Wrapped().eval()
    assert split_masked_lm(wrapped) is None
    torch.testing.assert_close(masked_lm_loss(wrapped, data).loss_sum, masked_lm_loss(wrapped.inner, data).loss_sum)
    # a subclass of the same name (remote code…) may compute otherwise: its own forward runs
    halved = tiny("bert").eval()
    halved.__class__ = type("BertForMaskedLM", (BertForMaskedLM,), {"forward": _halved_forward})
    assert split_masked_lm(halved) is None
    loss = masked_lm_loss(halved, data).loss_sum
    torch.testing.assert_close(loss, masked_lm_loss(halved, data, sparse=False).loss_sum)
    assert not torch.allclose(loss, masked_lm_loss(tiny("bert").eval(), data).loss_sum)
    funnel = FunnelForMaskedLM(FunnelConfig(vocab_size=V, block_sizes=[1, 1], d_model=32, n_head=2, d_head=16, d_inner=64))
    assert split_masked_lm(funnel) is None


def test_head_support_says_what_runs_at_the_targets():
    assert head_support(tiny("bert")) == HeadSupport(
        "BertForMaskedLM",
        sparse=True,
        last_layer=True,
        note="sparse head: BertForMaskedLM's MLM head and last layer run at the targets only",
    )
    deberta = head_support(tiny("deberta-v3"))
    assert (deberta.sparse, deberta.last_layer) == (True, False)
    assert deberta.note == (
        "sparse head: DebertaV2ForMaskedLM's MLM head runs at the targets only; "
        "its last layer runs in full (not known to tokenmask)"
    )
    flash = tiny("bert")
    flash.config._attn_implementation = "flash_attention_2"  # a known layer, with kernels it cannot run at the targets
    assert head_support(flash).note.endswith("its last layer runs in full (not with this attention, adapter or compiled layer)")
    funnel = FunnelForMaskedLM(FunnelConfig(vocab_size=V, block_sizes=[1, 1], d_model=32, n_head=2, d_head=16, d_inner=64))
    assert head_support(funnel) == HeadSupport(
        "FunnelForMaskedLM",
        sparse=False,
        last_layer=False,
        note="no sparse head known for FunnelForMaskedLM: the full head runs at every position (the same loss, slower)",
    )


def test_no_targets_gives_zero_not_nan():
    model = tiny("bert")
    data = batch()
    data["labels"] = torch.full_like(data["labels"], -100)
    out = masked_lm_loss(model, data)
    assert out.targets == 0 and out.loss_sum.item() == 0.0
    out.loss_sum.backward()  # still part of the graph


def test_training_can_skip_counting_correct_predictions():
    model, data = tiny("bert").eval(), batch()
    counted, skipped = masked_lm_loss(model, data), masked_lm_loss(model, data, count_correct=False)
    assert counted.correct is not None and skipped.correct is None
    torch.testing.assert_close(counted.loss_sum, skipped.loss_sum)
