"""The pre-training loop, written out: batch -> forward -> backward -> step -> every N: eval / log / save.

Loss normalisation: an optimizer step's loss is the sum of token losses over all its
micro-batches divided by the number of targets in the whole step, so gradient accumulation
gives the same update as one large batch; a step without targets contributes zero.
"""

from __future__ import annotations

import json
import math
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
from tokenmask.train.checkpoint import save_checkpoint
from tokenmask.train.config import PretrainConfig
from tokenmask.train.evaluate import EVAL_SEED_OFFSET, MlmMetrics, evaluate_mlm
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


def corpus_texts(config: PretrainConfig) -> list[str]:
    """The documents: the given corpus (one per paragraph) or the bundled plays (one per scene)."""
    if config.corpus:
        return list(read_texts(config.corpus, unit="paragraph"))
    return shakespeare_scenes()


def _batches(blocks: list[dict[str, Any]], collator: MaskingCollator, config: PretrainConfig) -> Iterator[dict]:
    """Micro-batches forever: a new seeded order and new masks each epoch."""
    epoch = 0
    while True:
        collator.set_epoch(epoch)
        order = torch.randperm(len(blocks), generator=torch.Generator().manual_seed(config.seed * 1000 + epoch))
        for start in range(0, len(order) - config.batch_size + 1, config.batch_size):
            yield collator([blocks[i] for i in order[start : start + config.batch_size].tolist()])
        epoch += 1


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


def pretrain(config: PretrainConfig, reporter: Reporter = QuietReporter()) -> PretrainResult:
    """Train a masked-LM on ``config``; the model ends in ``config.output``.

    Raises:
        ValueError: bad corpus, tokenizer or model settings.
    """
    torch.manual_seed(config.seed)
    output = Path(config.output)
    tokenizer = load_tokenizer(config.tokenizer)
    blocks = build_blocks(corpus_texts(config), tokenizer, block_length=config.max_length, validation_share=config.validation_share)
    reporter.message(blocks.describe())
    if config.init:
        model = load_model(config.init, vocab_size=len(tokenizer), max_length=config.max_length)
    else:
        model = build_model(config.preset, vocab_size=len(tokenizer), max_length=config.max_length, pad_token_id=tokenizer.pad_token_id)
    reporter.message(f"model: {sum(p.numel() for p in model.parameters()):,} parameters")
    collator = MaskingCollator(tokenizer, seed=config.seed, **config.masking)
    eval_collator = MaskingCollator(tokenizer, seed=config.seed + EVAL_SEED_OFFSET, **config.masking)
    evaluation_blocks = (blocks.validation or blocks.train)[: config.eval_blocks]
    optimizer = _optimizer(model, config)
    schedule = _Schedule(config, config.max_steps)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)

    output.mkdir(parents=True, exist_ok=True)
    (output / "run_config.json").write_text(json.dumps(asdict(config), indent=2), encoding="utf-8")
    metrics_file = (output / "metrics.jsonl").open("w", encoding="utf-8")
    result = PretrainResult(steps=0, tokens=0, seconds=0.0, output=str(output))

    def evaluate(step: int) -> MlmMetrics:
        metrics = evaluate_mlm(model, evaluation_blocks, eval_collator, batch_size=config.batch_size)
        record = {"step": step, "tokens": result.tokens, **{f"eval_{k}": v for k, v in metrics.as_dict().items()}}
        result.evaluations.append(record)
        metrics_file.write(json.dumps(record) + "\n")
        reporter.message(
            f"step {step}: eval loss {metrics.loss:.3f}, perplexity {metrics.perplexity:.1f}, accuracy {metrics.accuracy:.3f}"
        )
        return metrics

    batches = _batches(blocks.train, collator, config)
    start = time.perf_counter()
    model.train()
    try:
        evaluate(0)
        while config.max_steps is None or result.steps < config.max_steps:
            micro = [next(batches) for _ in range(config.grad_accum)]
            loss, tokens = backward_step(model, micro)
            result.tokens += tokens
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            result.steps += 1
            elapsed = time.perf_counter() - start
            metrics_file.write(json.dumps({"step": result.steps, "tokens": result.tokens, "loss": loss, "lr": scheduler.get_last_lr()[0], "seconds": elapsed}) + "\n")
            if config.max_time is not None and schedule.horizon is None and result.steps == 10:
                schedule.horizon = max(11, int(config.max_time * 60 / elapsed * 10))  # steps that fit in the time
            reporter.step(result.steps, config.max_steps or schedule.horizon, loss, result.tokens / elapsed)
            if result.steps % config.eval_every == 0:
                evaluate(result.steps)
            if config.max_time is not None and elapsed > config.max_time * 60:
                break
        if not result.evaluations or result.evaluations[-1]["step"] != result.steps:
            evaluate(result.steps)
    finally:
        metrics_file.close()
    result.seconds = time.perf_counter() - start
    state = {"step": result.steps, "tokens": result.tokens, "optimizer": optimizer.state_dict()}
    save_checkpoint(output / "model", model, tokenizer, state)
    result.model = model
    return result
