"""What changes from step to step of a run's data: the masking rate (linear, or by phase) and the batch size.

What changes over a run reaches the masking as an argument, as the epoch does: the streams
(:class:`~tokenmask.collate.stream.MicroBatches`, :class:`~tokenmask.collate.chunked.ChunkBatches`)
work out each micro-batch's rate from its place in the run and pass it to the collator, so a
collator copied into DataLoader workers masks exactly as the training process would. The
schedule is a frozen value: a new horizon is a new schedule, never a change to this one.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass


@dataclass(frozen=True)
class BatchRamp:
    """The micro-batches each optimizer step takes: ``grad_accum``, or, with a batch-size warm-up of
    ``tokens``, one at first and one more each time the run has read another ``tokens / (grad_accum - 1)``
    tokens, ``grad_accum`` from ``tokens`` on (ModernBERT's and mmBERT's warm-up of the batch size).

    The reading is counted in micro-batches of ``micro_tokens`` tokens (all processes'), so that a
    step's micro-batches follow from its number alone: a resumed run and DataLoader workers agree.
    ``BatchRamp(3, tokens=400, micro_tokens=100)``: one more every 200 tokens, i.e. 2 micro-batches.
    Steps 0 and 1 take 1 each, step 2 takes 2 (micro-batches 2-3), steps 3 on take 3:
    ``[size(k) for k in range(5)] == [1, 1, 2, 3, 3]``, ``before(4) == 7``, ``step_of(5) == 3``.

    Raises:
        ValueError: ``grad_accum`` or ``micro_tokens`` below 1.
    """

    grad_accum: int = 1
    tokens: int = 0
    micro_tokens: int = 1

    def __post_init__(self) -> None:
        if self.grad_accum < 1 or self.micro_tokens < 1:
            raise ValueError(f"grad_accum and micro_tokens must be >= 1; got {self.grad_accum}, {self.micro_tokens}")

    @functools.cached_property
    def _stages(self) -> list[tuple[int, int, int]]:
        """``(first step, micro-batches before it, micro-batches per step)`` of each stage; the last one lasts."""
        stages, step, micro = [], 0, 0
        for size in range(1, self.grad_accum if self.tokens > 0 else 1):
            ends = size * self.tokens / ((self.grad_accum - 1) * self.micro_tokens)  # micro-batches read when it ends
            if micro < ends:
                count = math.ceil((ends - micro) / size)
                stages.append((step, micro, size))
                step, micro = step + count, micro + count * size
        return [*stages, (step, micro, self.grad_accum)]

    def _stage(self, at: int, field: int) -> tuple[int, int, int]:
        return [stage for stage in self._stages if stage[field] <= at][-1]

    def size(self, step: int) -> int:
        """The micro-batches of optimizer step ``step`` (0-based)."""
        return self._stage(step, 0)[2]

    def before(self, step: int) -> int:
        """The micro-batches of the steps before ``step``: where its first one is in the run's order."""
        first, micro, size = self._stage(step, 0)
        return micro + (step - first) * size

    def step_of(self, micro_batch: int) -> int:
        """The optimizer step that the run's micro-batch ``micro_batch`` (0-based) belongs to."""
        first, micro, size = self._stage(micro_batch, 1)
        return first + (micro_batch - micro) // size

    def steps_to(self, micro_batches: int) -> int:
        """The steps it takes to read ``micro_batches`` micro-batches."""
        first, micro, size = self._stage(micro_batches, 1)
        return first + math.ceil((micro_batches - micro) / size)


@dataclass(frozen=True)
class RateSchedule:
    """``start`` at step 0, linearly to ``end`` at step ``horizon`` (``end`` after it), or by ``phases``.

    Until the horizon is known (None: a token or time limit that the learning-rate schedule has
    not fitted yet, :class:`~tokenmask.train.schedule.Pace`) every step masks at ``start``. All
    micro-batches of a step (``ramp``) mask at that step's rate.

    ``RateSchedule(0.3, 0.1, horizon=8).at(2)  ->  0.3 + (0.1 - 0.3) * 2 / 8 = 0.25``;
    with ``ramp=BatchRamp(2)``, micro-batches 4 and 5 are step 2's: ``rate_of(4) == rate_of(5) == 0.25``.
    ``RateSchedule(0.3, phases=((0.6, 0.15), (0.9, 0.05)), horizon=10)``: steps 0-5 mask at 0.3,
    6-8 at 0.15, 9 at 0.05 (mmBERT's 30% -> 15% -> 5%).

    Attributes:
        start: the rate at step 0 (``mlm_probability``).
        end: the rate at the horizon (``mlm_probability_end``); None with phases.
        phases: ``(share, rate)`` pairs, shares rising: from ``share × horizon`` on, mask at ``rate``.
        horizon: optimizer steps the schedule spans, or None.
        ramp: the micro-batches of each optimizer step (:class:`BatchRamp`).
    """

    start: float
    end: float | None = None
    horizon: int | None = None
    ramp: BatchRamp = BatchRamp()
    phases: tuple[tuple[float, float], ...] = ()

    def at(self, step: int) -> float:
        """The rate of optimizer step ``step`` (0-based)."""
        if not self.horizon:
            return self.start
        if self.end is not None:
            return self.start + (self.end - self.start) * min(1.0, step / self.horizon)
        rates = [rate for share, rate in self.phases if step >= share * self.horizon]
        return rates[-1] if rates else self.start

    def rate_of(self, micro_batch: int) -> float:
        """The rate of the run's micro-batch ``micro_batch`` (0-based, counted from the run's start): its step's."""
        return self.at(self.ramp.step_of(micro_batch))


def parse_phases(spelled: tuple[str, ...]) -> tuple[tuple[float, float], ...]:
    """``("0.6:0.15", "0.9:0.05")`` -> ``((0.6, 0.15), (0.9, 0.05))``: shares rising in (0, 1), rates in (0, 1].

    Raises:
        ValueError: a phase not spelled ``SHARE:RATE``, or out of range.
    """
    phases = []
    for phase in spelled:
        share, _, rate = phase.partition(":")
        try:
            phases.append((float(share), float(rate)))
        except ValueError:
            raise ValueError(f"mlm_phases: each phase is SHARE:RATE, e.g. 0.6:0.15; got {phase!r}") from None
    shares = [share for share, _ in phases]
    if any(not 0.0 < share < 1.0 for share in shares) or shares != sorted(set(shares)):
        raise ValueError(f"mlm_phases: shares of the run must rise within (0, 1); got {', '.join(spelled)}")
    if any(not 0.0 < rate <= 1.0 for _, rate in phases):
        raise ValueError(f"mlm_phases: rates must be in (0, 1]; got {', '.join(spelled)}")
    return tuple(phases)
