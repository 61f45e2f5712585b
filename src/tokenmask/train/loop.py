"""The pre-training loop, written out: batch -> forward -> backward -> step -> every N: eval / log / save.

Loss normalisation: an optimizer step's loss is the sum of token losses over all its
micro-batches divided by the number of targets in the whole step, so gradient accumulation
gives the same update as one large batch; a step without targets contributes zero.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch
from accelerate import Accelerator
from accelerate.state import AcceleratorState
from transformers import PreTrainedTokenizerBase

from tokenmask.data.collator import MaskingCollator
from tokenmask.data.corpus import read_texts
from tokenmask.data.pretrain import PretrainBlocks, build_blocks, corpus_blocks
from tokenmask.data.resources import shakespeare_scenes
from tokenmask.data.tokenizers import load_tokenizer
from tokenmask.masking.config import IGNORE_INDEX
from tokenmask.train.checkpoint import load_state, save_checkpoint
from tokenmask.train.config import PretrainConfig
from tokenmask.train.evaluate import EVAL_SEED_OFFSET, evaluate_mlm
from tokenmask.train.heads import masked_lm_loss
from tokenmask.train.logs import PLOT_FILE, RunLog, plot_metrics, read_metrics
from tokenmask.train.models import build_model, load_model_with_notes


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
class PretrainResult:
    """What a run did: steps, tokens seen, time, evaluations, where the model is."""

    steps: int
    tokens: int
    seconds: float
    evaluations: list[dict[str, Any]] = field(default_factory=list)
    output: str = ""
    model: Any = None


def corpus_texts(config: PretrainConfig) -> Iterable[str]:
    """The documents, streamed: the given corpus or the bundled plays (one per scene)."""
    if config.corpus:
        return read_texts(config.corpus, unit=config.document_unit, text_field=config.text_field)
    return shakespeare_scenes()


def load_blocks(config: PretrainConfig, tokenizer: PreTrainedTokenizerBase) -> PretrainBlocks:
    """The run's training and validation blocks, from the block cache when it holds them."""
    settings = dict(
        block_length=config.max_length,
        validation_share=config.validation_share,
        cache_dir=config.cache_dir,
        use_cache=not config.no_cache,
    )
    if config.corpus:
        return corpus_blocks(config.corpus, tokenizer, unit=config.document_unit, text_field=config.text_field, **settings)
    return build_blocks(shakespeare_scenes(), tokenizer, **settings)


def _batches(blocks: list[dict[str, Any]], collator: MaskingCollator, config: PretrainConfig, *, skip: int = 0) -> Iterator[dict]:
    """Micro-batches forever: a new seeded order each epoch, and new masks (dynamic masking) or
    the masks of ``epoch % dupe_factor`` (static masking).

    ``skip`` micro-batches are passed over without collating them (resuming): the order and
    the masks are functions of (seed, epoch, block), so the rest is what an uninterrupted run sees.
    """
    per_epoch = len(blocks) // config.batch_size
    if per_epoch == 0:
        raise ValueError(f"{len(blocks)} training blocks do not fill one batch of {config.batch_size}")
    epoch, offset = divmod(skip, per_epoch)
    while True:
        collator.set_epoch(epoch % config.dupe_factor if config.dupe_factor else epoch)  # static / dynamic
        order = torch.randperm(len(blocks), generator=torch.Generator().manual_seed(config.seed * 1000 + epoch))
        for index in range(offset, per_epoch):
            chosen = order[index * config.batch_size : (index + 1) * config.batch_size].tolist()
            yield collator([blocks[i] for i in chosen])
        epoch, offset = epoch + 1, 0


def _optimizer(model: torch.nn.Module, config: PretrainConfig) -> torch.optim.Optimizer:
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        (no_decay if parameter.ndim < 2 or "norm" in name.lower() else decay).append(parameter)
    groups = [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=config.lr, betas=(0.9, 0.98), eps=1e-6)


class _Schedule:
    """Warm-up then linear or cosine decay over ``horizon`` steps.

    ``horizon`` starts as ``max_steps`` (or unknown); with a token or time limit it is fitted
    once early in the run (``fitted`` turns True) and saved with checkpoints.
    """

    def __init__(self, config: PretrainConfig) -> None:
        self.config, self.horizon = config, config.max_steps
        self.fitted = config.max_tokens is None and config.max_time is None

    def __call__(self, step: int) -> float:
        horizon = self.horizon or 10**9
        warmup = max(1, int(self.config.warmup * horizon)) if self.horizon else 100
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(1, horizon - warmup))
        if self.config.schedule == "cosine":
            return 0.5 * (1 + math.cos(math.pi * progress))
        return max(0.0, 1.0 - progress)


def backward_step(
    model: torch.nn.Module,
    micro_batches: list[dict[str, torch.Tensor]],
    *,
    accelerator: Accelerator | None = None,
) -> tuple[float, int]:
    """Backward pass of one optimizer step over its micro-batches; gradients accumulate.

    Each micro-batch's token-loss sum is divided by the number of targets in the whole step,
    so the gradient equals that of one batch holding all of them. Returns the step's mean
    loss per target (0.0 without targets, which adds no gradient) and its real tokens.
    With an ``accelerator``, batches move to its device and the forward pass runs under its
    autocast (bf16 when enabled).
    """
    step_targets = sum(int((b["labels"] != IGNORE_INDEX).sum()) for b in micro_batches)
    loss_sum, tokens = 0.0, 0
    for batch in micro_batches:
        if accelerator is None:
            out = masked_lm_loss(model, batch)
        else:
            batch = {k: v.to(accelerator.device) for k, v in batch.items() if isinstance(v, torch.Tensor)}
            with accelerator.autocast():
                out = masked_lm_loss(model, batch)
        if step_targets:
            scaled = out.loss_sum / step_targets
            scaled.backward() if accelerator is None else accelerator.backward(scaled)
        loss_sum += float(out.loss_sum.detach())
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


def make_accelerator(config: PretrainConfig) -> Accelerator:
    """An Accelerator for this run (one per run: the process-wide state is reset first)."""
    AcceleratorState._reset_state()
    device = torch.device("cuda") if torch.cuda.is_available() and not config.cpu else torch.device("cpu")
    precision = resolve_precision(config.precision, device)
    return Accelerator(cpu=config.cpu, mixed_precision="bf16" if precision == "bf16" else "no")


def fitted_horizon(config: PretrainConfig, steps: int, tokens: int, seconds_per_step: float | None) -> int:
    """Optimizer steps the learning-rate schedule spans: the first limit the run will reach.

    Args:
        steps, tokens: done so far (tokens per step from their ratio, for ``max_tokens``).
        seconds_per_step: measured pace, for ``max_time`` (5% is left for evaluations).
    """
    limits = [config.max_steps] if config.max_steps is not None else []
    if config.max_tokens is not None and steps:
        limits.append(math.ceil(config.max_tokens * steps / max(tokens, 1)))
    if config.max_time is not None and seconds_per_step:
        limits.append(max(steps + 1, int(0.95 * config.max_time * 60 / seconds_per_step)))
    return max(1, min(limits))


def masking_rate(config: PretrainConfig, step: int, horizon: int | None) -> float:
    """The selection rate at ``step``: constant, or linear from the start rate to ``mlm_probability_end``."""
    start = float(config.masking.get("mlm_probability", 0.15))
    if config.mlm_probability_end is None or not horizon:
        return start
    return start + (config.mlm_probability_end - start) * min(1.0, step / horizon)


def _check_output(output: Path, config: PretrainConfig) -> None:
    """Refuse to mix two runs in one folder."""
    holds_run = (output / "run_config.json").exists()
    if holds_run and not (config.resume or config.overwrite):
        raise ValueError(f"{output} already holds a run: pass --resume to continue it, or --overwrite")
    if config.resume and not holds_run:
        raise ValueError(f"--resume: {output} holds no run to resume")
    if config.overwrite and holds_run and not config.resume:
        for stale in ("checkpoints", "model"):
            shutil.rmtree(output / stale, ignore_errors=True)


def latest_checkpoint(output: Path) -> Path | None:
    """The newest complete checkpoint of a run (partial ones never carry the final name)."""
    found = sorted((output / "checkpoints").glob("step-*"), key=lambda p: int(p.name.split("-")[1]))
    return found[-1] if found else None


def _save(output: Path, model, tokenizer, optimizer, schedule: _Schedule, result: PretrainResult, keep: int = 2) -> None:
    state = {
        "step": result.steps,
        "tokens": result.tokens,
        "optimizer": optimizer.state_dict(),
        "horizon": schedule.horizon or 0,
        "horizon_fitted": schedule.fitted,
        "torch_rng": torch.get_rng_state(),
    }
    save_checkpoint(output / "checkpoints" / f"step-{result.steps}", model, tokenizer, state)
    found = sorted((output / "checkpoints").glob("step-*"), key=lambda p: int(p.name.split("-")[1]))
    for old in found[:-keep]:
        shutil.rmtree(old, ignore_errors=True)


@dataclass
class _Run:
    """Everything a run works with, built by :func:`_prepare`."""

    accelerator: Accelerator
    tokenizer: Any
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    schedule: _Schedule
    collator: MaskingCollator
    train_blocks: Any
    evaluation_blocks: Any
    eval_collator: MaskingCollator
    checkpoint: Path | None


def _prepare(config: PretrainConfig, reporter: Reporter) -> _Run:
    """Data, model, optimizer and collators of a run (restored from the newest checkpoint when resuming)."""
    accelerator = make_accelerator(config)
    torch.manual_seed(config.seed)
    tokenizer = load_tokenizer(config.tokenizer)
    blocks = load_blocks(config, tokenizer)
    reporter.message(blocks.describe())
    checkpoint = latest_checkpoint(Path(config.output)) if config.resume else None
    if checkpoint is not None or config.init:
        loaded = load_model_with_notes(checkpoint or config.init, vocab_size=len(tokenizer), max_length=config.max_length)
        model = loaded.model.train()
        for note in loaded.notes:
            reporter.message(note)
    else:
        model = build_model(config.preset, vocab_size=len(tokenizer), max_length=config.max_length, pad_token_id=tokenizer.pad_token_id)
    precision = "bf16 autocast" if accelerator.mixed_precision == "bf16" else "fp32"
    reporter.message(f"model: {sum(p.numel() for p in model.parameters()):,} parameters, {accelerator.device}, {precision}")
    optimizer = _optimizer(model, config)
    model, optimizer = accelerator.prepare(model, optimizer)
    eval_masking = {**config.masking, "mlm_probability": config.eval_mlm_probability}
    return _Run(
        accelerator=accelerator,
        tokenizer=tokenizer,
        model=model,
        optimizer=optimizer,
        schedule=_Schedule(config),
        collator=MaskingCollator(tokenizer, seed=config.seed, **config.masking),
        train_blocks=blocks.train,
        evaluation_blocks=(blocks.validation or blocks.train)[: config.eval_blocks],
        eval_collator=MaskingCollator(tokenizer, seed=config.seed + EVAL_SEED_OFFSET, **eval_masking),
        checkpoint=checkpoint,
    )


def pretrain(config: PretrainConfig, reporter: Reporter = QuietReporter()) -> PretrainResult:
    """Train a masked-LM on ``config``; the model ends in ``config.output``/model.

    The run stops at the first of ``max_steps``, ``max_tokens`` and ``max_time``; the
    learning-rate schedule (and a masking-rate schedule) spans that limit. With
    ``config.resume``, continue from the newest checkpoint: same model, optimizer, schedule,
    data order, masks and dropout state as the uninterrupted run would have had.

    Raises:
        ValueError: bad corpus, tokenizer, model or output settings.
    """
    output = Path(config.output)
    _check_output(output, config)
    run = _prepare(config, reporter)
    model, optimizer, schedule, accelerator = run.model, run.optimizer, run.schedule, run.accelerator
    result = PretrainResult(steps=0, tokens=0, seconds=0.0, output=str(output))
    if run.checkpoint is not None:
        state = load_state(run.checkpoint)
        optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
        schedule.horizon = state["horizon"] or schedule.horizon
        schedule.fitted = bool(state.get("horizon_fitted", True))
        result.steps, result.tokens = int(state["step"]), int(state["tokens"])
        reporter.message(f"resuming from {run.checkpoint} (step {result.steps})")
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule, last_epoch=result.steps - 1)
    output.mkdir(parents=True, exist_ok=True)
    (output / "run_config.json").write_text(json.dumps(asdict(config), indent=2), encoding="utf-8")
    log = RunLog(output, append=run.checkpoint is not None)
    evaluation_seconds = ten_steps_in = 0.0

    def evaluate() -> None:
        nonlocal evaluation_seconds
        began = time.perf_counter()
        metrics = evaluate_mlm(model, run.evaluation_blocks, run.eval_collator, batch_size=config.batch_size, device=accelerator.device)
        evaluation_seconds += time.perf_counter() - began
        record = {"step": result.steps, "tokens": result.tokens, **{f"eval_{k}": v for k, v in metrics.as_dict().items()}}
        result.evaluations.append(record)
        log.write(record)
        reporter.message(
            f"step {result.steps}: eval loss {metrics.loss:.3f}, perplexity {metrics.perplexity:.1f}, accuracy {metrics.accuracy:.3f}"
        )

    batches = _batches(run.train_blocks, run.collator, config, skip=result.steps * config.grad_accum)
    start = time.perf_counter()
    try:
        if run.checkpoint is None:
            evaluate()
        while True:
            run.collator.set_mlm_probability(masking_rate(config, result.steps, schedule.horizon if schedule.fitted else None))
            fetching = time.perf_counter()
            micro_batches = [next(batches) for _ in range(config.grad_accum)]  # collate + mask
            data_seconds = time.perf_counter() - fetching
            targets = sum(int((b["labels"] != IGNORE_INDEX).sum()) for b in micro_batches)
            loss, tokens = backward_step(model, micro_batches, accelerator=accelerator)
            accelerator.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            result.steps += 1
            result.tokens += tokens
            elapsed = time.perf_counter() - start
            log.write({
                "step": result.steps, "tokens": result.tokens, "loss": loss, "lr": scheduler.get_last_lr()[0],
                "targets": targets, "mlm_probability": run.collator.selection.mlm_probability,
                "seconds": elapsed, "data_seconds": data_seconds,
            })  # fmt: skip
            if not schedule.fitted:
                # fixed once (so resumable): from the tokens of step 1, or for a time limit from
                # the pace of steps 11-20 (the first ones are slower)
                if result.steps == 10:
                    ten_steps_in = elapsed - evaluation_seconds
                if config.max_time is None or result.steps == 20:
                    pace = (elapsed - evaluation_seconds - ten_steps_in) / 10 if config.max_time is not None else None
                    schedule.horizon, schedule.fitted = fitted_horizon(config, result.steps, result.tokens, pace), True
            if result.steps % config.eval_every == 0:
                evaluate()
            if result.steps % config.save_every == 0:
                _save(output, accelerator.unwrap_model(model), run.tokenizer, optimizer, schedule, result)
            reporter.step(result.steps, schedule.horizon, loss, result.tokens / elapsed)
            if _limit_reached(config, result, elapsed):
                break
        if not result.evaluations or result.evaluations[-1]["step"] != result.steps:
            evaluate()
    finally:
        log.close()
    result.seconds = time.perf_counter() - start
    result.model = accelerator.unwrap_model(model)
    save_checkpoint(output / "model", result.model, run.tokenizer, {"step": result.steps, "tokens": result.tokens})
    plot_metrics(read_metrics(output), output / PLOT_FILE)
    return result


def _limit_reached(config: PretrainConfig, result: PretrainResult, elapsed: float) -> bool:
    return (
        (config.max_steps is not None and result.steps >= config.max_steps)
        or (config.max_tokens is not None and result.tokens >= config.max_tokens)
        or (config.max_time is not None and elapsed > config.max_time * 60)
    )
