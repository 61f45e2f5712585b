"""The training loop, written out once: batch -> forward -> backward -> step -> every N: eval / log / save.

Pre-training and fine-tuning share it; they differ in the :class:`~tokenmask.train.job.Job`
they hand it (model, batches, loss, evaluation), not in copied loops. Loss normalisation: an
optimizer step's loss is the sum of losses over all its micro-batches divided by the number of
targets in the whole step, so gradient accumulation gives the same update as one large batch;
a step without targets contributes zero. Saving and restoring a run's state is
:mod:`tokenmask.train.runs`'s.
"""

from __future__ import annotations

import math
import signal
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator

from tokenmask.collate.stream import Shard
from tokenmask.settings import flatten
from tokenmask.train.checkpoint import newest_valid_checkpoint, save_model, snapshot_folder
from tokenmask.train.config import LoopConfig
from tokenmask.train.groups import HeadWarmup, lr_multipliers, parameter_groups
from tokenmask.train.heads import compile_encoder
from tokenmask.train.interrupt import Interrupted, StopSignals
from tokenmask.train.job import Job, NonFiniteSteps, QuietReporter, Reporter, TrainResult
from tokenmask.train.logs import PLOT_FILE, RunLog, plot_metrics, read_metrics
from tokenmask.train.parallel import LossModule, gathered, gathered_rng_states, make_accelerator, summed
from tokenmask.train.runs import (
    CHECKPOINTS,
    CONFIG_FILE,
    check_output,
    clear_old_run,
    restore_run_state,
    resume_checkpoint,
    save_run_state,
    trim_metrics,
    write_settings,
)  # fmt: skip
from tokenmask.train.schedule import Pace, Schedule
from tokenmask.train.step import TARGETS_PER_TOKEN, backward_step, count_targets, optimizer_step, skip_reason
from tokenmask.train.trackers import installed_trackers, start_trackers

__all__ = ["train"]


def train(
    config: LoopConfig,
    build: Callable[[Path | None, Shard], Job],
    reporter: Reporter = QuietReporter(),
    *,
    settings: Mapping[str, Any] | None = None,
) -> TrainResult:
    """Run the loop on the :class:`~tokenmask.train.job.Job` that ``build(checkpoint, shard)`` makes; the model ends in OUTPUT/model.

    The run stops at the first of ``max_steps``, ``max_tokens`` and ``max_time``; the
    learning-rate schedule spans that limit (its horizon, fitted as the run goes for a token or
    time limit, reaches the job's functions as an argument; a job whose batches follow it gets
    fresh batches from where the run stands whenever it moves). With ``config.resume``, ``build`` gets the newest
    valid checkpoint (to load the model from; None when there is none yet, and the run starts
    from the beginning: :func:`~tokenmask.train.runs.resume_checkpoint`) and the loop restores
    the optimizer, schedule, data position and dropout state, so the run continues as if never
    interrupted.

    Under ``accelerate launch`` / ``torchrun`` every process runs this; ``shard`` tells the job
    which slice of each global batch is its own. Only the main process reports, logs and
    writes checkpoints; all of them evaluate (the same numbers). ``settings`` (the recipe's
    resolved config, flat) are written to ``OUTPUT/config.yaml``, which replays the run
    (``tokenmask pretrain --config OUTPUT/config.yaml``).

    A step whose loss or gradient is not finite is skipped (no update) and logged.

    Raises:
        ValueError: bad settings or an output folder that holds another run.
        NonFiniteSteps: ``max_bad_steps`` steps in a row were skipped; checkpoints stay as they were.
        Interrupted: SIGINT or SIGTERM; a checkpoint of the last step was saved first.
    """
    output = Path(config.output)
    settings = settings if settings is not None else flatten(config)
    trackers = installed_trackers(config.trackers)  # refuses a missing one before anything runs
    accelerator = make_accelerator(precision=config.precision, cpu=config.cpu, trackers=trackers, output=output)
    shard = Shard(accelerator.process_index, accelerator.num_processes)
    reporter = reporter if shard.is_main else QuietReporter()
    job, checkpoint = _build(config, build, accelerator, shard, reporter)
    wrapped = accelerator.prepare(LossModule(job.model, job.loss))
    model = accelerator.unwrap_model(wrapped).model  # the plain model: evaluation, checkpoints
    optimizer = accelerator.prepare(_optimizer(model, config))
    schedule = Schedule(config)
    result = TrainResult(steps=0, tokens=0, seconds=0.0, output=str(output))
    if checkpoint is not None:
        restore_run_state(
            checkpoint, optimizer, schedule, result, shard, reporter, scaler=accelerator.scaler, position=job.position
        )
    multipliers = lr_multipliers(
        optimizer.param_groups, schedule, head_warmup_steps=config.head_warmup_steps, ramp_steps=lambda: schedule.warmup_steps
    )  # one per group: layer-wise scale; the body still during a head-only warm-up
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, multipliers, last_epoch=result.steps - 1)
    head_warmup = HeadWarmup(model, config.head_warmup_steps, freeze=shard.world == 1)
    # asked for before OUTPUT is written: a job refuses data that fill no batch here
    batches_horizon = _horizon(schedule)  # the horizon the batches were asked for
    batches = job.batches(result.steps * config.grad_accum, batches_horizon)
    if trackers:  # a tracker that fails to start (a bad URI, no login) stops the run before OUTPUT is written too
        start_trackers(accelerator, trackers, settings)
    if shard.is_main:
        if checkpoint is not None:
            trim_metrics(output, result.steps, reporter.message)
        output.mkdir(parents=True, exist_ok=True)
        write_settings(output / CONFIG_FILE, settings)
    log = (
        RunLog(output, append=checkpoint is not None, mirror=accelerator.log if trackers else None) if shard.is_main else _NoLog()
    )
    evaluation_seconds = 0.0
    pace = Pace(config, result.steps, result.seconds)

    def evaluate(*, logged: bool = True) -> None:
        nonlocal evaluation_seconds
        accelerator.wait_for_everyone()  # the main process has logged every step: jobs may read the log
        began = time.perf_counter()
        metrics = job.evaluate(model, result.steps, _horizon(schedule))
        evaluation_seconds += time.perf_counter() - began
        record = {"step": result.steps, "tokens": result.tokens, **{f"eval_{k}": v for k, v in metrics.items()}}
        result.evaluations.append(record)
        if logged:
            log.write(record)
        shown = ", ".join(f"{k} {v:.3f}" for k, v in metrics.items() if isinstance(v, float))
        reporter.message(f"step {result.steps}: eval {shown}")

    saved_at = -1  # the step of the last checkpoint saved

    def save() -> Path:
        nonlocal saved_at
        saved_at = result.steps
        rng = gathered_rng_states(accelerator)  # collectives: every process takes part
        data = gathered(accelerator, job.position.state()) if job.position is not None else None
        if shard.is_main:
            save_run_state(
                output, model, job.tokenizer, optimizer, schedule, result, rng,
                data=data, scaler=accelerator.scaler, keep=config.keep_last, report=reporter.message,
            )  # fmt: skip
        return output / CHECKPOINTS / f"step-{result.steps}"

    def main_clock(*also: float) -> tuple[float, ...]:
        """Seconds since the start (and ``also``) on the main process; 0 elsewhere, to be summed."""
        return (time.perf_counter() - start, *also) if shard.is_main else (0.0,) * (1 + len(also))

    snapshots = _Snapshots(config, output, reporter) if shard.is_main else None

    start = time.perf_counter() - result.seconds  # a time limit counts the whole run, across restarts
    bad_in_a_row, elapsed, first_step = 0, result.seconds, result.steps
    try:
        with StopSignals() as signals:
            if checkpoint is None and config.eval_at_start:
                evaluate()
            while not _limit_reached(config, result, elapsed):  # a resumed run may have reached it already
                if job.follows_horizon and _horizon(schedule) != batches_horizon:  # those made ahead are for the old one
                    batches_horizon = _horizon(schedule)
                    batches = job.batches(result.steps * config.grad_accum, batches_horizon)
                extra = job.before_step(result.steps, _horizon(schedule))
                head_warmup.before_step(result.steps, optimizer)
                fetching = time.perf_counter()
                micro_batches = [next(batches) for _ in range(config.grad_accum)]  # collate (+ mask)
                data_seconds = time.perf_counter() - fetching
                targets, norm, (loss, tokens, elapsed, evaluated, stops) = _backward(
                    accelerator, wrapped, micro_batches, shard,
                    shared=[*main_clock(evaluation_seconds), signals.received is not None], per_token=job.per_token_loss,
                )  # fmt: skip
                stepped, bad = optimizer_step(accelerator, optimizer, loss, norm)
                optimizer.zero_grad(set_to_none=True)
                scheduler.step()
                result.steps += 1
                result.tokens += int(tokens)
                result.seconds = elapsed
                bad_in_a_row = bad_in_a_row + 1 if bad else 0
                record = {
                    "step": result.steps, "tokens": result.tokens, "loss": loss, "lr": max(scheduler.get_last_lr()),
                    "targets": int(targets), **extra, "seconds": elapsed, "data_seconds": data_seconds,
                }  # fmt: skip
                if not stepped:  # JSON has no NaN: null, and the reason
                    record.update(loss=_finite_or_none(loss), grad_norm=_finite_or_none(norm), skipped=skip_reason(accelerator))
                log.write(record)
                if not stepped:
                    reporter.message(
                        f"step {result.steps}: loss {loss} / gradient norm {norm}: step skipped ({record['skipped']})"
                    )
                    if bad_in_a_row >= config.max_bad_steps:
                        raise NonFiniteSteps(_non_finite_message(config, output, result.steps))
                pace.after_step(schedule, result.steps, result.tokens, elapsed, elapsed - evaluated)
                if snapshots is not None:  # before a stop's save: the resumed run will not take it again
                    snapshots.take(model, job, result)
                if result.steps % config.eval_every == 0:  # before a stop's save: the resumed run will not redo it
                    evaluate()
                    pace.after_evaluation(schedule, result.steps, result.tokens, summed(accelerator, main_clock())[0])
                if stops:
                    raise Interrupted(signals.received or signal.SIGTERM, result.steps, str(save()))
                if result.steps % config.save_every == 0 and not bad_in_a_row:  # keep the last good one last
                    save()
                reporter.step(result.steps, schedule.horizon, loss, result.tokens / elapsed)
            if result.steps == first_step and checkpoint is not None:
                reporter.message(f"the run had reached its limit at step {result.steps:,}: nothing to train")
                evaluate(logged=not _evaluation_logged(output, result.steps))  # the final numbers, for the job
            elif not result.evaluations or result.evaluations[-1]["step"] != result.steps:
                evaluate()
            if summed(accelerator, [float(signals.received is not None)])[0]:  # came after the last step's check
                if checkpoint is not None and result.steps == first_step:  # resumed at the limit: its checkpoint is this step's
                    saved = checkpoint
                else:  # a periodic save at the last step may have written it already
                    saved = output / CHECKPOINTS / f"step-{result.steps}" if saved_at == result.steps else save()
                raise Interrupted(signals.received or signal.SIGTERM, result.steps, str(saved))
    finally:
        log.close()
        for tracker in accelerator.trackers:  # not end_training(): it also ends the process group, still needed
            tracker.finish()
    result.seconds = time.perf_counter() - start
    result.model = model
    if shard.is_main:
        save_model(output / "model", model, job.tokenizer, card=job.card(result))  # training state: in checkpoints/ only
        plot_metrics(read_metrics(output), output / PLOT_FILE)
    accelerator.wait_for_everyone()
    return result


class _Snapshots:
    """The model saved at shares of the run's limit (``config.snapshots``), each once: a share
    whose folder exists (a resumed run's) is not taken again."""

    def __init__(self, config: LoopConfig, output: Path, reporter: Reporter) -> None:
        self.config, self.output, self.reporter = config, output, reporter
        self.waiting = [share for share in sorted(config.snapshots) if not snapshot_folder(output, share).is_dir()]

    def take(self, model: Any, job: Job, result: TrainResult) -> None:  # a PreTrainedModel
        while self.waiting and self.config.snapshot_due(self.waiting[0], result.steps, result.tokens):
            share = self.waiting.pop(0)
            notes = {"share": share, "step": result.steps, "tokens": result.tokens}
            save_model(snapshot_folder(self.output, share), model, job.tokenizer, card=job.card(result), notes=notes)
            self.reporter.message(
                f"step {result.steps}: snapshot at {share:g} of the run in {snapshot_folder(self.output, share)}"
            )


def _build(
    config: LoopConfig, build: Callable[[Path | None, Shard], Job], accelerator: Accelerator, shard: Shard, reporter: Reporter
) -> tuple[Job, Path | None]:
    """Check the output folder, find the checkpoint to resume from, build the job; say what runs where."""
    output = Path(config.output)
    check_output(output, config)
    torch.manual_seed(config.seed)
    with accelerator.main_process_first():  # the main process cleans up after a kill and fills the block cache first
        checkpoint = resume_checkpoint(output, reporter.message) if config.resume else None
        job = build(checkpoint, shard)
    job.model.train()  # from_pretrained gives a model in evaluation mode: no dropout, unlike a fresh one
    if config.compile:
        compile_encoder(job.model)
    if config.overwrite and not config.resume:
        accelerator.wait_for_everyone()  # every process has loaded what it needs (--init may name OUTPUT/model)
        if shard.is_main:
            clear_old_run(output)  # only now that the new run's input proved good
    precision = {"bf16": "bf16 autocast", "fp16": "fp16 autocast with a gradient scaler"}.get(accelerator.mixed_precision, "fp32")
    place = f"{shard.world} processes ({accelerator.distributed_type.value}), " if shard.world > 1 else ""
    reporter.message(
        f"model: {sum(p.numel() for p in job.model.parameters()):,} parameters, {place}{accelerator.device}, {precision}"
    )
    if shard.world > 1:
        reporter.message(
            f"global batch: {config.batch_size} x {shard.world} processes x {config.grad_accum} accumulated "
            f"= {config.batch_size * shard.world * config.grad_accum} per step"
        )
    return job, checkpoint


def _backward(
    accelerator: Accelerator,
    wrapped: torch.nn.Module,
    micro_batches: list[dict[str, Any]],
    shard: Shard,
    *,
    shared: list[float],
    per_token: bool = False,
) -> tuple[int, float, list[float]]:
    """The backward pass of a step over all processes.

    With ``per_token``, every micro-batch gets the step's targets over its real tokens
    (:data:`~tokenmask.train.step.TARGETS_PER_TOKEN`), for a loss with a per-token term.

    Returns ``(targets, gradient norm, [loss, tokens, *shared])``: the step's targets in all
    processes, the norm of the (synchronised) gradient before clipping, and its mean loss, real
    tokens and ``shared`` summed over the processes, so that every process decides on the same numbers.
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
        wrapped, micro_batches, loss=_forward, accelerator=accelerator, step_targets=int(targets), processes=shard.world
    )
    norm = float(accelerator.clip_grad_norm_(wrapped.parameters(), 1.0))
    return int(targets), norm, summed(accelerator, [loss, tokens, *shared])


def _horizon(schedule: Schedule) -> int | None:
    """The schedule's horizon once fitted (:data:`~tokenmask.train.job.Horizon`), else None."""
    return schedule.horizon if schedule.fitted else None


def _evaluation_logged(output: Path, step: int) -> bool:
    return any(r.get("step") == step and any(k.startswith("eval_") for k in r) for r in read_metrics(output))


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _forward(wrapped: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    return wrapped(batch)  # LossModule: the job's loss, inside DDP's / FSDP's forward


def _non_finite_message(config: LoopConfig, output: Path, step: int) -> str:
    kept = newest_valid_checkpoint(output / CHECKPOINTS)
    where = f"the last good checkpoint is {kept}" if kept is not None else "no checkpoint was written"
    return (
        f"stopped at step {step:,}: {config.max_bad_steps} steps in a row had a NaN or infinite loss or gradient "
        f"(each was skipped); {where}. Lower --lr, raise --warmup, or use --precision fp32"
    )


class _NoLog:
    """The run log of processes other than the main one."""

    def write(self, record: dict[str, Any]) -> None:
        pass

    def close(self) -> None:
        pass


def _limit_reached(config: LoopConfig, result: TrainResult, elapsed: float) -> bool:
    return (
        (config.max_steps is not None and result.steps >= config.max_steps)
        or (config.max_tokens is not None and result.tokens >= config.max_tokens)
        or (config.max_time is not None and elapsed > config.max_time * 60)
    )


def _optimizer(model: torch.nn.Module, config: LoopConfig) -> torch.optim.Optimizer:
    """AdamW without weight decay on biases and norms, with layer-wise learning rates and the head
    apart where the config asks (:func:`~tokenmask.train.groups.parameter_groups`); the fused
    kernel (as the HF Trainer uses since torch 2.8) where the parameters' device has it."""
    groups = parameter_groups(model, config)
    fused = all(p.device.type in ("cpu", "cuda") and p.is_floating_point() for p in model.parameters())
    return torch.optim.AdamW(groups, lr=config.lr, betas=(0.9, 0.98), eps=1e-6, fused=fused)
