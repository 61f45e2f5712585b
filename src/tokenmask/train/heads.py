"""The sparse MLM head: run the encoder, apply the prediction head at target positions only.

At 15% masking most of the ``hidden -> vocabulary`` projection is wasted on positions without
a label; gathering the targets first skips it and gives the same loss. Known heads: BERT,
RoBERTa (and XLM-R, CamemBERT…), DistilBERT, ModernBERT. Other masked-LM models fall back to
the full head. The encoder's last layer runs at the targets only too, where
:mod:`.last_layer` knows the model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from tokenmask.masking.config import IGNORE_INDEX
from tokenmask.train.last_layer import encoder_layers, last_layer, last_layer_at_targets


@dataclass(frozen=True)
class SplitMaskedLM:
    """A masked-LM model seen as ``encoder -> head``.

    Attributes:
        encoder: the base model; called with the batch's inputs, returns ``last_hidden_state``.
        head: ``(N, H) -> (N, V)`` prediction head applied to gathered hidden states.
    """

    encoder: nn.Module
    head: Callable[[torch.Tensor], torch.Tensor]


def _child(model: nn.Module, name: str) -> nn.Module:
    """``model.<name>``, a submodule: torch types a Module's attributes as ``Tensor | Module``."""
    return getattr(model, name)


def split_masked_lm(model: nn.Module) -> SplitMaskedLM | None:
    """The encoder and head of a known masked-LM architecture, or None (use the full head)."""
    if hasattr(model, "bert") and hasattr(model, "cls"):
        return SplitMaskedLM(_child(model, "bert"), _child(model, "cls"))
    if hasattr(model, "roberta") and hasattr(model, "lm_head"):
        return SplitMaskedLM(_child(model, "roberta"), _child(model, "lm_head"))
    if hasattr(model, "distilbert") and hasattr(model, "vocab_projector"):

        def distilbert_head(hidden: torch.Tensor) -> torch.Tensor:
            transformed = _child(model, "activation")(_child(model, "vocab_transform")(hidden))
            return _child(model, "vocab_projector")(_child(model, "vocab_layer_norm")(transformed))

        return SplitMaskedLM(_child(model, "distilbert"), distilbert_head)
    if hasattr(model, "model") and hasattr(model, "head") and hasattr(model, "decoder"):
        return SplitMaskedLM(_child(model, "model"), lambda hidden: _child(model, "decoder")(_child(model, "head")(hidden)))
    return None


def compile_encoder(model: nn.Module) -> None:
    """``torch.compile`` the encoder of ``model`` in place, layer by layer: every layer but a
    last one that runs at the targets only (:mod:`.last_layer`, whose number of queries
    changes with every batch), or the whole model for an unknown architecture. In place, so
    the weights keep their names in checkpoints."""
    parts = split_masked_lm(model)
    encoder = parts.encoder if parts is not None else model
    layers = encoder_layers(encoder)
    if layers is None:
        encoder.compile()
        return
    for layer in layers[:-1] if last_layer(encoder) is not None else layers:
        layer.compile()


@dataclass(frozen=True)
class MlmLoss:
    """Sums over the targets of a batch; divide by the step's target count to get the loss.

    Attributes:
        loss_sum: sum of the token cross-entropies (a 0-d tensor with grad).
        targets: number of target tokens.
        correct: targets whose argmax prediction is the label (None when not counted).
    """

    loss_sum: torch.Tensor
    targets: int
    correct: int | None


_MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids", "position_ids")


def masked_lm_loss(
    model: nn.Module, batch: dict[str, torch.Tensor], *, sparse: bool = True, count_correct: bool = True
) -> MlmLoss:
    """Cross-entropy summed over target tokens (labels != -100), with the sparse head if possible.

    Args:
        model: a Hugging Face ``…ForMaskedLM``.
        batch: ``input_ids``, ``attention_mask``, ``labels`` (and ``token_type_ids``), ``(B, T)``.
        sparse: run the encoder's last layer and the head at the targets only
            (:mod:`tokenmask.train.last_layer`; False: the full model, for comparison).
        count_correct: count the correct argmax predictions (an argmax over the vocabulary at
            every target: about 3% of a modernbert-tiny training step by profile, so training skips it).

    Returns:
        :class:`MlmLoss`. A batch without targets gives ``loss_sum = 0`` (still attached to the
        graph), never NaN.
    """
    labels = batch["labels"]
    inputs = {k: batch[k] for k in _MODEL_INPUTS if k in batch}
    targets = labels != IGNORE_INDEX  # (B, T)
    parts = split_masked_lm(model) if sparse else None
    if parts is not None:
        with last_layer_at_targets(parts.encoder, targets):
            hidden = parts.encoder(**inputs).last_hidden_state  # (B, T, H), right at the targets
        logits = parts.head(hidden[targets])  # (N, V)
        gold = labels[targets]  # (N,)
    else:
        logits = model(**inputs).logits  # (B, T, V)
        logits, gold = logits[targets], labels[targets]
    loss_sum = F.cross_entropy(logits.float(), gold, reduction="sum")
    correct = None
    if count_correct:
        correct = int((logits.argmax(dim=-1) == gold).sum()) if gold.numel() else 0
    return MlmLoss(loss_sum=loss_sum, targets=int(gold.numel()), correct=correct)
