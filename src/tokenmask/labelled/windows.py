"""Questions as model inputs: each question with its context cut into overlapping windows, labelled with the answer's tokens.

A context longer than ``max_length`` tokens (question and special tokens included) is cut into
windows that overlap by ``stride`` tokens, so that an answer near a cut is whole in one of them.
The labels come from the fast tokenizer's character offsets: the first and last context token of
the first gold answer; a window that does not hold the whole answer points both at its first
token, as SQuAD v1.1 training does. A question so long that the context would get no more than
``stride`` tokens of a window is cut to its first tokens (:func:`question_room`). Each window keeps
the offsets of its context tokens, which
:func:`tokenmask.use.answers.best_answers` maps a predicted span back to the context with.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tokenmask.labelled.questions import Answer, Question


@dataclass(frozen=True)
class Window:
    """One model input: ``offsets[i]`` is the (start, end) characters of token ``i`` in the context,
    None for the question's tokens and the special ones; ``start``/``end`` are the answer's tokens;
    ``cut``: the question was cut to fit (:func:`question_room`)."""

    question: str
    input_ids: list[int]
    token_type_ids: list[int] | None
    offsets: list[tuple[int, int] | None]
    start: int
    end: int
    cut: bool = False

    def feature(self, example_id: int) -> dict[str, Any]:
        """The window as a training example: ``labels`` ``[start, end]``, the answer's tokens protected
        from augmentation (``protected_spans``, ``[start, end + 1)``), ``example_id`` keying its masks."""
        feature: dict[str, Any] = {"input_ids": self.input_ids, "labels": [self.start, self.end], "id": example_id}
        if self.token_type_ids is not None:
            feature["token_type_ids"] = self.token_type_ids
        feature["protected_spans"] = [[self.start, self.end + 1]] if self.start else []
        return feature


def question_windows(questions: Sequence[Question], tokenizer: Any, *, max_length: int = 384, stride: int = 128) -> list[Window]:
    """Every question's windows, in order (``max_length`` 384 and ``stride`` 128 as Hugging Face's ``run_qa.py``).

    Raises:
        ValueError: a tokenizer without offsets (not a fast one), or a stride the windows cannot keep.
    """
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError("question answering needs a fast tokenizer: its character offsets place the answers")
    if not 0 <= stride < max_length // 2:
        raise ValueError(f"the stride must be at least 0 and under half of max_length {max_length}; got {stride}")
    asked = fitted_questions(questions, tokenizer, question_room(tokenizer, max_length, stride))
    encoded = tokenizer(
        asked, [q.context for q in questions], truncation="only_second", max_length=max_length,
        stride=stride, return_overflowing_tokens=True, return_offsets_mapping=True,
    )  # fmt: skip
    windows = []
    for number, index in enumerate(encoded["overflow_to_sample_mapping"]):
        question = questions[index]
        sides = encoded.sequence_ids(number)
        offsets = [tuple(span) if side == 1 else None for span, side in zip(encoded["offset_mapping"][number], sides)]
        start, end = _answer_tokens(offsets, question.answers[0]) if question.answers else (0, 0)
        types = encoded["token_type_ids"][number] if "token_type_ids" in encoded else None
        cut = asked[index] != question.question
        windows.append(Window(question.id, encoded["input_ids"][number], types, offsets, start, end, cut))
    return windows


def question_room(tokenizer: Any, max_length: int, stride: int) -> int:
    """Tokens a question may keep: the context must get more than ``stride`` of each window (the fast
    tokenizer cannot cut a window otherwise). 384 and 128 with BERT's 3 special tokens: 252."""
    return max(1, max_length - tokenizer.num_special_tokens_to_add(pair=True) - stride - 1)


def fitted_questions(questions: Sequence[Question], tokenizer: Any, room: int) -> list[str]:
    """Each question's text, cut after its first ``room`` tokens where it has more (at a token's end)."""
    encoded = tokenizer([q.question for q in questions], add_special_tokens=False, return_offsets_mapping=True)
    return [q.question if len(spans) <= room else q.question[: spans[room - 1][1]]
            for q, spans in zip(questions, encoded["offset_mapping"])]  # fmt: skip


def _answer_tokens(offsets: Sequence[tuple[int, int] | None], answer: Answer) -> tuple[int, int]:
    """The first and last context token overlapping ``answer``, or (0, 0) when the window does not hold all of it.

    Tokens at characters (0, 6), (7, 14), (15, 23) and the answer at 7–23: tokens 1 to 2.
    """
    first, last = answer.start, answer.start + len(answer.text)
    inside = [i for i, span in enumerate(offsets) if span is not None]
    if not inside or offsets[inside[0]][0] > first or offsets[inside[-1]][1] < last:  # type: ignore[index]
        return 0, 0
    start = next(i for i in inside if offsets[i][1] > first)  # type: ignore[index]
    end = next(i for i in reversed(inside) if offsets[i][0] < last)  # type: ignore[index]
    return start, end
