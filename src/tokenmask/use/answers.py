"""Answers from a question-answering model: the best span over every window of a question, in its context's characters.

Each window offers its ``n_best`` highest start and end logits; a pair counts when both tokens are
in the context, the end is not before the start, and the span is at most ``max_answer_length``
tokens. The pair with the highest start + end logit over all of a question's windows is its answer,
cut from the context by the tokens' character offsets (:mod:`tokenmask.labelled.windows`). The
evaluation of fine-tuning (:func:`evaluate_answers`) and ``tokenmask answer`` (:func:`answer_question`)
both read answers this way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from tokenmask.hub import HubConfig
from tokenmask.labelled.questions import Question
from tokenmask.labelled.windows import Window, question_windows
from tokenmask.train.classifier import load_classifier, model_inputs
from tokenmask.train.models import saved_tokenizer
from tokenmask.train.names import Checkpoint, resolve_checkpoint
from tokenmask.use.answer_scores import answer_scores
from tokenmask.use.evaluate import evaluating, inference_device, tensors_on

N_BEST, MAX_ANSWER_LENGTH = 20, 30
"""Start and end candidates per window, and the longest answer in tokens (Hugging Face's ``run_qa.py`` defaults)."""


@dataclass(frozen=True)
class Answered:
    """An answer: its text, the character where it starts in the context, its score (start + end logit)."""

    text: str
    start: int
    score: float


def best_answers(
    windows: Sequence[Window], start_logits: Sequence[Sequence[float] | np.ndarray], end_logits: Sequence[Sequence[float] | np.ndarray],
    contexts: Mapping[str, str], *, n_best: int = N_BEST, max_answer_length: int = MAX_ANSWER_LENGTH,
) -> dict[str, Answered]:  # fmt: skip
    """``{question id: its best answer}`` for every question with an admissible span in some window.

    Logits may be longer than a window (a padded batch): positions past its tokens are not offered.
    """
    best: dict[str, Answered] = {}
    for window, given_starts, given_ends in zip(windows, start_logits, end_logits):
        starts = np.asarray(given_starts, dtype=float)[: len(window.offsets)]
        ends = np.asarray(given_ends, dtype=float)[: len(window.offsets)]
        for s in np.argsort(-starts, kind="stable")[:n_best]:
            for e in np.argsort(-ends, kind="stable")[:n_best]:
                first, last = window.offsets[s], window.offsets[e]
                if first is None or last is None or e < s or e - s + 1 > max_answer_length:
                    continue
                score = float(starts[s] + ends[e])
                if window.question not in best or score > best[window.question].score:
                    best[window.question] = Answered(contexts[window.question][first[0] : last[1]], first[0], score)
    return best


@dataclass(frozen=True)
class AnswerEvaluation:
    """A question-answering model on held-out questions.

    Attributes:
        loss: mean cross-entropy of the answer's start and end tokens, per window.
        exact_match, f1: SQuAD v1.1's scores, as fractions (:func:`~tokenmask.use.answer_scores.answer_scores`).
        questions, windows: how many were scored.
    """

    loss: float
    exact_match: float
    f1: float
    questions: int
    windows: int

    def metrics(self) -> dict[str, float]:
        """Plain numbers, loss first: ``loss, exact_match, f1``."""
        return {"loss": self.loss, "exact_match": self.exact_match, "f1": self.f1}

    def to_dict(self) -> dict[str, Any]:
        """The metrics and the counts, JSON-ready."""
        return {**self.metrics(), "questions": self.questions, "windows": self.windows}


@torch.no_grad()
def window_logits(model: torch.nn.Module, batches: Sequence[dict[str, Any]]) -> tuple[list[np.ndarray], list[np.ndarray], float]:
    """``(start logits, end logits, loss sum)`` of each row of collated window batches, in order (the model's mode is restored).

    The loss sums both cross-entropies over the rows that carry ``labels`` ``(B, 2)``.
    """
    device = next(model.parameters()).device
    starts: list[np.ndarray] = []
    ends: list[np.ndarray] = []
    loss_sum = 0.0
    with evaluating(model):
        for batch in batches:
            batch = tensors_on(batch, device)
            out = model(**model_inputs(batch))
            start, end = out.start_logits.float(), out.end_logits.float()  # (B, T)
            if "labels" in batch:
                labels = batch["labels"]
                loss_sum += float(
                    F.cross_entropy(start, labels[:, 0], reduction="sum") + F.cross_entropy(end, labels[:, 1], reduction="sum")
                )
            starts.extend(start.cpu().numpy())
            ends.extend(end.cpu().numpy())
    return starts, ends, loss_sum


def evaluate_answers(
    model: torch.nn.Module, windows: Sequence[Window], batches: Sequence[dict[str, Any]], questions: Sequence[Question]
) -> AnswerEvaluation:
    """Loss, exact match and F1 of ``model`` on ``questions``, whose ``windows`` are collated in order into ``batches``.

    Raises:
        ValueError: no question, or a question without a gold answer.
    """
    starts, ends, loss_sum = window_logits(model, batches)
    answers = best_answers(windows, starts, ends, {q.id: q.context for q in questions})
    scores = answer_scores({k: a.text for k, a in answers.items()}, {q.id: [a.text for a in q.answers] for q in questions})
    loss = loss_sum / max(2 * len(windows), 1)
    return AnswerEvaluation(loss, scores["exact_match"], scores["f1"], len(questions), len(windows))


def window_batches(windows: Sequence[Window], tokenizer: Any, batch_size: int) -> list[dict[str, Any]]:
    """``windows`` collated in order, ``batch_size`` at a time, padded only (never augmented)."""
    from tokenmask.collate.augment import MaskingAugmenter

    padder = MaskingAugmenter(tokenizer, rate=0.0).eval()
    features = [w.feature(i) for i, w in enumerate(windows)]
    return [padder(features[i : i + batch_size]) for i in range(0, len(features), batch_size)]


def answer_question(
    model: str | Path | Checkpoint, question: str, context: str, *, max_length: int = 384, stride: int = 128,
    hub: HubConfig = HubConfig(),
) -> Answered | None:  # fmt: skip
    """The answer to ``question`` in ``context`` by a question-answering checkpoint (``finetune --task qa``'s
    OUTPUT/model, or any ``AutoModelForQuestionAnswering`` folder or Hub id), None when no span is admissible.

    ``answer_question("runs/qa/model", "Who wrote Hamlet?", "Hamlet is a play by Shakespeare.")``
    might give ``Answered(text="Shakespeare", start=20, score=11.3)``.

    Raises:
        ValueError: not a checkpoint, one without a question-answering head (its spans would be
            random), a slow tokenizer (no offsets), or an empty question or context.
    """
    if not question.strip() or not context.strip():
        raise ValueError("give a question and a context, both with some text")
    checkpoint = resolve_checkpoint(model, hub=hub)
    tokenizer, loaded = saved_tokenizer(checkpoint), load_classifier(checkpoint, task="qa", hub=hub)
    if loaded.new_head:
        raise ValueError(f"{model} has no question-answering head: its spans would be random; fine-tune it first (--task qa)")
    windows = question_windows([Question("0", question, context, ())], tokenizer, max_length=max_length, stride=stride)
    model_on = loaded.model.to(inference_device())  # type: ignore[arg-type]  # transformers' typing of .to
    starts, ends, _ = window_logits(model_on, window_batches(windows, tokenizer, 8))
    return best_answers(windows, starts, ends, {"0": context}).get("0")
