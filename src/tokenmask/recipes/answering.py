"""Question answering for fine-tuning: the questions read and cut into windows, and what the loop needs for them.

The sibling of :mod:`tokenmask.recipes.finetune_data` for ``--task qa``. Training questions become
windows (:mod:`tokenmask.labelled.windows`) kept as small arrays: the answer's tokens are the
labels and are protected from [MASK] augmentation. Held-out questions keep their windows whole,
offsets included, so that the evaluation reads answers back in the context's characters
(:func:`tokenmask.use.answers.evaluate_answers`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tokenmask.blocks.shard import is_validation
from tokenmask.labelled.questions import SQUAD, Question, read_questions, squad_file
from tokenmask.labelled.windows import Window, question_windows
from tokenmask.recipes.config import FinetuneConfig

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

SQUAD_VALIDATION = 1000
"""Questions the built-in ``squad`` is validated on: every tenth of the dev file, the first 1,000 of them
(from all of its 48 articles); the whole dev file (10,570) would take minutes at every evaluation."""

_CHUNK = 2000
"""Training questions cut into windows at a time: the windows' offsets are dropped chunk by chunk."""


@dataclass(frozen=True)
class QuestionData:
    """The windows of a question-answering run.

    Attributes:
        train: one feature per training window (:meth:`~tokenmask.labelled.windows.Window.feature`),
            its tokens as int32 arrays.
        validation: the held-out questions; ``validation_windows`` their windows, in order.
        source: where the questions came from, for the console and the model card.
        train_questions: questions behind ``train``; ``outside``: training windows that do not hold
            their whole answer (labelled at the first token, as in SQuAD v1.1 training).
    """

    train: list[dict[str, Any]]
    validation: list[Question]
    validation_windows: list[Window]
    source: str
    train_questions: int
    outside: int
    max_length: int
    stride: int
    cut: int = 0
    """Questions (of both sides) cut to fit a window (:func:`~tokenmask.labelled.windows.question_room`)."""
    task: str = "qa"

    def describe(self) -> str:
        """A few lines for the console: questions, windows, the window size."""
        return "\n".join([
            f"task qa: {self.source}",
            f"  train:      {self.train_questions:,} questions in {len(self.train):,} windows "
            f"({self.outside:,} without their answer)",
            f"  validation: {len(self.validation):,} questions in {len(self.validation_windows):,} windows",
            f"  windows of {self.max_length} tokens, sharing {self.stride} within a context"
            + (f"; {self.cut:,} questions cut to fit" if self.cut else ""),
        ])  # fmt: skip


def split_questions(config: FinetuneConfig) -> tuple[list[Question], list[Question], str]:
    """``(train, validation, source)``: the run's questions read and, unless ``eval_data`` is given, split.

    Without ``data`` (or with ``squad``), SQuAD v1.1: its train file, validated on
    :data:`SQUAD_VALIDATION` dev questions. Given files are split by a hash of each context, so that
    no paragraph is on both sides.

    Raises:
        ValueError: unreadable or bad files (:func:`~tokenmask.labelled.questions.read_questions`),
            no training question left.
    """
    builtin = config.data in ((), (SQUAD,))
    if builtin:
        train, source = read_questions(squad_file("train")), "SQuAD v1.1 (the built-in squad)"
    else:
        train, source = [q for path in config.data for q in read_questions(path)], ", ".join(config.data)
    if config.eval_data:
        validation = [q for path in config.eval_data for q in read_questions(path)]
    elif builtin:
        validation = read_questions(squad_file("dev"))[::10][:SQUAD_VALIDATION]
    else:
        held = [is_validation(q.context, config.validation_share) for q in train]
        train, validation = [q for q, h in zip(train, held) if not h], [q for q, h in zip(train, held) if h]
    if not train:
        raise ValueError("no training question left after the split; lower validation_share")
    if not validation:
        raise ValueError("no validation question: give --eval DATA or more questions (contexts) to hold out")
    if unanswered := [q.id for q in validation if not q.answers]:
        raise ValueError(f"validation question {unanswered[0]} has no answer to score against")
    return train, validation, source


def load_question_data(config: FinetuneConfig, tokenizer: PreTrainedTokenizerBase) -> QuestionData:
    """Read, split and cut the run's questions into windows of ``config.max_length`` tokens sharing ``config.doc_stride``.

    Raises:
        ValueError: bad files or split (:func:`split_questions`), a training question without an
            answer, a tokenizer without offsets (:func:`~tokenmask.labelled.windows.question_windows`).
    """
    train, validation, source = split_questions(config)
    if unanswered := [q.id for q in train if not q.answers]:
        raise ValueError(f"training question {unanswered[0]} has no answer to learn")
    length, stride = config.max_length, config.doc_stride
    validation_windows = question_windows(validation, tokenizer, max_length=length, stride=stride)
    features: list[dict[str, Any]] = []
    cut = {w.question for w in validation_windows if w.cut}
    for first in range(0, len(train), _CHUNK):
        for window in question_windows(train[first : first + _CHUNK], tokenizer, max_length=length, stride=stride):
            if window.cut:
                cut.add(window.question)
            feature = window.feature(len(features))
            for key in ("input_ids", "token_type_ids"):
                if key in feature:
                    feature[key] = np.asarray(feature[key], dtype=np.int32)
            features.append(feature)
    outside = sum(f["labels"][0] == 0 for f in features)
    return QuestionData(features, validation, validation_windows, source, len(train), outside, length, stride, len(cut))
