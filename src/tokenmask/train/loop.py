"""The training loop, written out once: batch -> forward -> backward -> step -> every N: eval / log / save.

Pre-training and fine-tuning share it; they differ in the :class:`Job` they hand it (model,
batches, loss, evaluation), not in copied loops. Loss normalisation: an optimizer step's loss
is the sum of losses over all its micro-batches divided by the number of targets in the whole
step, so gradient accumulation gives the same update as one large batch; a step without
targets contributes zero.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch
from accelerate import Accelerator
from accelerate.state import AcceleratorState

from tokenmask.masking.config import IGNORE_INDEX
from tokenmask.train.checkpoint import load_state, save_checkpoint
from tokenmask.train.heads import masked_lm_loss
from tokenmask.train.logs import PLOT_FILE, RunLog, plot_metrics, read_metrics
from tokenmask.train.runs import check_output, resume_checkpoint, save_resumable

LossFunction = Callable[[torch.nn.Module, dict[str, torch.Tensor]], torch.Tensor]
"""``(model, batch) -> summed loss`` (a 0-d tensor with grad) over the batch's targets."""


class LoopSettings(Protocol):
    """The settings the loop reads (fields of ``PretrainConfig`` and the fine-tuning config)."""

    output: str
    seed: int
    batch_size: int
    grad_accum: int
    lr: float
    weight_decay: float
    warmup: float
    schedule: str
    max_steps: int | None
    max_tokens: int | None
    max_time: float | None
    eval_every: int
    save_every: int
    keep_last: int
    resume: bool
    overwrite: bool
    precision: str
    cpu: bool


class Reporter(Protocol):
    """Where the loop reports; :class:`QuietReporter` does nothing."""

    def message(self, text: str) -> None: ...

    def step(self, step: int, total: int | None, loss: float, tokens_per_s: float) -> None: ...


class QuietReporter:
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


@dataclass
class Job:
    """What the loop trains, built by a recipe (``pretrain``, ``finetune``).

    Attributes:
        model: the model, in training mode, not yet prepared by Accelerate.
        tokenizer: saved with every checkpoint.
        batches: ``skip -> micro-batches forever``; ``skip`` are passed over (resuming), so
            the rest is what an uninterrupted run sees.
        evaluate: ``model -> metrics`` (plain numbers; ``loss`` first), at fixed inputs.
        loss: ``(model, batch) -> summed loss`` over the batch's targets.
        before_step: ``(step, horizon or None) -> fields to log``, called before each
            optimizer step (e.g. a masking-rate schedule); by default nothing.
    """

    model: torch.nn.Module
    tokenizer: Any
    batches: Callable[[int], Iterator[dict[str, Any]]]
    evaluate: Callable[[torch.nn.Module], dict[str, float]]
    loss: LossFunction
    before_step: Callable[[int, int | None], dict[str, Any]] = lambda step, horizon: {}


def mlm_loss_sum(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The masked-LM loss summed over a batch's targets, with the sparse head."""
    return masked_lm_loss(model, batch).loss_sum


def count_targets(micro_batches: list[dict[str, torch.Tensor]]) -> int:
    """Labels other than -100 in the micro-batches: masked tokens, labelled tokens or examples."""
    return sum(int((b["labels"] != IGNORE_INDEX).sum()) for b in micro_batches)


def epoch_batches(
    examples: Sequence[dict[str, Any]],
    collator: Any,
    *,
    batch_size: int,
    seed: int,
    dupe_factor: int | None = None,
    skip: int = 0,
) -> Iterator[dict[str, Any]]:
    """Micro-batches forever: a new seeded order each epoch, and new masks (dynamic masking) or
    the masks of ``epoch % dupe_factor`` (static masking).

    ``skip`` micro-batches are passed over without collating them (resuming): the order and
    the masks are functions of (seed, epoch, example), so the rest is what an uninterrupted
    run sees. ``collator`` needs ``set_epoch`` (e.g. :class:`~tokenmask.data.collator.MaskingCollator`).

    Raises:
        ValueError: fewer examples than one batch.
    """
    per_epoch = len(examples) // batch_size
    if per_epoch == 0:
        raise ValueError(f"{len(examples)} training examples do not fill one batch of {batch_size}")
    epoch, offset = divmod(skip, per_epoch)
    while True:
        collator.set_epoch(epoch % dupe_factor if dupe_factor else epoch)  # static / dynamic
        order = torch.randperm(len(examples), generator=torch.Generator().manual_seed(seed * 1000 + epoch))
        for index in range(offset, per_epoch):
            chosen = order[index * batch_size : (index + 1) * batch_size].tolist()
            yield collator([examples[i] for i in chosen])
        epoch, offset = epoch + 1, 0


def _optimizer(model: torch.nn.Module, config: LoopSettings) -> torch.optim.Optimizer:
    """AdamW without weight decay on biases and norms; the fused kernel (as the HF Trainer
    uses since torch 2.8) where the parameters' device has it."""
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        (no_decay if parameter.ndim < 2 or "norm" in name.lower() else decay).append(parameter)
    groups = [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    fused = all(p.device.type in ("cpu", "cuda") and p.is_floating_point() for p in model.parameters())
    return torch.optim.AdamW(groups, lr=config.lr, betas=(0.9, 0.98), eps=1e-6, fused=fused)


class _Schedule:
    """Warm-up then linear or cosine decay over ``horizon`` optimizer steps.

    With only ``max_steps``, the horizon is known from the start. With a token or time limit
    it is unknown until :meth:`fit` (a 100-step provisional warm-up runs meanwhile); the first
    fit fixes the warm-up length and continues the ramp from where it is, so the learning rate
    never jumps; later fits (time limits: at each evaluation) move only the decay's end.
    Everything needed to continue is in :meth:`state`.
    """

    def __init__(self, config: LoopSettings) -> None:
        self.config, self.horizon = config, config.max_steps
        self.fitted = config.max_tokens is None and config.max_time is None
        self.warmup_steps = max(1, int(config.warmup * self.horizon)) if self.fitted and self.horizon else None
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
        self.horizon = state["horizon"] or self.horizon
        self.fitted = bool(state.get("horizon_fitted", True))
        self.warmup_steps = state.get("warmup_steps") or self.warmup_steps
        self.ramp_start = tuple(state.get("ramp_start", (0, 0.0)))

    def __call__(self, step: int) -> float:
        warmup = self.warmup_steps or 100
        if step < warmup:
            first, level = self.ramp_start
            return level + (1 - level) * (step + 1 - first) / max(1, warmup - first)
        horizon = self.horizon or 10**9
        progress = min(1.0, (step - warmup) / max(1, horizon - warmup))
        if self.config.schedule == "cosine":
            return 0.5 * (1 + math.cos(math.pi * progress))
        return max(0.0, 1.0 - progress)


class _Pace:
    """Fits the schedule's horizon to the run's limits as the pace becomes known.

    Token limit: after step 1. Time limit: at step 20 from the training time of steps 11-20
    (the first ones are slower), 5% spared for evaluations; then again after every evaluation
    from the wall-clock pace since the previous fit, so the decay ends when the time does.
    """

    def __init__(self, config: LoopSettings, steps: int) -> None:
        self.config = config
        self.ten_steps_in = 0.0
        self.mark = (steps, 0.0)  # (steps, elapsed) at the last fit

    def after_step(self, schedule: _Schedule, steps: int, tokens: int, elapsed: float, training: float) -> None:
        if schedule.fitted:
            return
        if steps == 10:
            self.ten_steps_in = training
        if self.config.max_time is None:
            schedule.fit(fitted_horizon(self.config, steps, tokens), steps)
        elif steps == 20:
            pace = (training - self.ten_steps_in) / 10 / 0.95
            schedule.fit(fitted_horizon(self.config, steps, tokens, pace, self.config.max_time * 60 - elapsed), steps)
            self.mark = (steps, elapsed)

    def after_evaluation(self, schedule: _Schedule, steps: int, tokens: int, elapsed: float) -> None:
        if self.config.max_time is None or not schedule.fitted or steps <= self.mark[0]:
            return
        pace = (elapsed - self.mark[1]) / (steps - self.mark[0])
        schedule.fit(fitted_horizon(self.config, steps, tokens, pace, self.config.max_time * 60 - elapsed), steps)
        self.mark = (steps, elapsed)


def backward_step(
    model: torch.nn.Module,
    micro_batches: list[dict[str, torch.Tensor]],
    *,
    loss: LossFunction | None = None,
    accelerator: Accelerator | None = None,
    step_targets: int | None = None,
) -> tuple[float, int]:
    """Backward pass of one optimizer step over its micro-batches; gradients accumulate.

    Each micro-batch's loss sum is divided by the number of targets (labels other than -100:
    masked tokens, labelled tokens, or examples) in the whole step, so the gradient equals that
    of one batch holding all of them. ``loss`` gives a batch's summed loss (default: the MLM
    loss with the sparse head). Returns the step's mean
    loss per target (0.0 without targets, which adds no gradient) and its real tokens.
    With an ``accelerator``, batches move to its device and the forward pass runs under its
    autocast (bf16 when enabled). ``step_targets``: the step's target count when the caller has it.
    """
    loss = loss or mlm_loss_sum
    step_targets = count_targets(micro_batches) if step_targets is None else step_targets
    loss_sum, tokens = 0.0, 0
    for batch in micro_batches:
        if accelerator is None:
            summed = loss(model, batch)
        else:
            batch = {k: v.to(accelerator.device) for k, v in batch.items() if isinstance(v, torch.Tensor)}
            with accelerator.autocast():
                summed = loss(model, batch)
        if step_targets:
            scaled = summed / step_targets
            scaled.backward() if accelerator is None else accelerator.backward(scaled)
        loss_sum += float(summed.detach())
        tokens += int(batch["attention_mask"].sum())
    return loss_sum / max(step_targets, 1), tokens


def resolve_precision(precision: str, device: torch.device) -> str:
    """'auto' -> 'bf16' where the hardware computes in bf16 natively, else 'fp32'.

    On CPUs without AMX or AVX512-BF16, bf16 autocast is emulated and slower than fp32.
    """
    if precision != "auto":
        return precision
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp32"
    if device.type == "cpu":
        native = torch.cpu._is_amx_tile_supported() or torch.cpu._is_avx512_bf16_supported()
        return "bf16" if native else "fp32"
    return "fp32"


def make_accelerator(config: LoopSettings) -> Accelerator:
    """An Accelerator for this run (one per run: the process-wide state is reset first)."""
    AcceleratorState._reset_state()
    device = torch.device("cuda") if torch.cuda.is_available() and not config.cpu else torch.device("cpu")
    precision = resolve_precision(config.precision, device)
    return Accelerator(cpu=config.cpu, mixed_precision="bf16" if precision == "bf16" else "no")


def fitted_horizon(
    config: LoopSettings,
    steps: int,
    tokens: int,
    seconds_per_step: float | None = None,
    seconds_left: float | None = None,
) -> int:
    """Optimizer steps the learning-rate schedule spans: the first limit the run will reach.

    Args:
        steps, tokens: done so far (tokens per step from their ratio, for ``max_tokens``).
        seconds_per_step, seconds_left: pace and time left, for ``max_time``.

    ``max_steps=1000, max_time=5`` at 0.5 s per step with 240 s left after 50 steps -> 530.
    """
    limits = [config.max_steps] if config.max_steps is not None else []
    if config.max_tokens is not None and steps:
        limits.append(math.ceil(config.max_tokens * steps / max(tokens, 1)))
    if config.max_time is not None and seconds_per_step and seconds_left is not None:
        limits.append(steps + max(1, int(seconds_left / seconds_per_step)))
    return max(1, min(limits))


def _save(
    output: Path, model, tokenizer, optimizer, schedule: _Schedule, result: TrainResult, *, keep: int = 2,
    report: Callable[[str], None] = lambda text: None,
) -> None:
    """A resumable checkpoint of the run at ``result.steps`` (:func:`~tokenmask.train.runs.save_resumable`)."""
    state = {
        "step": result.steps,
        "tokens": result.tokens,
        "optimizer": optimizer.state_dict(),
        **schedule.state(),
        "torch_rng": torch.get_rng_state(),
    }
    save_resumable(output, model, tokenizer, state, keep_last=keep, report=report)


def train(config: LoopSettings, build: Callable[[Path | None], Job], reporter: Reporter = QuietReporter()) -> TrainResult:
    """Run the loop on the :class:`Job` that ``build(checkpoint)`` makes; the model ends in OUTPUT/model.

    The run stops at the first of ``max_steps``, ``max_tokens`` and ``max_time``; the
    learning-rate schedule spans that limit. With ``config.resume``, ``build`` gets the newest
    valid checkpoint (to load the model from; None when there is none yet, and the run starts
    from the beginning: :func:`~tokenmask.train.runs.resume_checkpoint`) and the loop restores
    the optimizer, schedule, data position and dropout state, so the run continues as if never
    interrupted.

    Raises:
        ValueError: bad settings or an output folder that holds another run.
    """
    output = Path(config.output)
    check_output(output, config)
    accelerator = make_accelerator(config)
    torch.manual_seed(config.seed)
    checkpoint = resume_checkpoint(output, reporter.message) if config.resume else None
    job = build(checkpoint)
    precision = "bf16 autocast" if accelerator.mixed_precision == "bf16" else "fp32"
    reporter.message(f"model: {sum(p.numel() for p in job.model.parameters()):,} parameters, {accelerator.device}, {precision}")
    model, optimizer = accelerator.prepare(job.model, _optimizer(job.model, config))
    schedule = _Schedule(config)
    result = TrainResult(steps=0, tokens=0, seconds=0.0, output=str(output))
    if checkpoint is not None:
        state = load_state(checkpoint)
        optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
        schedule.load(state)
        result.steps, result.tokens = int(state["step"]), int(state["tokens"])
        reporter.message(f"resuming from {checkpoint} (step {result.steps})")
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule, last_epoch=result.steps - 1)
    output.mkdir(parents=True, exist_ok=True)
    (output / "run_config.json").write_text(json.dumps(asdict(config), indent=2), encoding="utf-8")
    log = RunLog(output, append=checkpoint is not None)
    evaluation_seconds = 0.0
    pace = _Pace(config, result.steps)

    def evaluate() -> None:
        nonlocal evaluation_seconds
        began = time.perf_counter()
        metrics = job.evaluate(model)
        evaluation_seconds += time.perf_counter() - began
        record = {"step": result.steps, "tokens": result.tokens, **{f"eval_{k}": v for k, v in metrics.items()}}
        result.evaluations.append(record)
        log.write(record)
        shown = ", ".join(f"{k} {v:.3f}" for k, v in metrics.items() if isinstance(v, float))
        reporter.message(f"step {result.steps}: eval {shown}")

    batches = job.batches(result.steps * config.grad_accum)
    start = time.perf_counter()
    try:
        if checkpoint is None:
            evaluate()
        while True:
            extra = job.before_step(result.steps, schedule.horizon if schedule.fitted else None)
            fetching = time.perf_counter()
            micro_batches = [next(batches) for _ in range(config.grad_accum)]  # collate (+ mask)
            data_seconds = time.perf_counter() - fetching
            targets = count_targets(micro_batches)
            loss, tokens = backward_step(model, micro_batches, loss=job.loss, accelerator=accelerator, step_targets=targets)
            accelerator.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            result.steps += 1
            result.tokens += tokens
            elapsed = time.perf_counter() - start
            log.write({
                "step": result.steps, "tokens": result.tokens, "loss": loss, "lr": scheduler.get_last_lr()[0],
                "targets": targets, **extra, "seconds": elapsed, "data_seconds": data_seconds,
            })  # fmt: skip
            pace.after_step(schedule, result.steps, result.tokens, elapsed, elapsed - evaluation_seconds)
            if result.steps % config.eval_every == 0:
                evaluate()
                pace.after_evaluation(schedule, result.steps, result.tokens, time.perf_counter() - start)
            if result.steps % config.save_every == 0:
                _save(output, accelerator.unwrap_model(model), job.tokenizer, optimizer, schedule, result, keep=config.keep_last, report=reporter.message)
            reporter.step(result.steps, schedule.horizon, loss, result.tokens / elapsed)
            if _limit_reached(config, result, elapsed):
                break
        if not result.evaluations or result.evaluations[-1]["step"] != result.steps:
            evaluate()
    finally:
        log.close()
    result.seconds = time.perf_counter() - start
    result.model = accelerator.unwrap_model(model)
    save_checkpoint(output / "model", result.model, job.tokenizer, {"step": result.steps, "tokens": result.tokens})
    plot_metrics(read_metrics(output), output / PLOT_FILE)
    return result


def _limit_reached(config: LoopSettings, result: TrainResult, elapsed: float) -> bool:
    return (
        (config.max_steps is not None and result.steps >= config.max_steps)
        or (config.max_tokens is not None and result.tokens >= config.max_tokens)
        or (config.max_time is not None and elapsed > config.max_time * 60)
    )
