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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import torch
from accelerate import Accelerator

from tokenmask.collate.rate import BatchRamp
from tokenmask.collate.stream import Shard
from tokenmask.train.checkpoint import save_model
from tokenmask.train.config import LoopConfig
from tokenmask.train.groups import HeadWarmup, adamw, lr_scheduler
from tokenmask.train.heads import compile_encoder
from tokenmask.train.interrupt import Interrupted, StopSignals
from tokenmask.train.job import Job, NonFiniteSteps, QuietReporter, Reporter, TrainResult
from tokenmask.train.logs import PLOT_FILE, NoLog, RunLog, plot_metrics, read_metrics
from tokenmask.train.parallel import LossModule, gathered, gathered_rng_states, make_accelerator, summed
from tokenmask.train.runs import (
    CHECKPOINTS,
    Snapshots,
    check_output,
    clear_old_run,
    non_finite_message,
    open_run_log,
    restore_run_state,
    resume_checkpoint,
    save_run_state,
    start_decay,
)  # fmt: skip
from tokenmask.train.schedule import Pace, Schedule
from tokenmask.train.speed import Speedometer, peak_flops
from tokenmask.train.step import BackwardPass, backward_pass, optimizer_step, skip_reason
from tokenmask.train.trackers import installed_trackers

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
    trackers = installed_trackers(config.trackers)  # refuses a missing one before anything runs
    accelerator = make_accelerator(precision=config.precision, cpu=config.cpu, trackers=trackers, output=output)
    shard = Shard(accelerator.process_index, accelerator.num_processes)
    reporter = reporter if shard.is_main else QuietReporter()
    job, checkpoint = _build(config, build, accelerator, shard, reporter)
    wrapped = accelerator.prepare(LossModule(job.model, job.loss))
    model = accelerator.unwrap_model(wrapped).model  # the plain model: evaluation, checkpoints
    optimizer = accelerator.prepare(adamw(model, config))
    schedule = Schedule(config)
    result = TrainResult(steps=0, tokens=0, seconds=0.0, output=str(output))
    if checkpoint is not None:
        restore_run_state(
            checkpoint, optimizer, schedule, result, shard, reporter, scaler=accelerator.scaler, position=job.position
        )
    elif config.decay_from is not None:
        start_decay(Path(config.decay_from), optimizer, config.lr, reporter)
    scheduler = lr_scheduler(optimizer, schedule, config, result.steps)
    head_warmup = HeadWarmup(model, config.head_warmup_steps, freeze=shard.world == 1)
    # asked for before OUTPUT is written: a job refuses data that fill no batch here
    batches_horizon = _horizon(schedule)  # the horizon the batches were asked for
    ramp = job.ramp or BatchRamp(config.grad_accum)  # the micro-batches of each step
    batches = job.batches(ramp.before(result.steps), batches_horizon)
    log = open_run_log(
        config, accelerator, shard, reporter, trackers, settings, resumed=checkpoint is not None, steps=result.steps
    )
    run = _Run(config, output, accelerator, shard, job, model, optimizer, schedule, log, reporter, checkpoint, result.steps)
    pace, snapshots = Pace(config, result.steps, result.seconds, ramp), Snapshots(config, output, reporter, main=shard.is_main)
    state = _LoopState(result, start=time.perf_counter() - result.seconds)  # a time limit counts the whole run, across restarts
    peak = peak_flops(accelerator.device, config.peak_tflops)
    meter = Speedometer(
        job.flops_per_token, None if peak is None else peak * shard.world, reporter.message, every=config.eval_every,
        trained=result.seconds,
    )  # fmt: skip
    bad_in_a_row = 0
    try:
        with StopSignals() as signals:
            if checkpoint is None and config.eval_at_start:
                _evaluate(run, state)
            while not config.reached(result.steps, result.tokens, result.seconds):  # a resumed run may have reached it already
                if job.follows_horizon and _horizon(schedule) != batches_horizon:  # those made ahead are for the old one
                    batches_horizon = _horizon(schedule)
                    batches = job.batches(ramp.before(result.steps), batches_horizon)
                extra = job.before_step(result.steps, _horizon(schedule))
                head_warmup.before_step(result.steps, optimizer)
                fetching = time.perf_counter()
                micro_batches = [next(batches) for _ in range(ramp.size(result.steps))]  # collate (+ mask)
                data_seconds = time.perf_counter() - fetching
                backward = backward_pass(accelerator, wrapped, micro_batches, per_token=job.per_token_loss)
                numbers = _step_numbers(run, state, backward, stop=signals.received is not None)
                stepped, bad = optimizer_step(accelerator, optimizer, numbers.loss, numbers.norm)
                optimizer.zero_grad(set_to_none=True)
                scheduler.step()
                result.steps += 1
                result.tokens += numbers.tokens
                result.seconds = numbers.elapsed
                bad_in_a_row = bad_in_a_row + 1 if bad else 0
                training = numbers.elapsed - numbers.evaluated  # seconds, evaluation left out
                extra |= meter.step(result.steps, tokens=numbers.tokens, trained=training, data_seconds=data_seconds)
                _log_step(run, state, numbers, stepped, lr=float(max(scheduler.get_last_lr())), extra=extra, data=data_seconds)
                if not stepped and bad_in_a_row >= config.max_bad_steps:
                    raise NonFiniteSteps(non_finite_message(config, output, result.steps))
                pace.after_step(schedule, result.steps, result.tokens, numbers.elapsed, training)
                snapshots.take(model, job, result)  # before a stop's save: the resumed run will not take it again
                if result.steps % config.eval_every == 0:  # before a stop's save: the resumed run will not redo it
                    _evaluate(run, state)
                    pace.after_evaluation(schedule, result.steps, result.tokens, summed(accelerator, [_clock(run, state)])[0])
                if numbers.stop:
                    raise Interrupted(signals.received or signal.SIGTERM, result.steps, str(_save(run, state)))
                if result.steps % config.save_every == 0 and not bad_in_a_row:  # keep the last good one last
                    _save(run, state)
                reporter.step(result.steps, schedule.horizon, numbers.loss, result.tokens / numbers.elapsed)
            _final_evaluation(run, state)
            if summed(accelerator, [float(signals.received is not None)])[0]:  # came after the last step's check
                saved = _late_signal_checkpoint(run, state)
                raise Interrupted(signals.received or signal.SIGTERM, result.steps, str(saved))
    finally:
        log.close()
        for tracker in accelerator.trackers:  # not end_training(): it also ends the process group, still needed
            tracker.finish()
    return _finish(run, state)


@dataclass(frozen=True)
class _Run:
    """What a run is made of, fixed once the loop starts: what :func:`_evaluate` and :func:`_save` work on.

    Attributes:
        model: the plain model (not the prepared wrapper): evaluation and checkpoints.
        log: the run log; :class:`NoLog` in processes other than the main one.
        resumed_from: the checkpoint the run resumed from; None for a fresh run.
        first_step: the steps done when the loop started (a resumed run's checkpoint's).
    """

    config: LoopConfig
    output: Path
    accelerator: Accelerator
    shard: Shard
    job: Job
    model: Any  # a PreTrainedModel
    optimizer: torch.optim.Optimizer
    schedule: Schedule
    log: RunLog | NoLog
    reporter: Reporter
    resumed_from: Path | None
    first_step: int


@dataclass
class _LoopState:
    """What changes as the loop goes, beyond the step's own numbers.

    Attributes:
        result: steps, tokens and seconds so far, and the evaluations: what :func:`train` returns.
        start: the clock at the run's start, less the seconds of the runs it resumes.
        evaluation_seconds: spent evaluating in this process, apart from training (the pace of
            a time limit counts training alone).
        saved_at: the step of the last checkpoint this process saved; -1 before the first.
    """

    result: TrainResult
    start: float
    evaluation_seconds: float = 0.0
    saved_at: int = -1


class _StepNumbers(NamedTuple):
    """One optimizer step's numbers, the same in every process (:func:`_step_numbers`)."""

    targets: int
    loss: float  # mean per target, over all processes
    norm: float
    tokens: int  # real tokens, over all processes
    elapsed: float  # seconds since the run's start, across restarts (the main process's clock)
    evaluated: float  # of which spent evaluating
    stop: bool  # a process was asked to stop (SIGINT, SIGTERM)


def _step_numbers(run: _Run, state: _LoopState, backward: BackwardPass, *, stop: bool) -> _StepNumbers:
    """The step's numbers from the one collective after its backward pass, so that every process
    decides on the same ones: each process's loss and tokens, the main process's clock and
    evaluation time (0 elsewhere) and the stop requests, summed over the processes."""
    clock = (_clock(run, state), state.evaluation_seconds) if run.shard.is_main else (0.0, 0.0)
    loss, tokens, elapsed, evaluated, stops = summed(run.accelerator, [backward.loss, backward.tokens, *clock, float(stop)])
    return _StepNumbers(backward.targets, loss, backward.norm, int(tokens), elapsed, evaluated, bool(stops))


def _clock(run: _Run, state: _LoopState) -> float:
    """Seconds since the run's start on the main process; 0 elsewhere, to be summed."""
    return time.perf_counter() - state.start if run.shard.is_main else 0.0


def _log_step(
    run: _Run, state: _LoopState, numbers: _StepNumbers, stepped: bool, *, lr: float, extra: dict[str, Any], data: float
) -> None:
    """Write the step's record to the run log (``data``: seconds spent waiting for its batches); a
    skipped step's has no NaN (JSON has none: null, and the reason), and is said."""
    result = state.result
    record = {
        "step": result.steps, "tokens": result.tokens, "loss": numbers.loss, "lr": lr, "targets": numbers.targets,
        **extra, "seconds": numbers.elapsed, "data_seconds": data,
    }  # fmt: skip
    if not stepped:
        record.update(
            loss=_finite_or_none(numbers.loss), grad_norm=_finite_or_none(numbers.norm), skipped=skip_reason(run.accelerator)
        )
    run.log.write(record)
    if not stepped:
        run.reporter.message(
            f"step {result.steps}: loss {numbers.loss} / gradient norm {numbers.norm}: step skipped ({record['skipped']})"
        )


def _evaluate(run: _Run, state: _LoopState, *, logged: bool = True) -> None:
    """Evaluate the model at the step the run stands at: the record joins the result's evaluations
    and, when ``logged``, the run log; the time it took counts as evaluation, not training."""
    run.accelerator.wait_for_everyone()  # the main process has logged every step: jobs may read the log
    result = state.result
    began = time.perf_counter()
    metrics = run.job.evaluate(run.model, result.steps, _horizon(run.schedule))
    state.evaluation_seconds += time.perf_counter() - began
    record = {"step": result.steps, "tokens": result.tokens, **{f"eval_{k}": v for k, v in metrics.items()}}
    result.evaluations.append(record)
    if logged:
        run.log.write(record)
    shown = ", ".join(f"{k} {v:.3f}" for k, v in metrics.items() if isinstance(v, float))
    run.reporter.message(f"step {result.steps}: eval {shown}")


def _final_evaluation(run: _Run, state: _LoopState) -> None:
    """The evaluation at the end, unless the loop's last step had one. A run resumed at its limit
    trained nothing: it evaluates again for the job's final numbers, and logs them only if its log lacks them."""
    result = state.result
    if result.steps == run.first_step and run.resumed_from is not None:
        run.reporter.message(f"the run had reached its limit at step {result.steps:,}: nothing to train")
        _evaluate(run, state, logged=not _evaluation_logged(run.output, result.steps))
    elif not result.evaluations or result.evaluations[-1]["step"] != result.steps:
        _evaluate(run, state)


def _save(run: _Run, state: _LoopState) -> Path:
    """Save a resumable checkpoint of the run at its step (:func:`~tokenmask.train.runs.save_run_state`);
    returns its folder. Every process calls it (the random and data states are gathered); the main one writes."""
    result = state.result
    state.saved_at = result.steps
    rng = gathered_rng_states(run.accelerator)  # collectives: every process takes part
    data = gathered(run.accelerator, run.job.position.state()) if run.job.position is not None else None
    if run.shard.is_main:
        save_run_state(
            run.output, run.model, run.job.tokenizer, run.optimizer, run.schedule, result, rng,
            data=data, scaler=run.accelerator.scaler, keep=run.config.keep_last, report=run.reporter.message,
        )  # fmt: skip
    return run.output / CHECKPOINTS / f"step-{result.steps}"


def _finish(run: _Run, state: _LoopState) -> TrainResult:
    """The run's result, its model saved to OUTPUT/model (the training state stays in checkpoints/ only)
    and its metrics plotted."""
    result = state.result
    result.seconds = time.perf_counter() - state.start
    result.model = run.model
    if run.shard.is_main:
        save_model(run.output / "model", run.model, run.job.tokenizer, card=run.job.card(result))
        plot_metrics(read_metrics(run.output), run.output / PLOT_FILE)
    run.accelerator.wait_for_everyone()
    return result


def _late_signal_checkpoint(run: _Run, state: _LoopState) -> Path:
    """The checkpoint a stop signal that came after the last step's check names (it came during the
    final evaluation, or the run was at its limit): the run's state at its last step, saved once.

    A run resumed at its limit trained nothing: the checkpoint it resumed from is this step's. A
    periodic save at the last step has written it already. Else it is saved now (every process calls this).
    """
    if run.resumed_from is not None and state.result.steps == run.first_step:
        return run.resumed_from
    if state.saved_at == state.result.steps:
        return run.output / CHECKPOINTS / f"step-{state.result.steps}"
    return _save(run, state)


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


def _horizon(schedule: Schedule) -> int | None:
    """The schedule's horizon once fitted (:data:`~tokenmask.train.job.Horizon`), else None."""
    return schedule.horizon if schedule.fitted else None


def _evaluation_logged(output: Path, step: int) -> bool:
    return any(r.get("step") == step and any(k.startswith("eval_") for k in r) for r in read_metrics(output))


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None
