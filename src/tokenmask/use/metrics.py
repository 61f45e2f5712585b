"""Scores of a fine-tuned classifier: accuracy, per-class precision / recall / F1, macro-F1, the
confusion matrix, and span-level F1 for BIO token labelling.

Unlike :mod:`tokenmask.use.evaluate` (masked-token loss at fixed masks), these compare
predicted labels with gold labels; they are plain numpy over label ids, with no model in sight.
Conventions follow scikit-learn and seqeval: confusion rows are gold labels and columns
predictions; a ratio with a zero denominator (a class never predicted) counts as 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tokenmask.plots import pyplot, save_png

OUTSIDE = "O"


def confusion_matrix(gold: Sequence[int], predicted: Sequence[int], num_labels: int) -> np.ndarray:
    """``(num_labels, num_labels)`` counts: ``[i, j]`` = examples of gold label i predicted as j.

    ``confusion_matrix([0, 0, 1, 2], [0, 1, 1, 1], 3)  ->  [[1, 1, 0], [0, 1, 0], [0, 1, 0]]``

    Raises:
        ValueError: unequal lengths, or an id outside ``[0, num_labels)``.
    """
    gold_ids, predicted_ids = np.asarray(gold, dtype=np.int64), np.asarray(predicted, dtype=np.int64)
    if gold_ids.shape != predicted_ids.shape:
        raise ValueError(f"{gold_ids.size} gold labels but {predicted_ids.size} predictions")
    for name, ids in (("gold", gold_ids), ("predicted", predicted_ids)):
        if ids.size and (ids.min() < 0 or ids.max() >= num_labels):
            raise ValueError(f"{name} label ids must be in [0, {num_labels}); got {ids.min()}..{ids.max()}")
    counts = np.bincount(gold_ids * num_labels + predicted_ids, minlength=num_labels * num_labels)
    return counts.reshape(num_labels, num_labels)


def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """Elementwise ``numerator / denominator``, 0 where the denominator is 0."""
    return np.divide(numerator, denominator, out=np.zeros(len(numerator)), where=denominator > 0)


@dataclass(frozen=True)
class ClassScores:
    """Accuracy, macro-F1 and per-class scores of one set of predictions.

    Attributes:
        labels: label names, in id order.
        confusion: ``(C, C)``, rows gold, columns predicted.
        precision / recall / f1 / support: per class, in id order (support: gold count).
        accuracy: share of examples predicted right.
        macro_f1: the unweighted mean F1 over the classes that occur in the gold labels or the
            predictions (as scikit-learn's default); a class never predicted counts with F1 0.
    """

    labels: tuple[str, ...]
    confusion: np.ndarray
    precision: np.ndarray
    recall: np.ndarray
    f1: np.ndarray
    support: np.ndarray
    accuracy: float
    macro_f1: float

    def per_class(self) -> dict[str, dict[str, float]]:
        """``{"fresh": {"precision": .., "recall": .., "f1": .., "support": ..}, ...}`` (JSON-ready)."""
        return {
            label: {"precision": float(p), "recall": float(r), "f1": float(f), "support": int(s)}
            for label, p, r, f, s in zip(self.labels, self.precision, self.recall, self.f1, self.support)
        }


def class_scores(gold: Sequence[int], predicted: Sequence[int], labels: Sequence[str]) -> ClassScores:
    """Score predicted class ids against gold ones.

    Worked example, labels ``(a, b, c)``, gold ``[0, 0, 1, 2]``, predicted ``[0, 1, 1, 1]``:
    accuracy 2/4; precision ``a 1/1, b 1/3, c 0`` (never predicted); recall ``a 1/2, b 1/1,
    c 0/1``; F1 ``a 2/3, b 1/2, c 0``; macro-F1 ``(2/3 + 1/2 + 0) / 3 = 7/18``.

    Raises:
        ValueError: no examples, and the errors of :func:`confusion_matrix`.
    """
    if len(gold) == 0:
        raise ValueError("no examples to score")
    confusion = confusion_matrix(gold, predicted, len(labels))
    right = np.diag(confusion).astype(np.float64)
    support, predictions = confusion.sum(axis=1), confusion.sum(axis=0)
    precision, recall = _ratio(right, predictions), _ratio(right, support)
    f1 = _ratio(2 * precision * recall, precision + recall)
    present = (support + predictions) > 0
    return ClassScores(
        labels=tuple(labels),
        confusion=confusion,
        precision=precision,
        recall=recall,
        f1=f1,
        support=support,
        accuracy=float(right.sum() / confusion.sum()),
        macro_f1=float(f1[present].mean()),
    )


# ---- spans (BIO) ---------------------------------------------------------------------------


def _split_tag(tag: str) -> tuple[str, str | None]:
    """``"B-LOC" -> ("B", "LOC")``, ``"I-LOC" -> ("I", "LOC")``, ``"O" -> ("O", None)``; a tag
    without a ``B-``/``I-`` prefix is an inside tag of its own type (IO scheme): ``"LOC" -> ("I", "LOC")``."""
    if tag == OUTSIDE:
        return OUTSIDE, None
    if tag[:2] in ("B-", "I-"):
        return tag[0], tag[2:]
    return "I", tag


def bio_spans(tags: Sequence[str]) -> list[tuple[str, int, int]]:
    """The labelled spans of one tag sequence: ``(type, start, end)``, ``end`` exclusive.

    A span opens at ``B-T``, or at an ``I-T`` that does not continue a span of type T (an
    ``I-`` without its ``B-`` opens a span, as seqeval and conlleval do); it runs over the
    following ``I-T`` and closes before anything else.

    ``["B-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-ORG"]  ->``
    ``[("PER", 0, 2), ("LOC", 3, 4), ("LOC", 4, 5), ("ORG", 5, 6)]``
    """
    spans: list[tuple[str, int, int]] = []
    kind: str | None = None
    start = 0
    for position, tag in enumerate([*tags, OUTSIDE]):
        prefix, tag_kind = _split_tag(tag)
        if kind is not None and (prefix != "I" or tag_kind != kind):
            spans.append((kind, start, position))
            kind = None
        if prefix == "B" or (prefix == "I" and kind is None):
            kind, start = tag_kind, position
    return spans


@dataclass(frozen=True)
class SpanScores:
    """Span-level scores (exact match of type, start and end), micro-averaged over all spans.

    ``per_type`` maps each type to ``{"precision", "recall", "f1", "support"}``.
    """

    precision: float
    recall: float
    f1: float
    gold_spans: int
    predicted_spans: int
    correct_spans: int
    per_type: dict[str, dict[str, float]]


def _prf(correct: int, predicted: int, gold: int) -> tuple[float, float, float]:
    precision = correct / predicted if predicted else 0.0
    recall = correct / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def span_scores(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> SpanScores:
    """Span precision, recall and F1 over sentences of tags (seqeval's default, non-strict mode).

    Worked example: gold ``[B-PER I-PER O B-LOC]``, predicted ``[B-PER I-PER O I-ORG]``:
    gold spans ``PER 0-2, LOC 3-4``; predicted ``PER 0-2, ORG 3-4``; one correct: precision
    1/2, recall 1/2, F1 1/2.

    Raises:
        ValueError: a different number of sentences, or a sentence of another length.
    """
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold sentences but {len(predicted)} predicted")
    gold_set: set[tuple[int, str, int, int]] = set()
    predicted_set: set[tuple[int, str, int, int]] = set()
    for number, (gold_tags, predicted_tags) in enumerate(zip(gold, predicted)):
        if len(gold_tags) != len(predicted_tags):
            raise ValueError(f"sentence {number}: {len(gold_tags)} gold tags but {len(predicted_tags)} predicted")
        gold_set.update((number, *span) for span in bio_spans(gold_tags))
        predicted_set.update((number, *span) for span in bio_spans(predicted_tags))
    correct = gold_set & predicted_set
    per_type = {}
    for kind in sorted({span[1] for span in gold_set | predicted_set}):
        counts = [sum(span[1] == kind for span in spans) for spans in (correct, predicted_set, gold_set)]
        precision, recall, f1 = _prf(*counts)
        per_type[kind] = {"precision": precision, "recall": recall, "f1": f1, "support": counts[2]}
    precision, recall, f1 = _prf(len(correct), len(predicted_set), len(gold_set))
    return SpanScores(precision, recall, f1, len(gold_set), len(predicted_set), len(correct), per_type)


# ---- showing a confusion matrix ------------------------------------------------------------


def format_confusion(confusion: np.ndarray, labels: Sequence[str]) -> str:
    """The confusion matrix as a plain-text table, gold labels down, predictions across.

    ``format_confusion([[5, 1], [2, 7]], ["fresh", "rotten"])  ->``::

        gold \\ predicted  fresh  rotten
        fresh                 5       1
        rotten                2       7
    """
    confusion = np.asarray(confusion)
    corner = "gold \\ predicted"
    first = max([len(corner), *(len(label) for label in labels)])
    widths = [max(len(label), len(str(int(confusion[:, j].max(initial=0))))) for j, label in enumerate(labels)]
    header = corner.ljust(first) + "".join(f"  {label:>{w}}" for label, w in zip(labels, widths))
    rows = [
        label.ljust(first) + "".join(f"  {int(n):>{w}}" for n, w in zip(confusion[i], widths)) for i, label in enumerate(labels)
    ]
    return "\n".join([header, *rows])


def plot_confusion(confusion: np.ndarray, labels: Sequence[str], path: Path, *, title: str = "confusion matrix") -> Path:
    """Save the confusion matrix as a PNG heat map with the counts written in the cells.

    Rows are gold labels, columns predictions; colours are shares of each gold row, so a
    rare class's row is as readable as a frequent one's.
    """
    plt = pyplot()
    confusion = np.asarray(confusion)
    rows = np.maximum(confusion.sum(axis=1, keepdims=True), 1)
    size = min(3 + 0.5 * len(labels), 16)
    figure, axes = plt.subplots(figsize=(size + 1, size))
    image = axes.imshow(confusion / rows, cmap="Blues", vmin=0, vmax=1)
    figure.colorbar(image, ax=axes, label="share of the gold label's examples")
    if len(labels) <= 30:  # past that, numbers in the cells are unreadable
        for (i, j), count in np.ndenumerate(confusion):
            axes.text(j, i, str(int(count)), ha="center", va="center", color="white" if count / rows[i, 0] > 0.5 else "black")
    ticks = range(len(labels))
    axes.set(xticks=ticks, yticks=ticks, xlabel="predicted", ylabel="gold", title=title)
    axes.set_xticklabels(labels, rotation=45 if len(labels) > 4 else 0, ha="right" if len(labels) > 4 else "center")
    axes.set_yticklabels(labels)
    figure.tight_layout()
    return save_png(figure, path)  # atomically: a killed run leaves the old picture or none, never half of one
