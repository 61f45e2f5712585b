"""What the training loop is handed and what it hands back: the :class:`Job`, its reporter, its result.

A recipe (``pretrain``, ``finetune``) builds a :class:`Job`; :func:`tokenmask.train.loop.train`
runs it and returns a :class:`TrainResult`. Everything that changes over a run (the step, the
learning-rate schedule's horizon) reaches the job's functions as arguments, so a job keeps no
state of the loop's and DataLoader workers see what the training process sees. Importing this
module imports no torch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch

    from tokenmask.collate.rate import BatchRamp
    from tokenmask.train.step import LossFunction

__all__ = ["DataPosition", "Job", "NonFiniteSteps", "QuietReporter", "Reporter", "TrainResult"]


class DataPosition(Protocol):
    """Where a job's data stands when the step count cannot say it (a stream read in order):
    each process's ``state()`` is saved in every checkpoint and ``load``-ed back on resume,
    before the loop asks for batches."""

    def state(self) -> dict[str, Any]: ...

    def load(self, state: dict[str, Any]) -> None: ...


class Reporter(Protocol):
    """Where the loop reports; :class:`QuietReporter` does nothing."""

    def message(self, text: str) -> None: ...

    def step(self, step: int, total: int | None, loss: float, tokens_per_s: float) -> None: ...


class QuietReporter:
    """A :class:`Reporter` that says nothing (processes other than the main one, the Python API's default)."""

    def message(self, text: str) -> None:
        pass

    def step(self, step: int, total: int | None, loss: float, tokens_per_s: float) -> None:
        pass


@dataclass
class TrainResult:
    """What a run did: steps, tokens seen, time, evaluations, where the model is."""

    steps: int
    tokens: int
    seconds: float
    evaluations: list[dict[str, Any]] = field(default_factory=list)
    output: str = ""
    model: Any = None


class NonFiniteSteps(ValueError):
    """``max_bad_steps`` optimizer steps in a row had a NaN or infinite loss or gradient."""


Horizon = int | None
"""The learning-rate schedule's horizon in optimizer steps; None until a token or time limit has
fitted it (:class:`~tokenmask.train.schedule.Pace`)."""


@dataclass
class Job:
    """What the loop trains, built by a recipe (``pretrain``, ``finetune``).

    Attributes:
        model: the model, in training mode, not yet prepared by Accelerate.
        tokenizer: saved with every checkpoint.
        batches: ``(skip, horizon) -> micro-batches forever``; the first ``skip`` are passed
            over (resuming), so the rest is what an uninterrupted run sees. ``horizon`` is the
            schedule's when the loop asks (:data:`Horizon`).
        evaluate: ``(model, step, horizon) -> metrics`` (plain numbers; ``loss`` first), at
            fixed inputs, after ``step`` optimizer steps.
        loss: ``(model, batch) -> summed loss`` over the batch's targets.
        before_step: ``(step, horizon) -> fields to log`` with the step (0-based) about to run
            (e.g. its masking rate); by default nothing.
        card: ``result -> model card`` (:func:`~tokenmask.train.card.model_card`), the
            ``README.md`` of OUTPUT/model; by default none.
        position: the data's :class:`DataPosition`, for data the step count does not place;
            None: ``batches(skip, horizon)`` finds the place.
        follows_horizon: the batches depend on the horizon (a masking-rate schedule spans it):
            whenever the horizon moves, the loop drops the batches it was given (workers may
            have prepared some ahead) and asks for new ones from where it stands.
        ramp: the micro-batches of each step (:class:`~tokenmask.collate.rate.BatchRamp`: a batch-size
            warm-up); None: ``grad_accum`` each.
        flops_per_token: the model's training FLOPs per token (:func:`~tokenmask.train.speed.flops_per_token`),
            for the logged MFU; None: not logged.
        per_token_loss: the loss has a term per real token as well as per target (replaced-token
            detection): the loop puts the step's targets over its real tokens, in all
            micro-batches and processes, into every micro-batch as ``targets_per_token``.
    """

    model: torch.nn.Module
    tokenizer: Any
    batches: Callable[[int, Horizon], Iterator[dict[str, Any]]]
    evaluate: Callable[[torch.nn.Module, int, Horizon], dict[str, Any]]
    loss: LossFunction
    before_step: Callable[[int, Horizon], dict[str, Any]] = lambda step, horizon: {}
    card: Callable[[TrainResult], str] = lambda result: ""
    position: DataPosition | None = None
    follows_horizon: bool = False
    per_token_loss: bool = False
    flops_per_token: float | None = None
    ramp: BatchRamp | None = None
