"""The unigram-plateau guard: warns when a masked-LM run only predicts the most frequent token.

A learning rate too high for a pre-trained encoder with a new head (or for a model from
scratch) sends it to the plateau where every guess is the commonest target (``,`` on the
plays): fixed-mask accuracy equals that token's share of the targets and stays there. The
pre-training recipe (:mod:`tokenmask.recipes.pretrain`) computes the share once from the fixed
evaluation masks (:func:`unigram_baseline`) and feeds :class:`PlateauGuard` every evaluation.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch

from tokenmask.masking.config import IGNORE_INDEX

MARGIN = 0.005
"""An accuracy within this of the most frequent token's share counts as on the plateau."""

STALLED = 0.01
"""A validation loss that fell by less than this share over the last two evaluations has stalled."""


@dataclass(frozen=True)
class UnigramBaseline:
    """The most frequent target of the fixed evaluation masks and its share: the accuracy of always guessing it."""

    token_id: int
    share: float


def unigram_baseline(batches: Iterable[dict[str, Any]]) -> UnigramBaseline:
    """The commonest label (other than -100) over ``batches`` and its share of all labels.

    Labels ``[[-100, 7, 7], [5, -100, -100]]`` -> ``UnigramBaseline(token_id=7, share=2/3)``.

    Raises:
        ValueError: no label at all.
    """
    counts: Counter[int] = Counter()
    for batch in batches:
        labels = torch.as_tensor(batch["labels"])  # (B, T)
        counts.update(labels[labels != IGNORE_INDEX].tolist())
    if not counts:
        raise ValueError("the evaluation masks hold no target")
    token_id, count = counts.most_common(1)[0]
    return UnigramBaseline(token_id=int(token_id), share=count / sum(counts.values()))


class PlateauGuard:
    """Decides, evaluation by evaluation, whether the run sits on the unigram plateau; fires once.

    After the warm-up (``step > warmup_steps``), an evaluation is on the plateau when its
    accuracy is at most ``share + MARGIN`` and either the run continues a pre-trained model
    (``from_init``: it should know better than the commonest token from the start) or the
    validation loss fell by less than :data:`STALLED` (1%) over the last two evaluations.

    Args:
        token: the most frequent target as text (``","``), for the message.
    """

    def __init__(self, baseline: UnigramBaseline, *, token: str, from_init: bool, lr: float) -> None:
        self.baseline, self.token, self.from_init, self.lr = baseline, token, from_init, lr
        self.losses: list[float] = []
        self.fired = False

    def observe(self, step: int, *, accuracy: float, loss: float, warmup_steps: int) -> str | None:
        """The warning to give at the evaluation after ``step`` optimizer steps, or None (always
        None once it has fired). ``warmup_steps``: the warm-up as it stands now
        (:func:`warmup_length`; the schedule's may be fitted late)."""
        self.losses.append(loss)
        if self.fired or step <= warmup_steps or accuracy > self.baseline.share + MARGIN:
            return None
        stalled = len(self.losses) >= 3 and self.losses[-3] - loss < STALLED * self.losses[-3]
        if not (self.from_init or stalled):
            return None
        self.fired = True
        return (
            f"warning: fixed-mask accuracy {accuracy:.3f} at step {step} is no better than always guessing "
            f"{self.token!r} ({self.baseline.share:.3f}): the model sits on the unigram plateau. Likely cause: a "
            f"learning rate too high for this model (lr {self.lr:g}). Try --lr 3e-4, or --head-warmup-steps 30 "
            "--layer-decay 0.8 (the --init recipe)"
        )


def warmup_length(head_warmup_steps: int, warmup: float, horizon: int | None) -> int:
    """Steps before the guard judges: the head-only warm-up or the schedule's, whichever is longer.

    Before the horizon is known the schedule's provisional warm-up is 100 steps
    (:class:`~tokenmask.train.schedule.Schedule`). ``(30, 0.06, 1000) -> 60``.
    """
    schedule_warmup = max(1, int(warmup * horizon)) if horizon else 100
    return max(head_warmup_steps, schedule_warmup)


def token_text(tokenizer: Any, token_id: int) -> str:
    """How the message names a token: ``","``, ``"the"`` (the tokenizer's own spelling)."""
    return str(tokenizer.convert_ids_to_tokens(token_id))
