"""Exact match and F1 of extracted answers, as the official SQuAD v1.1 evaluation defines them.

Both compare normalised text: lower case, punctuation removed, the articles *a*, *an* and *the*
removed as words, white space collapsed. F1 is over the normalised words (a bag: a word counts as
often as it appears in both), and each question takes the best score over its gold answers; the
set's scores are the means, as fractions (SQuAD prints them times 100).
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Mapping, Sequence

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """``"The Eiffel-Tower!"`` -> ``"eiffeltower"``; ``"an  apple, a day"`` -> ``"apple day"``."""
    kept = "".join(character for character in text.lower() if character not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", kept).split())


def exact_match(prediction: str, gold: str) -> float:
    """1.0 when both normalise to the same text, else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1(prediction: str, gold: str) -> float:
    """The harmonic mean of word precision and recall after normalising.

    ``f1("the big red fox", "red fox jumped")``: words (big, red, fox) and (red, fox, jumped) share 2,
    precision 2/3, recall 2/3, F1 2/3.
    """
    predicted, wanted = normalize_answer(prediction).split(), normalize_answer(gold).split()
    shared = sum((Counter(predicted) & Counter(wanted)).values())
    if shared == 0:
        return 0.0
    precision, recall = shared / len(predicted), shared / len(wanted)
    return 2 * precision * recall / (precision + recall)


def answer_scores(predictions: Mapping[str, str], gold: Mapping[str, Sequence[str]]) -> dict[str, float]:
    """``{"exact_match", "f1"}``, fractions in [0, 1], over every question of ``gold`` (id -> its answers); a
    question without a prediction scores 0, as in the official evaluation.

    Raises:
        ValueError: no question, or a question without a gold answer.
    """
    if not gold:
        raise ValueError("no question to score")
    totals = {"exact_match": 0.0, "f1": 0.0}
    for question, answers in gold.items():
        if not answers:
            raise ValueError(f"question {question} has no gold answer to score against")
        predicted = predictions.get(question, "")
        totals["exact_match"] += max(exact_match(predicted, answer) for answer in answers)
        totals["f1"] += max(f1(predicted, answer) for answer in answers)
    return {name: total / len(gold) for name, total in totals.items()}
