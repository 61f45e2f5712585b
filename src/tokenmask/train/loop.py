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
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch

from tokenmask.data.collator import MaskingCollator
from tokenmask.data.corpus import read_texts
from tokenmask.data.pretrain import build_blocks
from tokenmask.data.resources import shakespeare_scenes
from tokenmask.data.tokenizers import load_tokenizer
from tokenmask.masking.config import IGNORE_INDEX
from tokenmask.train.checkpoint import load_state, save_checkpoint
from tokenmask.train.config import PretrainConfig
from tokenmask.train.evaluate import EVAL_SEED_OFFSET, evaluate_mlm
from tokenmask.train.heads import masked_lm_loss
from tokenmask.train.models import build_model, load_model


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


def corpus_texts(corpus: tuple[str, ...]) -> list[str]:
    """The documents: the given corpus (one per paragraph) or the bundled plays (one per scene)."""
    if corpus:
        return list(read_texts(corpus, unit="paragraph"))
    return shakespeare_scenes()


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
    """Warm-up then linear or cosine decay over ``horizon`` steps (set later for time limits)."""

    def __init__(self, config: PretrainConfig, horizon: int | None) -> None:
        self.config, self.horizon = config, horizon

    def __call__(self, step: int) -> float:
        horizon = self.horizon or 10**9
        warmup = max(1, int(self.config.warmup * horizon)) if self.horizon else 100
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(1, horizon - warmup))
        if self.config.schedule == "cosine":
            return 0.5 * (1 + math.cos(math.pi * progress))
        return max(0.0, 1.0 - progress)


def backward_step(model: torch.nn.Module, micro_batches: list[dict[str, torch.Tensor]]) -> tuple[float, int]:
    """Backward pass of one optimizer step over its micro-batches; gradients accumulate.

    Each micro-batch's token-loss sum is divided by the number of targets in the whole step,
    so the gradient equals that of one batch holding all of them. Returns the step's mean
    loss per target (0.0 without targets, which adds no gradient) and its real tokens.
    """
    step_targets = sum(int((b["labels"] != IGNORE_INDEX).sum()) for b in micro_batches)
    loss_sum, tokens = 0.0, 0
    for batch in micro_batches:
        out = masked_lm_loss(model, batch)
        if step_targets:
            (out.loss_sum / step_targets).backward()
        loss_sum += float(out.loss_sum.detach())
        tokens += int(batch["attention_mask"].sum())
    return loss_sum / max(step_targets, 1), tokens


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
        "torch_rng": torch.get_rng_state(),
    }
    save_checkpoint(output / "checkpoints" / f"step-{result.steps}", model, tokenizer, state)
    found = sorted((output / "checkpoints").glob("step-*"), key=lambda p: int(p.name.split("-")[1]))
    for old in found[:-keep]:
        shutil.rmtree(old, ignore_errors=True)


def pretrain(config: PretrainConfig, reporter: Reporter = QuietReporter()) -> PretrainResult:
    """Train a masked-LM on ``config``; the model ends in ``config.output``/model.

    With ``config.resume``, continue from the newest checkpoint: same model, optimizer,
    schedule, data order, masks and dropout state as the uninterrupted run would have had.

    Raises:
        ValueError: bad corpus, tokenizer, model or output settings.
    """
    output = Path(config.output)
    _check_output(output, config)
    torch.manual_seed(config.seed)
    tokenizer = load_tokenizer(config.tokenizer)
    blocks = build_blocks(corpus_texts(config.corpus), tokenizer, block_length=config.max_length, validation_share=config.validation_share)
    reporter.message(blocks.describe())
    checkpoint = latest_checkpoint(output) if config.resume else None
    if checkpoint is not None or config.init:
        model = load_model(checkpoint or config.init, vocab_size=len(tokenizer), max_length=config.max_length)
        model.train()
    else:
        model = build_model(config.preset, vocab_size=len(tokenizer), max_length=config.max_length, pad_token_id=tokenizer.pad_token_id)
    reporter.message(f"model: {sum(p.numel() for p in model.parameters()):,} parameters")
    collator = MaskingCollator(tokenizer, seed=config.seed, **config.masking)
    eval_collator = MaskingCollator(tokenizer, seed=config.seed + EVAL_SEED_OFFSET, **config.masking)
    evaluation_blocks = (blocks.validation or blocks.train)[: config.eval_blocks]
    optimizer = _optimizer(model, config)
    schedule = _Schedule(config, config.max_steps)
    result = PretrainResult(steps=0, tokens=0, seconds=0.0, output=str(output))
    if checkpoint is not None:
        state = load_state(checkpoint)
        optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
        schedule.horizon = state["horizon"] or schedule.horizon
        result.steps, result.tokens = int(state["step"]), int(state["tokens"])
        reporter.message(f"resuming from {checkpoint} (step {result.steps})")
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule, last_epoch=result.steps - 1)

    output.mkdir(parents=True, exist_ok=True)
    (output / "run_config.json").write_text(json.dumps(asdict(config), indent=2), encoding="utf-8")
    metrics_file = (output / "metrics.jsonl").open("a" if checkpoint else "w", encoding="utf-8")

    def log(record: dict[str, Any]) -> None:
        metrics_file.write(json.dumps(record) + "\n")
        metrics_file.flush()

    evaluation_seconds = ten_steps_in = 0.0

    def evaluate() -> None:
        nonlocal evaluation_seconds
        began = time.perf_counter()
        metrics = evaluate_mlm(model, evaluation_blocks, eval_collator, batch_size=config.batch_size)
        evaluation_seconds += time.perf_counter() - began
        record = {"step": result.steps, "tokens": result.tokens, **{f"eval_{k}": v for k, v in metrics.as_dict().items()}}
        result.evaluations.append(record)
        log(record)
        reporter.message(
            f"step {result.steps}: eval loss {metrics.loss:.3f}, perplexity {metrics.perplexity:.1f}, accuracy {metrics.accuracy:.3f}"
        )

    batches = _batches(blocks.train, collator, config, skip=result.steps * config.grad_accum)
    start = time.perf_counter()
    try:
        if checkpoint is None:
            evaluate()
        while config.max_steps is None or result.steps < config.max_steps:
            loss, tokens = backward_step(model, [next(batches) for _ in range(config.grad_accum)])
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            result.steps += 1
            result.tokens += tokens
            elapsed = time.perf_counter() - start
            log({"step": result.steps, "tokens": result.tokens, "loss": loss, "lr": scheduler.get_last_lr()[0], "seconds": elapsed})
            if config.max_time is not None and schedule.horizon is None:
                # the steps that fit in the time, from the training time of steps 11-20 (the first
                # ones are slower), with 5% to spare for evaluations; fixed once, so resumable
                if result.steps == 10:
                    ten_steps_in = elapsed - evaluation_seconds
                elif result.steps == 20:
                    per_step = (elapsed - evaluation_seconds - ten_steps_in) / 10
                    schedule.horizon = max(21, int(0.95 * config.max_time * 60 / per_step))
            if result.steps % config.eval_every == 0:
                evaluate()
            if result.steps % config.save_every == 0:
                _save(output, model, tokenizer, optimizer, schedule, result)
            reporter.step(result.steps, config.max_steps or schedule.horizon, loss, result.tokens / elapsed)
            if config.max_time is not None and elapsed > config.max_time * 60:
                break
        if not result.evaluations or result.evaluations[-1]["step"] != result.steps:
            evaluate()
    finally:
        metrics_file.close()
    result.seconds = time.perf_counter() - start
    save_checkpoint(output / "model", model, tokenizer, {"step": result.steps, "tokens": result.tokens})
    result.model = model
    return result
