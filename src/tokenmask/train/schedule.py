"""The learning-rate schedule and how it is fitted to a run's limits (steps, tokens, time).

Warm-up, a stable peak, then a linear, cosine or 1 − √ decay over the last ``decay`` share of a
*horizon* of optimizer steps (``decay`` 1: no stable phase; below 1, warm-up/stable/decay); a
``decay_from`` run is the decay alone. With only a step
limit the horizon is known at the start; with a token or time limit it is fitted as the pace
becomes known (:class:`Pace`), and for a time limit refitted at every evaluation, so the decay
ends when the time does.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from tokenmask.collate.rate import BatchRamp

if TYPE_CHECKING:
    from tokenmask.train.config import LoopConfig


class Schedule:
    """Warm-up, stable, then decay over ``horizon`` optimizer steps.

    With only ``max_steps``, the horizon is known from the start. With a token or time limit
    it is unknown until :meth:`fit` (a 100-step provisional warm-up runs meanwhile); the first
    fit fixes the warm-up length and continues the ramp from where it is, so the learning rate
    never jumps; later fits (time limits: at each evaluation) move only the decay's end.
    Everything needed to continue is in :meth:`state`.
    """

    def __init__(self, config: LoopConfig) -> None:
        self.config, self.horizon = config, config.max_steps
        self.fitted = config.max_tokens is None and config.max_time is None
        self.warmup_steps = max(1, int(config.warmup * self.horizon)) if self.fitted and self.horizon else None
        if config.decay_from is not None:  # the decay alone: from the peak at step 0
            self.warmup_steps = 0
        self.ramp_start = (0, 0.0)  # (step, multiplier) where the warm-up ramp (re)starts

    def fit(self, horizon: int, step: int) -> None:
        if self.warmup_steps is None:
            self.ramp_start = (step, self(step))
            self.warmup_steps = max(step + 1, int(self.config.warmup * horizon))
        self.horizon, self.fitted = horizon, True

    def state(self) -> dict[str, Any]:
        return {"horizon": self.horizon or 0, "horizon_fitted": self.fitted, "warmup_steps": self.warmup_steps or 0,
                "ramp_start": list(self.ramp_start)}  # fmt: skip

    def load(self, state: dict[str, Any]) -> None:
        """Continue a checkpoint's schedule. With only a step limit, the decay ends at this
        run's ``max_steps``, which may differ from the checkpoint's (a run extended on resume)."""
        step_limit_only = self.fitted and self.horizon is not None
        self.horizon = self.horizon if step_limit_only else (state["horizon"] or self.horizon)
        self.fitted = bool(state.get("horizon_fitted", True))
        self.warmup_steps = state.get("warmup_steps") or self.warmup_steps
        self.ramp_start = tuple(state.get("ramp_start", (0, 0.0)))

    def __call__(self, step: int) -> float:
        warmup = self.warmup_steps if self.warmup_steps is not None else 100
        if step < warmup:
            first, level = self.ramp_start
            return level + (1 - level) * (step + 1 - first) / max(1, warmup - first)
        horizon = self.horizon or 10**9
        decay = 1.0 if self.config.decay_from is not None else self.config.decay
        begins = max(warmup, horizon - max(1, round(decay * horizon)))  # the stable phase ends
        progress = min(1.0, max(0, step - begins) / max(1, horizon - begins))
        if self.config.schedule == "cosine":
            return 0.5 * (1 + math.cos(math.pi * progress))
        if self.config.schedule == "sqrt":
            return 1.0 - math.sqrt(progress)
        return max(0.0, 1.0 - progress)


class Pace:
    """Fits the schedule's horizon to the run's limits as the pace becomes known.

    Token limit: after step 1. Time limit: at step 20 from the training time of steps 11-20
    (the first ones are slower), 5% spared for evaluations; then again after every evaluation
    from the wall-clock pace since the previous fit, so the decay ends when the time does.
    """

    def __init__(self, config: LoopConfig, steps: int, elapsed: float = 0.0, ramp: BatchRamp | None = None) -> None:
        self.config, self.ramp = config, ramp or BatchRamp(config.grad_accum)
        self.ten_steps_in = 0.0
        self.mark = (steps, elapsed)  # (steps, elapsed) at the last fit; a resumed run starts from its checkpoint's

    def after_step(self, schedule: Schedule, steps: int, tokens: int, elapsed: float, training: float) -> None:
        if schedule.fitted:
            return
        if steps == 10:
            self.ten_steps_in = training
        if self.config.max_time is None:
            schedule.fit(fitted_horizon(self.config, steps, tokens, ramp=self.ramp), steps)
        elif steps == 20:
            pace = (training - self.ten_steps_in) / 10 / 0.95
            schedule.fit(fitted_horizon(self.config, steps, tokens, pace, self.config.max_time * 60 - elapsed), steps)
            self.mark = (steps, elapsed)

    def after_evaluation(self, schedule: Schedule, steps: int, tokens: int, elapsed: float) -> None:
        if self.config.max_time is None or not schedule.fitted or steps <= self.mark[0]:
            return
        pace = (elapsed - self.mark[1]) / (steps - self.mark[0])
        schedule.fit(fitted_horizon(self.config, steps, tokens, pace, self.config.max_time * 60 - elapsed), steps)
        self.mark = (steps, elapsed)


def fitted_horizon(
    config: LoopConfig,
    steps: int,
    tokens: int,
    seconds_per_step: float | None = None,
    seconds_left: float | None = None,
    *,
    ramp: BatchRamp | None = None,
) -> int:
    """Optimizer steps the learning-rate schedule spans: the first limit the run will reach.

    Args:
        steps, tokens: done so far (tokens per step from their ratio, for ``max_tokens``).
        seconds_per_step, seconds_left: pace and time left, for ``max_time``.
        ramp: the micro-batches of each step (a batch-size warm-up); None: ``grad_accum`` each.

    ``max_steps=1000, max_time=5`` at 0.5 s per step with 240 s left after 50 steps -> 530.
    """
    limits = [config.max_steps] if config.max_steps is not None else []
    if config.max_tokens is not None and steps:  # tokens per micro-batch so far -> the micro-batches of the limit
        ramp = ramp or BatchRamp(config.grad_accum)
        limits.append(ramp.steps_to(math.ceil(config.max_tokens * ramp.before(steps) / max(tokens, 1))))
    if config.max_time is not None and seconds_per_step and seconds_left is not None:
        limits.append(steps + max(1, int(seconds_left / seconds_per_step)))
    return max(1, min(limits))
