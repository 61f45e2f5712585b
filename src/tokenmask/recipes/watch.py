"""The divergence watch: validation loss rising while training loss falls, evaluation after evaluation.

That pattern is the usual sign of over-fitting (the model memorises the training examples).
:class:`DivergenceWatch` is pure bookkeeping over two loss sequences; the fine-tuning recipe
(:mod:`tokenmask.recipes.finetune`) feeds it at each evaluation, logs what it says and, when
asked to, weakens the augmentation with :func:`halved_rate`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

MIN_RATE = 0.01
"""Below this, a halved augmentation rate is turned off."""


@dataclass(frozen=True)
class Verdict:
    """What the watch concluded at one evaluation.

    Attributes:
        diverging: validation loss rose and training loss fell since the previous evaluation.
        streak: evaluations in a row that were diverging (0 after a firing).
        fired: the streak reached the patience at this evaluation.
    """

    diverging: bool
    streak: int
    fired: bool


class DivergenceWatch:
    """Counts evaluations in a row where validation loss rose while training loss fell.

    Each call of :meth:`observe` gives the mean training loss since the previous evaluation and
    the validation loss now. An evaluation is *diverging* when, compared with the previous one,
    the validation loss is strictly higher and the training loss strictly lower. After
    ``patience`` diverging evaluations in a row the watch fires, and counts again from zero (so
    it fires again after another ``patience``). An evaluation without a training loss (the one
    before training) only sets the starting point.

    Example (patience 2)::

        training    -    2.0  1.5  1.2  1.0
        validation  1.0  0.9  1.0  1.1  1.2
        diverging   -    no   yes  yes  yes
        streak      0    0    1    2->0 1      fires at the 4th evaluation

    Raises:
        ValueError: ``patience`` below 1.
    """

    def __init__(self, patience: int = 3) -> None:
        if patience < 1:
            raise ValueError(f"patience must be >= 1; got {patience}")
        self.patience = patience
        self.streak = 0
        self._previous: tuple[float | None, float] | None = None  # (training, validation)

    def observe(self, train_loss: float | None, eval_loss: float) -> Verdict:
        """Take one evaluation's losses; returns the verdict on it."""
        previous, self._previous = self._previous, (train_loss, eval_loss)
        diverging = False
        if previous is not None:
            previous_train, previous_eval = previous
            if previous_train is not None and train_loss is not None:  # judged: both have a training loss
                diverging = eval_loss > previous_eval and train_loss < previous_train
        self.streak = self.streak + 1 if diverging else 0
        fired = self.streak >= self.patience
        if fired:
            self.streak = 0
        return Verdict(diverging=bool(diverging), streak=self.streak, fired=fired)


def halved_rate(rate: float) -> float:
    """Half the augmentation rate, or 0 (off) when half is below :data:`MIN_RATE`.

    ``0.1 -> 0.05 -> 0.025 -> 0.0125 -> 0.0``
    """
    half = rate / 2
    return 0.0 if half < MIN_RATE else half


def training_loss_between(records: Iterable[Mapping[str, Any]], after: int, upto: int) -> float | None:
    """Mean training loss per target over the steps ``after < step <= upto`` of a run's log.

    ``records`` are the loop's metrics records; step records carry ``loss`` (mean per target)
    and ``targets``. A step logged twice (a resumed run repeats the steps after its
    checkpoint) counts once, with its last record. None when no step of the range has targets.

    ``[{"step": 1, "loss": 2.0, "targets": 3}, {"step": 2, "loss": 1.0, "targets": 1}]``,
    ``after=0, upto=2``  ->  ``(2.0 * 3 + 1.0 * 1) / 4 = 1.75``
    """
    steps = {r["step"]: r for r in records if "loss" in r and "targets" in r and after < r["step"] <= upto}
    steps = {step: r for step, r in steps.items() if r["loss"] is not None}  # null: a skipped non-finite step
    targets = sum(r["targets"] for r in steps.values())
    if not targets:
        return None
    return sum(r["loss"] * r["targets"] for r in steps.values()) / targets
