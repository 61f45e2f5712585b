"""One optimizer step's backward pass over its micro-batches, with the loss normalised once.

The loss of a step is the sum of token losses over all its micro-batches divided by the
number of targets in the whole step (across gradient-accumulation micro-batches and
data-parallel processes), so accumulation gives the gradient of one large batch; a step
without targets adds nothing, never NaN. :mod:`tokenmask.train.loop` calls :func:`backward_pass`
once per step.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any, NamedTuple

import torch
from accelerate import Accelerator

from tokenmask.masking.config import IGNORE_INDEX
from tokenmask.train.heads import masked_lm_loss
from tokenmask.train.parallel import summed

TARGETS_PER_TOKEN = "targets_per_token"
"""Batch key of a 0-d tensor: the step's targets over its real tokens, in all micro-batches and
processes, set by the loop for a loss with a per-token term
(:attr:`~tokenmask.train.job.Job.per_token_loss`); such a loss multiplies its per-token sum by
it, so that dividing by the step's targets gives the per-token mean.
"""

LossFunction = Callable[[torch.nn.Module, dict[str, torch.Tensor]], torch.Tensor]
"""``(model, batch) -> summed loss`` (a 0-d tensor with grad) over the batch's targets."""


def mlm_loss_sum(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The masked-LM loss summed over a batch's targets, with the sparse head."""
    return masked_lm_loss(model, batch, count_correct=False).loss_sum


def count_targets(micro_batches: list[dict[str, torch.Tensor]]) -> int:
    """Labels other than -100 in the micro-batches: masked tokens, labelled tokens or examples."""
    return sum(int((b["labels"] != IGNORE_INDEX).sum()) for b in micro_batches)


def backward_step(
    model: torch.nn.Module,
    micro_batches: list[dict[str, torch.Tensor]],
    *,
    loss: LossFunction | None = None,
    accelerator: Accelerator | None = None,
    step_targets: int | None = None,
    processes: int = 1,
) -> tuple[float, int]:
    """Backward pass of one optimizer step over its micro-batches; gradients accumulate.

    Each micro-batch's loss sum is divided by the number of targets (labels other than -100:
    masked tokens, labelled tokens, or examples) in the whole step, so the gradient equals that
    of one batch holding all of them. ``loss`` gives a batch's summed loss (default: the MLM
    loss with the sparse head).

    Args:
        step_targets: the step's target count in all processes together; by default counted
            in ``micro_batches``.
        processes: data-parallel processes whose gradients DDP / FSDP average; the loss is
            multiplied by their number, so the average is the gradient of the global sum over
            ``step_targets``.
        accelerator: batches move to its device, the forward pass runs under its autocast (bf16
            when enabled), and gradients are synchronised only after the last micro-batch.

    Returns:
        ``(loss sum / step_targets, real tokens)`` of these micro-batches (0.0 without targets,
        which adds no gradient); summed over processes it is the step's mean loss per target.
    """
    loss = loss or mlm_loss_sum
    step_targets = count_targets(micro_batches) if step_targets is None else step_targets
    loss_sum, tokens = 0.0, 0
    for number, batch in enumerate(micro_batches, start=1):
        if accelerator is None:
            total = loss(model, batch)
        else:
            batch = {k: v.to(accelerator.device, non_blocking=True) for k, v in batch.items() if isinstance(v, torch.Tensor)}
            synchronise = number == len(micro_batches)  # DDP: all-reduce gradients once per step
            with nullcontext() if synchronise else accelerator.no_sync(model):
                with accelerator.autocast():
                    total = loss(model, batch)
                if step_targets:
                    accelerator.backward(total * processes / step_targets)
        if accelerator is None and step_targets:
            (total / step_targets).backward()
        loss_sum += float(total.detach())
        tokens += int(batch["attention_mask"].sum())
    return loss_sum / max(step_targets, 1), tokens


class BackwardPass(NamedTuple):
    """What :func:`backward_pass` computed: the step's targets in all processes; this process's
    share of the mean loss and its real tokens (summed over the processes they are the step's);
    the norm of the synchronised gradient before clipping."""

    targets: int
    loss: float
    tokens: int
    norm: float


def backward_pass(
    accelerator: Accelerator, wrapped: torch.nn.Module, micro_batches: list[dict[str, Any]], *, per_token: bool = False
) -> BackwardPass:
    """The backward pass of a step in every process (:func:`backward_step`), its gradient clipped to norm 1.

    The step's targets are counted in all processes first (a collective), and each micro-batch's
    loss is divided by them. With ``per_token``, every micro-batch also gets the step's targets
    over its real tokens (:data:`TARGETS_PER_TOKEN`), for a loss with a per-token term.
    ``wrapped`` is the prepared :class:`~tokenmask.train.parallel.LossModule`.
    """
    if per_token:
        targets, real = summed(
            accelerator, [count_targets(micro_batches), sum(int(b["attention_mask"].sum()) for b in micro_batches)]
        )
        ratio = torch.tensor(targets / max(real, 1), dtype=torch.float32)  # every device has float32
        micro_batches = [{**batch, TARGETS_PER_TOKEN: ratio} for batch in micro_batches]
    else:
        (targets,) = summed(accelerator, [count_targets(micro_batches)])
    loss, tokens = backward_step(
        wrapped,
        micro_batches,
        loss=_forward,
        accelerator=accelerator,
        step_targets=int(targets),
        processes=accelerator.num_processes,
    )
    norm = float(accelerator.clip_grad_norm_(wrapped.parameters(), 1.0))
    return BackwardPass(int(targets), loss, tokens, norm)


def _forward(wrapped: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    return wrapped(batch)  # LossModule: the job's loss, inside DDP's / FSDP's forward


def optimizer_step(accelerator: Accelerator, optimizer: torch.optim.Optimizer, loss: float, norm: float) -> tuple[bool, bool]:
    """Apply the step's update unless it is not finite; returns ``(stepped, bad)``.

    Without a gradient scaler (fp32, bf16) a step whose loss or gradient norm is NaN or
    infinite is skipped, and counts as bad. With one (fp16), the scaler decides, as it must
    to lower its scale: it skips a step whose scaled gradients overflowed (``stepped`` False,
    as ``accelerator.optimizer_step_was_skipped`` says), and only a non-finite loss counts as
    bad; an overflow is the scaler's routine, not a diverging run.
    """
    if accelerator.scaler is None:
        finite = math.isfinite(loss) and math.isfinite(norm)
        if finite:
            optimizer.step()
        return finite, not finite
    optimizer.step()  # the wrapped optimizer: scaler.step (skips on inf / NaN gradients) and scaler.update
    return not accelerator.optimizer_step_was_skipped, not math.isfinite(loss)


def skip_reason(accelerator: Accelerator) -> str:
    """Why :func:`optimizer_step` skipped a step, for the log."""
    if accelerator.scaler is None:
        return "non-finite loss or gradient"
    return f"fp16 gradient overflow: loss scale lowered to {accelerator.scaler.get_scale():g}"
