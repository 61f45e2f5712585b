"""Retrieval pairs: a query and the text it should find, with an optional hard negative; and a set to score retrieval on.

Training reads pairs (``query``, ``positive``, optionally ``negative``) from JSON lines, CSV or any
records :func:`~tokenmask.text.corpus.read_records` reads. A :class:`RetrievalSet` is what retrieval
is scored on: queries, a corpus, and the corpus row each query should find. ``squad`` gives both
from SQuAD v1.1: each question and its paragraph (:mod:`tokenmask.labelled.questions`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tokenmask.labelled.questions import read_questions, squad_file


@dataclass(frozen=True)
class Pair:
    """A query, the text it should find, and optionally a text it should not (a hard negative)."""

    query: str
    positive: str
    negative: str | None = None


@dataclass(frozen=True)
class RetrievalSet:
    """Queries to look up in a corpus: ``relevant[i]`` is the corpus row that query ``i`` should find."""

    queries: list[str]
    corpus: list[str]
    relevant: list[int]


def read_pairs(paths: Sequence[str | Path]) -> list[Pair]:
    """The pairs of ``paths``: records with ``query`` and ``positive``, and ``negative`` where every record has one.

    Raises:
        ValueError: unreadable files, a record without ``query`` or ``positive``, an empty text.
    """
    from tokenmask.text.corpus import read_records

    try:  # a negative column is optional: read it when the records have it
        records = list(read_records(paths, ("query", "positive", "negative"), hint="(optional)"))
    except ValueError as error:
        if "'negative'" not in str(error):
            raise
        records = list(read_records(paths, ("query", "positive"), hint="(every pair needs them)"))
    pairs = []
    for where, record in records:
        texts = [record.get(key) for key in ("query", "positive", "negative")]
        for key, text in zip(("query", "positive"), texts):
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f"{where}: the {key} is empty")
        negative = texts[2] if isinstance(texts[2], str) and texts[2].strip() else None
        pairs.append(Pair(str(texts[0]), str(texts[1]), negative))
    if not pairs:
        raise ValueError(f"{', '.join(map(str, paths))}: no pair in it")
    return pairs


def squad_pairs() -> list[Pair]:
    """SQuAD v1.1's training questions, each paired with its paragraph (87,599 pairs over 18,891 paragraphs)."""
    return [Pair(q.question, q.context) for q in read_questions(squad_file("train"))]


def retrieval_set(pairs: Sequence[Pair]) -> RetrievalSet:
    """Each pair's query over the corpus of all distinct positives (and negatives), in first-seen order.

    ``[Pair("q1", "a"), Pair("q2", "b"), Pair("q3", "a")]``  ->  corpus ``["a", "b"]``, relevant ``[0, 1, 0]``.
    """
    rows: dict[str, int] = {}
    for pair in pairs:
        for text in (pair.positive, pair.negative):
            if text is not None:
                rows.setdefault(text, len(rows))
    return RetrievalSet([p.query for p in pairs], list(rows), [rows[p.positive] for p in pairs])


def squad_retrieval() -> RetrievalSet:
    """SQuAD v1.1 dev as retrieval: its 10,570 questions over its 2,067 paragraphs."""
    return retrieval_set([Pair(q.question, q.context) for q in read_questions(squad_file("dev"))])
