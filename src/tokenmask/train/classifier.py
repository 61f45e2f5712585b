"""A task head on a pre-trained encoder: loading it and its summed loss.

Where :mod:`tokenmask.train.models` loads masked-LMs, this loads the same checkpoints (a
``tokenmask pretrain`` output, any Hugging Face encoder folder, or ``minilm``) under a new
sequence-classification, token-classification or question-answering head, and checks that only
the head (and a pooler, which masked-LM checkpoints lack) is new. Its evaluation is
:mod:`tokenmask.use.classifier_scores` or :mod:`tokenmask.use.answers`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import torch
import torch.nn.functional as F

from tokenmask.hub import HubConfig
from tokenmask.labelled.examples import LabelVocab
from tokenmask.masking.config import IGNORE_INDEX
from tokenmask.train.models import LoadedModel, named, open_checkpoint, require_encoder_weights, saved_tokenizer
from tokenmask.train.names import Checkpoint, resolve_checkpoint

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

_MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")

Head = Literal["classify", "tokens", "qa", "retrieval"]
"""The heads fine-tuning puts on an encoder: a label per text, a label per token, an answer span; none
for retrieval (the encoder's pooled states are the vectors)."""

_AUTO = {
    "classify": "AutoModelForSequenceClassification",
    "tokens": "AutoModelForTokenClassification",
    "qa": "AutoModelForQuestionAnswering",
    "retrieval": "AutoModel",
}


def load_classifier_tokenizer(name_or_path: str | Path | Checkpoint, *, hub: HubConfig = HubConfig()) -> PreTrainedTokenizerBase:
    """The tokenizer saved with a checkpoint (a folder, ``minilm`` or a Hub id).

    Raises:
        ValueError: not a checkpoint (:func:`~tokenmask.train.names.resolve_checkpoint`), or
            one saved without its tokenizer.
    """
    return saved_tokenizer(resolve_checkpoint(name_or_path, hub=hub))


def load_classifier(
    name_or_path: str | Path | Checkpoint, *, task: Head, labels: LabelVocab | None = None, hub: HubConfig = HubConfig()
) -> LoadedModel:
    """An encoder checkpoint under a classification head for ``labels`` (a folder, ``minilm`` or a
    Hub id: :func:`~tokenmask.train.names.resolve_checkpoint`; remote code only with ``hub.trust_remote_code``).

    ``task="classify"`` gives ``AutoModelForSequenceClassification`` (one label per
    text), ``"tokens"`` ``AutoModelForTokenClassification`` (one per token); their
    config carries ``id2label`` / ``label2id``, so the saved model names its labels. ``"qa"``
    gives ``AutoModelForQuestionAnswering`` (a start and an end score per token; no labels). The notes
    say what is new (the head; the pooler of a masked-LM checkpoint) and what is left unused
    (a masked-LM head).

    Raises:
        ValueError: a bad folder, or a checkpoint that lacks encoder weights (they would be
            random, and fine-tuning would quietly start from nothing).
    """
    import transformers

    checkpoint = resolve_checkpoint(name_or_path, hub=hub)
    auto = getattr(transformers, _AUTO[task])
    named_labels = {} if labels is None else {"num_labels": len(labels), "id2label": labels.id2label, "label2id": labels.label2id}
    # a head for other labels is replaced, and said so
    model, info = open_checkpoint(auto, checkpoint, **named_labels, ignore_mismatched_sizes=True)
    missing = sorted(info.get("missing_keys", ()))
    require_encoder_weights(checkpoint.name, model, missing)
    name = checkpoint.name  # as the user named it: "minilm", the folder, the Hub id
    purpose = {"qa": "answer spans", "retrieval": "retrieval"}.get(task, f"{len(labels or ())} labels")
    notes = [*checkpoint.notes, f"{name}: encoder loaded into {type(model).__name__} for {purpose}"]
    if missing:
        notes.append(f"{name}: new, randomly initialised: {', '.join(missing)}")
    mismatched = [key for key, *_ in info.get("mismatched_keys", ())]
    if mismatched:
        notes.append(f"{name}: head of another size replaced: {', '.join(sorted(mismatched))}")
    unused = sorted(info.get("unexpected_keys", ()))
    if unused:
        notes.append(f"{name}: checkpoint tensors not used: {named(unused)}")
    if task == "retrieval" and getattr(model, "pooler", None) is not None:
        model.pooler.requires_grad_(False)  # vectors are mean-pooled states: no gradient for DDP to wait on
    head = {"classify": "classifier", "tokens": "classifier", "qa": "qa_outputs"}.get(task)  # retrieval: the encoder alone
    return LoadedModel(model, tuple(notes), new_head=head is not None and any(key.split(".")[0] == head for key in missing))


def model_inputs(batch: dict[str, Any]) -> dict[str, torch.Tensor]:
    """The entries of a batch the model takes (not ``labels``: the loss is summed here)."""
    return {key: batch[key] for key in _MODEL_INPUTS if key in batch}


def classifier_loss_sum(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Cross-entropy summed over the labelled positions: examples ``(B,)`` or tokens ``(B, T)``.

    Labels of -100 (special tokens, later pieces of a word, padding) add nothing; the loop
    divides by the number of the others.
    """
    logits = model(**model_inputs(batch)).logits  # (B, C) or (B, T, C)
    return F.cross_entropy(logits.flatten(0, -2).float(), batch["labels"].flatten(), ignore_index=IGNORE_INDEX, reduction="sum")


def span_loss_sum(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Cross-entropy of the answer's first and last token, summed over a batch of windows.

    ``labels`` is ``(B, 2)``: start and end token. The loop divides by the 2·B labels, which gives
    the mean of the start and end losses, as Hugging Face's question-answering models compute.
    """
    out = model(**model_inputs(batch))
    starts, ends = batch["labels"][:, 0], batch["labels"][:, 1]
    return F.cross_entropy(out.start_logits.float(), starts, reduction="sum") + F.cross_entropy(
        out.end_logits.float(), ends, reduction="sum"
    )


def contrastive_loss_sum(model: torch.nn.Module, batch: dict[str, torch.Tensor], *, scale: float = 20.0) -> torch.Tensor:
    """InfoNCE with in-batch negatives, summed over a batch's queries.

    Texts are the mean of the encoder's states over their attended tokens (sentence-transformers'
    ``mean`` pooling), compared by cosine times ``scale``. Query ``i`` (``query_input_ids``,
    ``query_attention_mask``, ``(B, Tq)``) should pick text ``labels[i]`` among all texts of the
    batch (``input_ids``, ``attention_mask``, ``(B + N, T)``: each pair's positive, then the hard
    negatives); a text equal to its positive elsewhere in the batch (the same ``text_keys``) is
    no negative and is left out. The loop divides by the B queries: sentence-transformers'
    ``MultipleNegativesRankingLoss``, summed so that accumulation and processes normalise it once.
    """
    queries = F.normalize(_mean_pooled(model, batch["query_input_ids"], batch["query_attention_mask"]), dim=-1)  # (B, H)
    texts = F.normalize(_mean_pooled(model, batch["input_ids"], batch["attention_mask"]), dim=-1)  # (B + N, H)
    scores = scale * queries @ texts.T  # (B, B + N)
    positives, keys = batch["labels"], batch["text_keys"]
    columns = torch.arange(texts.shape[0], device=scores.device)
    same_text = (keys[None, :] == keys[positives][:, None]) & (columns[None, :] != positives[:, None])  # (B, B + N)
    return F.cross_entropy(scores.masked_fill(same_text, float("-inf")), positives, reduction="sum")


def _mean_pooled(model: torch.nn.Module, ids: torch.Tensor, attention: torch.Tensor) -> torch.Tensor:
    """``(B, H)`` float32 means of the last hidden states over the attended tokens."""
    hidden = model(input_ids=ids, attention_mask=attention).last_hidden_state.float()  # (B, T, H)
    weights = attention.unsqueeze(-1).to(hidden.dtype)  # (B, T, 1)
    return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1)
