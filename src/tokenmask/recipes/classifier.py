"""A classification head on a pre-trained encoder: loading it, its summed loss, its evaluation.

Where :mod:`tokenmask.train.models` loads masked-LMs, this loads the same checkpoints (a
``tokenmask pretrain`` output, any Hugging Face encoder folder, or ``minilm``) under a new
sequence-classification or token-classification head, and checks that only the head (and a
pooler, which masked-LM checkpoints lack) is new. Scores come from :mod:`tokenmask.use.metrics`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from tokenmask.labelled.align import Task
from tokenmask.labelled.examples import LabelVocab
from tokenmask.masking.config import IGNORE_INDEX
from tokenmask.train.models import LoadedModel, quiet_load_report, resolve_checkpoint, saved_tokenizer
from tokenmask.use.evaluate import evaluating, tensors_on
from tokenmask.use.metrics import ClassScores, SpanScores, class_scores, span_scores

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

_MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def load_classifier_tokenizer(name_or_path: str | Path) -> PreTrainedTokenizerBase:
    """The tokenizer saved with a checkpoint (a folder, or ``minilm``).

    Raises:
        ValueError: not a checkpoint (:func:`~tokenmask.train.models.resolve_checkpoint`), or
            one saved without its tokenizer.
    """
    return saved_tokenizer(resolve_checkpoint(name_or_path))


def load_classifier(name_or_path: str | Path, *, task: Task, labels: LabelVocab) -> LoadedModel:
    """An encoder checkpoint under a classification head for ``labels`` (safetensors, local, no remote code).

    ``task="classify"`` gives ``AutoModelForSequenceClassification`` (one label per
    text), ``"tokens"`` ``AutoModelForTokenClassification`` (one per token). The
    config carries ``id2label`` / ``label2id``, so the saved model names its labels. The notes
    say what is new (the head; the pooler of a masked-LM checkpoint) and what is left unused
    (a masked-LM head).

    Raises:
        ValueError: a bad folder, or a checkpoint that lacks encoder weights (they would be
            random, and fine-tuning would quietly start from nothing).
    """
    from transformers import AutoModelForSequenceClassification, AutoModelForTokenClassification

    folder = resolve_checkpoint(name_or_path)
    auto = AutoModelForSequenceClassification if task == "classify" else AutoModelForTokenClassification
    with quiet_load_report():
        model, info = auto.from_pretrained(
            folder,
            num_labels=len(labels),
            id2label=labels.id2label,
            label2id=labels.label2id,
            local_files_only=True,
            trust_remote_code=False,
            ignore_mismatched_sizes=True,  # a head for other labels is replaced, and said so
            output_loading_info=True,
        )
    missing = sorted(info.get("missing_keys", ()))
    lacking = _encoder_keys(model, missing)
    if lacking:
        shown = ", ".join(lacking[:4]) + (f" and {len(lacking) - 4} more" if len(lacking) > 4 else "")
        raise ValueError(f"{folder}: the checkpoint lacks encoder weights ({shown}); they would be random")
    name = str(Path(name_or_path))  # as the user named it: "minilm", or the folder
    notes = [f"{name}: encoder loaded into {type(model).__name__} for {len(labels)} labels"]
    if missing:
        notes.append(f"{name}: new, randomly initialised: {', '.join(missing)}")
    mismatched = [key for key, *_ in info.get("mismatched_keys", ())]
    if mismatched:
        notes.append(f"{name}: head of another size replaced: {', '.join(sorted(mismatched))}")
    unused = sorted(info.get("unexpected_keys", ()))
    if unused:
        notes.append(f"{name}: checkpoint tensors not used: {', '.join(unused[:6])}{' …' if len(unused) > 6 else ''}")
    return LoadedModel(model, tuple(notes))


def _encoder_keys(model: PreTrainedModel, keys: Iterable[str]) -> list[str]:
    """The keys that belong to the encoder, pooler excepted (checkpoints name them with or
    without the base-model prefix, e.g. ``bert.``)."""
    prefix = model.base_model_prefix + "."
    names = set(model.state_dict())
    found = []
    for key in keys:
        full = key if key in names else prefix + key
        if full.startswith(prefix) and not full.startswith(prefix + "pooler."):
            found.append(key)
    return found


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


@dataclass(frozen=True)
class Evaluation:
    """A classifier's loss and scores on the validation examples.

    Attributes:
        loss: mean cross-entropy per labelled example (classification) or word (tokens).
        scores: per class / per tag, over examples or labelled words.
        spans: token labelling only: span-level scores of the BIO tags.
    """

    loss: float
    scores: ClassScores
    spans: SpanScores | None = None

    def metrics(self) -> dict[str, float]:
        """Plain numbers, loss first: ``loss, accuracy, macro_f1`` (+ ``span_f1, span_precision, span_recall``)."""
        numbers = {"loss": self.loss, "accuracy": self.scores.accuracy, "macro_f1": self.scores.macro_f1}
        if self.spans is not None:
            numbers.update(span_f1=self.spans.f1, span_precision=self.spans.precision, span_recall=self.spans.recall)
        return numbers

    def to_dict(self) -> dict[str, Any]:
        """Everything, JSON-ready: the metrics, labels, per-class scores, confusion (rows gold)."""
        report = {
            **self.metrics(),
            "labels": list(self.scores.labels),
            "per_class": self.scores.per_class(),
            "confusion": self.scores.confusion.tolist(),
        }
        if self.spans is not None:
            report["spans"] = {
                "gold": self.spans.gold_spans,
                "predicted": self.spans.predicted_spans,
                "correct": self.spans.correct_spans,
                "per_type": self.spans.per_type,
            }
        return report


@torch.no_grad()
def evaluate_classifier(
    model: torch.nn.Module, batches: Sequence[dict[str, Any]], *, task: Task, labels: LabelVocab
) -> Evaluation:
    """Loss and scores of ``model`` on collated, unaugmented batches (the model's mode is restored).

    For token labelling, only the positions with a label (the first piece of each word) are
    scored, and each row's tags are read back as one sentence for the span scores.

    Raises:
        ValueError: no labelled example in the batches.
    """
    device = next(model.parameters()).device
    loss_sum = 0.0
    gold_rows: list[list[int]] = []
    predicted_rows: list[list[int]] = []
    with evaluating(model):
        for batch in batches:
            batch = tensors_on(batch, device)
            logits = model(**model_inputs(batch)).logits.float()
            gold = batch["labels"]
            loss_sum += float(F.cross_entropy(logits.flatten(0, -2), gold.flatten(), ignore_index=IGNORE_INDEX, reduction="sum"))
            predicted = logits.argmax(-1)
            if task == "classify":
                gold_rows.extend([g] for g in gold.tolist())
                predicted_rows.extend([p] for p in predicted.tolist())
                continue
            kept = gold != IGNORE_INDEX
            for row in range(gold.shape[0]):
                gold_rows.append(gold[row][kept[row]].tolist())
                predicted_rows.append(predicted[row][kept[row]].tolist())
    flat_gold = [g for row in gold_rows for g in row]
    if not flat_gold:
        raise ValueError("no labelled validation example to evaluate on")
    scores = class_scores(flat_gold, [p for row in predicted_rows for p in row], labels.labels)
    spans = None
    if task == "tokens":
        names = labels.labels
        spans = span_scores([[names[g] for g in row] for row in gold_rows], [[names[p] for p in row] for row in predicted_rows])
    return Evaluation(loss=loss_sum / len(flat_gold), scores=scores, spans=spans)
