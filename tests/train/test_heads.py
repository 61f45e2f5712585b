"""The sparse head gives the full head's loss and gradients, for every known architecture."""

import pytest
import torch
from transformers import (
    BertConfig,
    BertForMaskedLM,
    DistilBertConfig,
    DistilBertForMaskedLM,
    RobertaConfig,
    RobertaForMaskedLM,
)

from tokenmask.train.heads import masked_lm_loss, split_masked_lm

V = 120


def tiny(kind: str):
    torch.manual_seed(0)
    if kind == "bert":
        return BertForMaskedLM(
            BertConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
        )
    if kind == "roberta":
        return RobertaForMaskedLM(
            RobertaConfig(
                vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, pad_token_id=1
            )
        )
    if kind == "distilbert":
        return DistilBertForMaskedLM(DistilBertConfig(vocab_size=V, dim=32, n_layers=2, n_heads=2, hidden_dim=64))
    if kind == "modernbert":
        from transformers import ModernBertConfig, ModernBertForMaskedLM

        return ModernBertForMaskedLM(
            ModernBertConfig(
                vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, pad_token_id=0
            )
        )
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


@pytest.mark.parametrize("kind", ["bert", "roberta", "distilbert", "modernbert"])
def test_sparse_equals_full_head(kind):
    model = tiny(kind).eval()
    assert split_masked_lm(model) is not None
    data = batch()
    sparse = masked_lm_loss(model, data, sparse=True)
    sparse.loss_sum.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    full = masked_lm_loss(model, data, sparse=False)
    full.loss_sum.backward()
    assert sparse.targets == full.targets == int((data["labels"] != -100).sum())
    assert sparse.correct == full.correct
    torch.testing.assert_close(sparse.loss_sum, full.loss_sum, rtol=1e-5, atol=1e-5)
    # the same loss reaches the same parameters: compare every gradient
    for name, p in model.named_parameters():
        if p.grad is not None:
            torch.testing.assert_close(grads[name], p.grad, rtol=1e-4, atol=1e-6, msg=name)
    # and it matches the model's own mean loss times the number of targets
    own = model(**data).loss
    torch.testing.assert_close(own * full.targets, full.loss_sum, rtol=1e-5, atol=1e-4)


def test_unknown_models_fall_back_to_the_full_head():
    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = tiny("bert")

        def forward(self, **inputs):
            return self.inner(**inputs)

    model = Wrapped().eval()
    assert split_masked_lm(model) is None
    data = batch(1)
    torch.testing.assert_close(masked_lm_loss(model, data).loss_sum, masked_lm_loss(model.inner, data).loss_sum)


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
