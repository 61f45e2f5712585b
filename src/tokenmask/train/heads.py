"""The sparse MLM head: run the encoder, apply the prediction head at target positions only.

At 15% masking most of the ``hidden -> vocabulary`` projection is wasted on positions without
a label; gathering the targets first skips it and gives the same loss. Known heads (exactly
transformers' own classes): BERT, RoBERTa, XLM-R, CamemBERT, DistilBERT, ALBERT, ModernBERT,
DeBERTa (v1, v2 and v3), ELECTRA's generator, MPNet. Other models run the full head. The
encoder's last layer runs at the targets only too where :mod:`.last_layer` knows it;
:func:`head_support` says what runs where.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
import transformers
from torch import nn

from tokenmask.masking.config import IGNORE_INDEX
from tokenmask.train.last_layer import encoder_layers, knows_layer, last_layer, last_layer_at_targets


@dataclass(frozen=True)
class SplitMaskedLM:
    """A masked-LM model seen as ``encoder -> head``.

    Attributes:
        encoder: the base model; called with the batch's inputs, returns ``last_hidden_state``.
        head: ``(N, H) -> (N, V)`` prediction head applied to gathered hidden states.
    """

    encoder: nn.Module
    head: Callable[[torch.Tensor], torch.Tensor]


def _calls(encoder: str, *head: str) -> Callable[[Any], SplitMaskedLM]:
    """The split of a model whose head calls its modules ``head`` in turn:
    ``_calls("model", "head", "decoder")`` -> encoder ``model.model``, head ``decoder(head(hidden))``."""

    def split(model: Any) -> SplitMaskedLM:
        modules = [getattr(model, name) for name in head]

        def run(hidden: torch.Tensor) -> torch.Tensor:
            for module in modules:
                hidden = module(hidden)
            return hidden

        return SplitMaskedLM(getattr(model, encoder), run)

    return split


def _deberta(model: Any) -> SplitMaskedLM:
    """DeBERTa's head: ``cls``, BERT's layout (``config.legacy``, the default), or
    ``lm_predictions``, which takes the word embeddings as an argument for its decoder."""
    if getattr(model, "legacy", True):  # transformers before the lm_predictions head had cls only
        return SplitMaskedLM(model.deberta, model.cls)
    words = model.deberta.embeddings.word_embeddings
    return SplitMaskedLM(model.deberta, lambda hidden: model.lm_predictions(hidden, words))


# How each known masked-LM class splits: its forward is ``head(encoder(...).last_hidden_state)``
# (read in transformers' modeling_<family>.py). ALBERT's and ELECTRA's heads go through the
# embedding size on their way to the vocabulary.
_SPLITS: dict[str, Callable[[Any], SplitMaskedLM]] = {
    "BertForMaskedLM": _calls("bert", "cls"),
    "RobertaForMaskedLM": _calls("roberta", "lm_head"),
    "XLMRobertaForMaskedLM": _calls("roberta", "lm_head"),
    "CamembertForMaskedLM": _calls("roberta", "lm_head"),
    "DistilBertForMaskedLM": _calls("distilbert", "vocab_transform", "activation", "vocab_layer_norm", "vocab_projector"),
    "AlbertForMaskedLM": _calls("albert", "predictions"),
    "ModernBertForMaskedLM": _calls("model", "head", "decoder"),
    "DebertaForMaskedLM": _deberta,
    "DebertaV2ForMaskedLM": _deberta,  # DeBERTa-v3 too
    "ElectraForMaskedLM": _calls("electra", "generator_predictions", "generator_lm_head"),
    "MPNetForMaskedLM": _calls("mpnet", "lm_head"),
}


def split_masked_lm(model: nn.Module) -> SplitMaskedLM | None:
    """The encoder and head of a known masked-LM model, or None (use the full head).

    Known: exactly transformers' own classes of the families in this module's docstring, not
    subclasses nor remote code with the same names (either may compute otherwise)."""
    name = type(model).__name__
    split = _SPLITS.get(name)
    if split is None or getattr(transformers, name, None) is not type(model):
        return None
    return split(model)


@dataclass(frozen=True)
class HeadSupport:
    """What of a masked-LM model runs at the targets only, from :func:`head_support`.

    Attributes:
        model: the model's class name, ``"BertForMaskedLM"``.
        sparse: the MLM head runs at the targets only (:func:`split_masked_lm`).
        last_layer: the encoder's last layer runs at the targets only too (:mod:`.last_layer`).
        note: the same in one line, for the run's first lines.
    """

    model: str
    sparse: bool
    last_layer: bool
    note: str


def head_support(model: nn.Module) -> HeadSupport:
    """What runs at the targets only for ``model``, and one line that says it.

    ``BertForMaskedLM`` -> ``sparse=True, last_layer=True``, "sparse head: BertForMaskedLM's MLM
    head and last layer run at the targets only". Ask it of the model as it trains: its attention
    implementation and any adapter decide the last layer.
    """
    name = type(model).__name__
    parts = split_masked_lm(model)
    if parts is None:
        note = f"no sparse head known for {name}: the full head runs at every position (the same loss, slower)"
        return HeadSupport(name, sparse=False, last_layer=False, note=note)
    if last_layer(parts.encoder) is not None:
        note = f"sparse head: {name}'s MLM head and last layer run at the targets only"
        return HeadSupport(name, sparse=True, last_layer=True, note=note)
    why = "not with this attention, adapter or compiled layer" if knows_layer(parts.encoder) else "not known to tokenmask"
    note = f"sparse head: {name}'s MLM head runs at the targets only; its last layer runs in full ({why})"
    return HeadSupport(name, sparse=True, last_layer=False, note=note)


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
    logits, gold = target_logits(model, batch, sparse=sparse)
    loss_sum = F.cross_entropy(logits.float(), gold, reduction="sum")
    correct = None
    if count_correct:
        correct = int((logits.argmax(dim=-1) == gold).sum()) if gold.numel() else 0
    return MlmLoss(loss_sum=loss_sum, targets=int(gold.numel()), correct=correct)


def target_logits(model: nn.Module, batch: dict[str, torch.Tensor], *, sparse: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """A masked-LM's logits at the batch's targets (labels != -100) and the labels there.

    With ``sparse`` and a known head (:func:`split_masked_lm`), the head (and the last layer
    where known) runs at the targets only; otherwise the full model runs and the targets are
    picked from its logits. Returns ``(logits (N, V), gold (N,))``, targets in row-major order.
    """
    labels = batch["labels"]
    inputs = {k: batch[k] for k in _MODEL_INPUTS if k in batch}
    targets = labels != IGNORE_INDEX  # (B, T)
    parts = split_masked_lm(model) if sparse else None
    if parts is None:
        logits = model(**inputs).logits  # (B, T, V)
        return logits[targets], labels[targets]
    with last_layer_at_targets(parts.encoder, targets):
        hidden = parts.encoder(**inputs).last_hidden_state  # (B, T, H), right at the targets
    return parts.head(hidden[targets]), labels[targets]  # (N, V), (N,)
