"""A classifier's loss and scores on held-out examples: accuracy and macro-F1, span F1 for tags.

The model comes from :mod:`tokenmask.train.classifier` (an encoder under a classification
head); the scores from :mod:`tokenmask.use.metrics`. Fine-tuning evaluates with it as it goes,
and the augmentation comparison scores its corrupted sets with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from tokenmask.labelled.align import Task
from tokenmask.labelled.examples import LabelVocab
from tokenmask.masking.config import IGNORE_INDEX
from tokenmask.train.classifier import model_inputs
from tokenmask.use.evaluate import evaluating, tensors_on
from tokenmask.use.metrics import ClassScores, SpanScores, class_scores, span_scores


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
