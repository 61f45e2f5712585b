"""Answers from a question-answering model's logits: the best span over every window of a question, in its context's characters.

Each window offers its ``n_best`` highest start and end logits; a pair counts when both tokens are
in the context, the end is not before the start, and the span is at most ``max_answer_length``
tokens. The pair with the highest start + end logit over all of a question's windows is its answer,
cut from the context by the tokens' character offsets (:mod:`tokenmask.labelled.windows`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from tokenmask.labelled.windows import Window


def best_answers(
    windows: Sequence[Window], start_logits: Sequence[Sequence[float]], end_logits: Sequence[Sequence[float]],
    contexts: Mapping[str, str], *, n_best: int = 20, max_answer_length: int = 30,
) -> dict[str, tuple[str, float]]:  # fmt: skip
    """``{question id: (answer text, score)}`` for every question with an admissible span in some window.

    Logits may be longer than a window (a padded batch): positions past its tokens are not offered.
    """
    best: dict[str, tuple[str, float]] = {}
    for window, given_starts, given_ends in zip(windows, start_logits, end_logits):
        starts = np.asarray(given_starts, dtype=float)[: len(window.offsets)]
        ends = np.asarray(given_ends, dtype=float)[: len(window.offsets)]
        for s in np.argsort(-starts, kind="stable")[:n_best]:
            for e in np.argsort(-ends, kind="stable")[:n_best]:
                first, last = window.offsets[s], window.offsets[e]
                if first is None or last is None or e < s or e - s + 1 > max_answer_length:
                    continue
                score = float(starts[s] + ends[e])
                if window.question not in best or score > best[window.question][1]:
                    best[window.question] = (contexts[window.question][first[0] : last[1]], score)
    return best
