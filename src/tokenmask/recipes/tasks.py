"""What each fine-tuning task brings to the one fine-tuning job: its data, head, loss, evaluation and batches.

:mod:`tokenmask.recipes.finetune` runs every task the same way; a task enters as its
:class:`TaskParts`, built here from its encoded data: labelled examples for ``classify`` and
``tokens`` (:mod:`tokenmask.recipes.finetune_data`), a question's windows for ``qa``
(:mod:`tokenmask.recipes.answering`), query-text pairs for ``retrieval``
(:mod:`tokenmask.recipes.retrieval`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import torch

from tokenmask.collate.augment import MaskingAugmenter
from tokenmask.labelled.align import FinetuneData, LabelledExample
from tokenmask.labelled.examples import LabelVocab
from tokenmask.labelled.sampler import LengthGroupedBatches
from tokenmask.masking.config import IGNORE_INDEX
from tokenmask.recipes.answering import QuestionData, load_question_data
from tokenmask.recipes.config import FinetuneConfig
from tokenmask.recipes.finetune_data import load_finetune_data
from tokenmask.recipes.retrieval import RetrievalData, collate_pairs, distinct_positives, load_retrieval_data
from tokenmask.train.classifier import Head, classifier_loss_sum, contrastive_loss_sum, span_loss_sum
from tokenmask.train.step import LossFunction
from tokenmask.use.answers import evaluate_answers, window_batches
from tokenmask.use.classifier_scores import evaluate_classifier
from tokenmask.use.retrieval import evaluate_retrieval

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

TaskData = FinetuneData | QuestionData | RetrievalData
"""A task's encoded examples (:func:`load_task_data`)."""


def load_task_data(config: FinetuneConfig, tokenizer: PreTrainedTokenizerBase) -> TaskData:
    """Read, split and encode the examples of ``config.task`` with ``tokenizer``.

    Raises:
        ValueError: data that cannot be read, split or encoded (the message names the file).
    """
    if config.task == "qa":
        return load_question_data(config, tokenizer)
    if config.task == "retrieval":
        return load_retrieval_data(config, tokenizer)
    return load_finetune_data(config, tokenizer)


class Scored(Protocol):
    """A task's evaluation: :class:`~tokenmask.use.classifier_scores.Evaluation` or
    :class:`~tokenmask.use.answers.AnswerEvaluation`."""

    def metrics(self) -> dict[str, float]: ...

    def to_dict(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class TaskParts:
    """What fine-tuning needs from its task, besides the loop.

    Attributes:
        train: the training examples: ``input_ids`` (and ``token_type_ids``), ``labels``, ``id``.
        head: the head put on the encoder (:func:`~tokenmask.train.classifier.load_classifier`),
            with ``labels`` to name for a classifier.
        loss: ``(model, batch) -> summed loss``.
        evaluate: ``model -> its evaluation`` on the held-out examples, never augmented.
        order: ``(global batch size, seed) -> the batch order`` (default: grouped by length).
        collate: ``(augmenter, examples) -> batch`` (default: the augmenter's batch).
    """

    train: Sequence[Mapping[str, Any]]
    head: Head
    labels: LabelVocab | None
    loss: LossFunction
    evaluate: Callable[[torch.nn.Module], Scored]
    order: Callable[[int, int], BatchOrder] | None = None
    collate: Callable[[MaskingAugmenter, list[Any]], dict[str, Any]] | None = None


class BatchOrder(Protocol):
    """Which examples form each batch of an epoch (:class:`~tokenmask.labelled.sampler.LengthGroupedBatches`)."""

    def set_epoch(self, epoch: int) -> None: ...

    def batches(self) -> list[list[int]]: ...


def task_parts(data: TaskData, tokenizer: PreTrainedTokenizerBase, config: FinetuneConfig) -> TaskParts:
    """The :class:`TaskParts` of ``data``'s task, its validation batches collated once.

    Raises:
        ValueError: no labelled validation example (every tagged word cut away).
    """
    batch_size = config.loop.batch_size
    if isinstance(data, RetrievalData):
        held_out, length = data.validation, config.max_length
        return TaskParts(
            data.train, "retrieval", None, partial(contrastive_loss_sum, scale=config.scale),
            lambda model: evaluate_retrieval(model, tokenizer, held_out, scale=config.scale, max_length=length),
            order=lambda size, seed: distinct_positives(data.train, size, seed), collate=collate_pairs,
        )  # fmt: skip
    if isinstance(data, QuestionData):
        windows = data.validation_windows
        batches = window_batches(windows, tokenizer, batch_size)
        return TaskParts(
            data.train, "qa", None, span_loss_sum, lambda model: evaluate_answers(model, windows, batches, data.validation)
        )
    if not any(np.any(np.asarray(e["labels"]) != IGNORE_INDEX) for e in data.validation):
        raise ValueError(
            "no labelled validation example to evaluate on: every tagged word lost its tokens (cut at --max-length?)"
        )
    validation = validation_batches(data.validation, tokenizer, batch_size)
    task, labels = data.task, data.labels
    return TaskParts(
        data.train, task, labels, classifier_loss_sum,
        lambda model: evaluate_classifier(model, validation, task=task, labels=labels),
    )  # fmt: skip


def validation_batches(
    examples: Sequence[LabelledExample], tokenizer: PreTrainedTokenizerBase, batch_size: int
) -> list[dict[str, Any]]:
    """Evaluation examples collated once, longest first, padded only: never augmented."""
    padder = MaskingAugmenter(tokenizer, rate=0.0).eval()
    order = LengthGroupedBatches([len(e["input_ids"]) for e in examples], batch_size, shuffle=False)
    return [padder([examples[i] for i in indices]) for indices in order]
