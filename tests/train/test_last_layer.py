"""The last layer at the targets only gives the full model's hidden states there, and its gradients."""

import pytest
import torch
from torch import nn
from transformers import (
    BertConfig,
    BertForMaskedLM,
    CamembertConfig,
    CamembertForMaskedLM,
    DebertaV2Config,
    DebertaV2ForMaskedLM,
    DistilBertConfig,
    DistilBertForMaskedLM,
    ElectraConfig,
    ElectraForMaskedLM,
    ModernBertConfig,
    ModernBertForMaskedLM,
    MPNetConfig,
    MPNetForMaskedLM,
    RobertaConfig,
    RobertaForMaskedLM,
    XLMRobertaConfig,
    XLMRobertaForMaskedLM,
)
from transformers.models.bert.modeling_bert import BertLayer

from tokenmask.train.heads import compile_encoder, masked_lm_loss, split_masked_lm
from tokenmask.train.last_layer import encoder_layers, last_layer_at_targets, query_positions, scatter_rows

V = 120


def tiny(kind: str, attention: str = "sdpa", dropout: float = 0.0):
    torch.manual_seed(0)
    shape = {"vocab_size": V, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}
    drops = {"hidden_dropout_prob": dropout, "attention_probs_dropout_prob": dropout}
    if kind == "bert":
        model = BertForMaskedLM(BertConfig(**shape, **drops))
    elif kind in ("roberta", "xlm-roberta", "camembert"):
        classes = {"roberta": (RobertaConfig, RobertaForMaskedLM), "xlm-roberta": (XLMRobertaConfig, XLMRobertaForMaskedLM),
                   "camembert": (CamembertConfig, CamembertForMaskedLM)}  # fmt: skip
        config_class, model_class = classes[kind]
        model = model_class(config_class(**shape, **drops, pad_token_id=1))
    elif kind == "electra":  # BERT's layer; embeddings projected 16 -> 32
        model = ElectraForMaskedLM(ElectraConfig(**shape, **drops, embedding_size=16))
    elif kind == "distilbert":
        config = DistilBertConfig(
            vocab_size=V, dim=32, n_layers=2, n_heads=2, hidden_dim=64, dropout=dropout, attention_dropout=dropout
        )
        model = DistilBertForMaskedLM(config)
    elif kind == "modernbert":  # a window of 4 tokens around each one (half-window 2): the last layer is the sliding one
        config = ModernBertConfig(
            **shape, pad_token_id=0, local_attention=4, global_attn_every_n_layers=2, attention_dropout=dropout
        )
        model = ModernBertForMaskedLM(config)
        assert model.config.layer_types[-1] == "sliding_attention"
    else:  # modernbert-global: every layer attends to all tokens
        model = ModernBertForMaskedLM(ModernBertConfig(**shape, pad_token_id=0, global_attn_every_n_layers=1))
        assert model.config.layer_types[-1] == "full_attention"
    model.config._attn_implementation = attention
    return model


def batch(seed: int = 0, padding: str = "right"):
    """4 rows of 12: row 2 padded to 8 tokens (on the right, the left, or not at all), row 3
    without targets."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, V, (4, 12), generator=g)
    labels = torch.full_like(ids, -100)
    pick = torch.rand(ids.shape, generator=g) < 0.3
    pick[0, 11] = True  # the last position, next to the window's edge
    labels[pick] = ids[pick]
    attention = torch.ones_like(ids)
    padded = {"right": slice(8, None), "left": slice(None, 4), "none": slice(0, 0)}[padding]
    attention[2, padded] = 0
    labels[2, padded] = -100
    labels[3] = -100
    return {"input_ids": ids, "attention_mask": attention, "labels": labels}


def test_query_positions_worked_example():
    targets = torch.tensor([[False, True, False, True], [True, False, False, False], [False] * 4])
    positions, valid = query_positions(targets)
    assert positions.tolist() == [[1, 3], [0, 0], [0, 0]]
    assert valid.tolist() == [[True, True], [True, False], [False, False]]
    rows = torch.arange(1.0, 7.0).reshape(3, 2, 1)  # (B, Q, H=1): 1 2 / 3 4 / 5 6
    placed = scatter_rows(rows, positions, valid, 4)[..., 0]
    assert placed.tolist() == [[0, 1, 0, 2], [3, 0, 0, 0], [0, 0, 0, 0]]  # padding slots (4, 5, 6) dropped


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize(
    "kind", ["bert", "roberta", "xlm-roberta", "camembert", "electra", "distilbert", "modernbert", "modernbert-global"]
)
def test_hidden_states_at_targets_equal_the_full_layer(kind, attention):
    model = tiny(kind, attention).eval()
    encoder = split_masked_lm(model).encoder
    data = batch()
    inputs = {"input_ids": data["input_ids"], "attention_mask": data["attention_mask"]}
    targets = data["labels"] != -100
    full = encoder(**inputs).last_hidden_state
    with last_layer_at_targets(encoder, targets) as replaced:
        pruned = encoder(**inputs).last_hidden_state
    assert replaced
    torch.testing.assert_close(pruned[targets], full[targets], rtol=1e-5, atol=1e-5)
    assert not torch.allclose(pruned[~targets], full[~targets])  # the other positions were not computed
    assert "forward" not in vars(encoder_layers(encoder)[-1])


@pytest.mark.parametrize(
    ("kind", "attention", "padding"),
    [("bert", "sdpa", "right"), ("bert", "eager", "left"), ("bert", "sdpa", "none"), ("modernbert", "sdpa", "right"),
     ("modernbert", "eager", "left"), ("modernbert-global", "sdpa", "none"), ("electra", "eager", "left"),
     ("distilbert", "sdpa", "right"), ("distilbert", "eager", "left")],
)  # fmt: skip
def test_loss_and_gradients_equal_the_full_model_in_training_mode(kind, attention, padding):
    model = tiny(kind, attention).train()  # dropout 0: training mode's code path, reproducible numbers
    data = batch(1, padding)
    pruned = masked_lm_loss(model, data)
    pruned.loss_sum.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    full = masked_lm_loss(model, data, sparse=False)
    full.loss_sum.backward()
    torch.testing.assert_close(pruned.loss_sum, full.loss_sum, rtol=1e-5, atol=1e-5)
    assert grads.keys() == {n for n, p in model.named_parameters() if p.grad is not None}
    for name, p in model.named_parameters():
        if p.grad is not None:
            torch.testing.assert_close(grads[name], p.grad, rtol=1e-4, atol=1e-6, msg=name)


def test_every_parameter_gets_a_gradient_without_targets():
    """DDP needs every parameter in the graph, even in a batch whose rows have no target."""
    model = tiny("modernbert").train()
    data = batch()
    data["labels"] = torch.full_like(data["labels"], -100)
    out = masked_lm_loss(model, data)
    out.loss_sum.backward()
    assert out.loss_sum.item() == 0.0
    layer = model.model.layers[-1]
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in layer.parameters())


@pytest.mark.parametrize("last_layer_dropout", [0.5, 0.0])
def test_dropout_acts_in_the_last_layer_in_training(last_layer_dropout):
    """Every dropout but the last layer's is off: two passes differ exactly when it acts."""
    model = tiny("bert", dropout=0.5).train()
    last = model.bert.encoder.layer[-1]
    in_last = {id(m) for m in last.modules()}
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = last_layer_dropout if id(module) in in_last else 0.0
    data = batch()
    first, second = masked_lm_loss(model, data).loss_sum, masked_lm_loss(model, data).loss_sum
    assert torch.isfinite(first) and torch.equal(first, second) == (last_layer_dropout == 0.0)


def test_other_models_run_their_full_layer(monkeypatch):
    everywhere = torch.ones(2, 3, dtype=torch.bool)
    shape = {"vocab_size": V, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}
    for relative in (DebertaV2ForMaskedLM(DebertaV2Config(**shape)), MPNetForMaskedLM(MPNetConfig(**shape))):
        encoder = split_masked_lm(relative).encoder  # relative positions in every attention: not known
        assert encoder_layers(encoder) is not None
        with last_layer_at_targets(encoder, everywhere) as replaced:
            assert not replaced
    renamed = tiny("bert")  # a class of the same name (remote code, a subclass) may compute otherwise
    renamed.bert.encoder.layer[-1].__class__ = type("BertLayer", (BertLayer,), {})
    with last_layer_at_targets(renamed.bert, everywhere) as replaced:
        assert not replaced
    adapted = tiny("bert")  # an adapter (LoRA…) around a projection: calling it is not calling the Linear
    adapted.bert.encoder.layer[-1].attention.self.query = nn.Sequential(nn.Linear(32, 32))
    with last_layer_at_targets(adapted.bert, everywhere) as replaced:
        assert not replaced
    bert = tiny("bert")
    bert.config._attn_implementation = "flash_attention_2"  # its kernels assume query i sits at position i
    with last_layer_at_targets(bert.bert, everywhere) as replaced:
        assert not replaced
    monkeypatch.setattr(BertLayer, "forward", _tuple_forward)  # as older layers returned
    with last_layer_at_targets(tiny("bert").bert, everywhere) as replaced:
        assert not replaced


_BERT_FORWARD = BertLayer.forward


def _tuple_forward(self, hidden_states, *args, **kwargs) -> tuple[torch.Tensor]:
    return (_BERT_FORWARD(self, hidden_states, *args, **kwargs),)


def test_bf16_autocast_gives_the_full_layer_numbers():
    model = tiny("modernbert").eval()
    data = batch(3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        pruned, full = masked_lm_loss(model, data).loss_sum, masked_lm_loss(model, data, sparse=False).loss_sum
    torch.testing.assert_close(pruned, full, rtol=1e-3, atol=1e-3)


def test_the_layer_is_restored_after_an_error():
    model = tiny("bert").eval()
    layer = model.bert.encoder.layer[-1]
    with pytest.raises(RuntimeError, match="boom"), last_layer_at_targets(model.bert, torch.ones(2, 3, dtype=torch.bool)):
        raise RuntimeError("boom")
    assert "forward" not in vars(layer)


def test_compiled_layers_leave_the_last_one_at_the_targets():
    model = tiny("bert").eval()
    data = batch(2)
    eager = masked_lm_loss(model, data).loss_sum
    compile_encoder(model)
    layers = model.bert.encoder.layer
    assert [layer._compiled_call_impl is not None for layer in layers] == [True, False]
    with last_layer_at_targets(model.bert, data["labels"] != -100) as replaced:
        assert replaced
    torch.testing.assert_close(masked_lm_loss(model, data).loss_sum, eager, rtol=1e-5, atol=1e-5)
