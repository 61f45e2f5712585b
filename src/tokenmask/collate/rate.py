"""A masking-rate schedule: the rate of each optimizer step, linear from one rate to another or by phase.

What changes over a run reaches the masking as an argument, as the epoch does: the streams
(:class:`~tokenmask.collate.stream.MicroBatches`, :class:`~tokenmask.collate.chunked.ChunkBatches`)
work out each micro-batch's rate from its place in the run and pass it to the collator, so a
collator copied into DataLoader workers masks exactly as the training process would. The
schedule is a frozen value: a new horizon is a new schedule, never a change to this one.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RateSchedule:
    """``start`` at step 0, linearly to ``end`` at step ``horizon`` (``end`` after it), or by ``phases``.

    Until the horizon is known (None: a token or time limit that the learning-rate schedule has
    not fitted yet, :class:`~tokenmask.train.schedule.Pace`) every step masks at ``start``. All
    ``grad_accum`` micro-batches of a step mask at that step's rate.

    ``RateSchedule(0.3, 0.1, horizon=8).at(2)  ->  0.3 + (0.1 - 0.3) * 2 / 8 = 0.25``;
    with ``grad_accum=2``, micro-batches 4 and 5 are step 2's: ``rate_of(4) == rate_of(5) == 0.25``.
    ``RateSchedule(0.3, phases=((0.6, 0.15), (0.9, 0.05)), horizon=10)``: steps 0-5 mask at 0.3,
    6-8 at 0.15, 9 at 0.05 (mmBERT's 30% -> 15% -> 5%).

    Attributes:
        start: the rate at step 0 (``mlm_probability``).
        end: the rate at the horizon (``mlm_probability_end``); None with phases.
        phases: ``(share, rate)`` pairs, shares rising: from ``share × horizon`` on, mask at ``rate``.
        horizon: optimizer steps the schedule spans, or None.
        grad_accum: micro-batches per optimizer step.

    Raises:
        ValueError: ``grad_accum`` below 1.
    """

    start: float
    end: float | None = None
    horizon: int | None = None
    grad_accum: int = 1
    phases: tuple[tuple[float, float], ...] = ()

    def __post_init__(self) -> None:
        if self.grad_accum < 1:
            raise ValueError(f"grad_accum must be >= 1; got {self.grad_accum}")

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
        return self.at(micro_batch // self.grad_accum)


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
