"""Pre-training: corpus -> blocks -> masked-LM job for the training loop (:mod:`tokenmask.train.loop`).

This module decides what is trained (a preset or a checkpoint), on what (the corpus's packed
blocks, masked by :class:`~tokenmask.collate.collator.MaskingCollator`), with which loss (the
sparse MLM head) and how it is scored (fixed-mask loss, perplexity, accuracy); the loop does
the rest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from tokenmask.collate.collator import MaskingCollator
from tokenmask.blocks.build import load_blocks
from tokenmask.settings import flatten
from tokenmask.collate.stream import MicroBatches, Shard, micro_batches
from tokenmask.text.token_tables import require_mask_token
from tokenmask.recipes.config import PretrainConfig
from tokenmask.use.evaluate import EVAL_SEED_OFFSET, evaluate_mlm
from tokenmask.train.loop import Job, QuietReporter, Reporter, TrainResult, mlm_loss_sum, train
from tokenmask.train.models import build_model, load_model_with_notes, paired_tokenizer


def masking_rate(config: PretrainConfig, step: int, horizon: int | None) -> float:
    """The selection rate at ``step``: constant, or linear from the start rate to ``mlm_probability_end``."""
    start = config.masking.selection.mlm_probability
    if config.mlm_probability_end is None or not horizon:
        return start
    return start + (config.mlm_probability_end - start) * min(1.0, step / horizon)


def pretrain(config: PretrainConfig, reporter: Reporter = QuietReporter()) -> TrainResult:
    """Train a masked-LM on ``config``; the model ends in ``config.output``/model.

    The run stops at the first of ``max_steps``, ``max_tokens`` and ``max_time``; the
    learning-rate schedule (and a masking-rate schedule) spans that limit. With
    ``config.resume``, continue from the newest checkpoint: same model, optimizer, schedule,
    data order, masks and dropout state as the uninterrupted run would have had.

    The tokenizer is ``config.tokenizer``, else the ``init`` model's own, else bert-base-uncased;
    with ``init`` it must have the model's vocabulary. Tokenizer and model are checked (a mask
    token, an embedding per id, positions for ``max_length``) before the corpus is read; the
    loop writes to ``output`` only once the job is built, so bad input leaves no half-written run.

    Raises:
        ValueError: bad corpus, tokenizer, model or output settings.
    """
    reporter.message(describe(config))
    return train(
        config.loop,
        lambda checkpoint, shard: _job(config, checkpoint, shard, reporter if shard.is_main else QuietReporter()),
        reporter,
        settings=flatten(config),
    )


def describe(config: PretrainConfig) -> str:
    """The run's first line: what is trained, and the limits in force."""
    model = f"continuing {config.init}" if config.init else f"{config.preset} from scratch"
    return f"pre-training {model}; {config.loop.describe_limits()}"


def _job(config: PretrainConfig, checkpoint: Path | None, shard: Shard, reporter: Reporter) -> Job:
    loop = config.loop
    tokenizer = paired_tokenizer(config.init, config.tokenizer)
    require_mask_token(tokenizer)
    notes: tuple[str, ...] = ()
    if checkpoint is not None or config.init:
        loaded = load_model_with_notes(checkpoint or config.init, vocab_size=len(tokenizer), max_length=config.blocks.max_length)
        model, notes = loaded.model.train(), loaded.notes
    else:
        model = build_model(config.preset, vocab_size=len(tokenizer), max_length=config.blocks.max_length, pad_token_id=tokenizer.pad_token_id)
    blocks = load_blocks(config.corpus, tokenizer, reading=config.reading, blocks=config.blocks)
    for line in (blocks.describe(), *notes):
        reporter.message(line)
    collator = MaskingCollator.from_config(tokenizer, config.masking, seed=loop.seed)
    eval_masking = config.masking.at_rate(config.eval_mlm_probability)
    eval_collator = MaskingCollator.from_config(tokenizer, eval_masking, seed=loop.seed + EVAL_SEED_OFFSET)
    evaluation_blocks = (blocks.validation or blocks.train)[: config.eval_blocks]

    def evaluate(model: torch.nn.Module) -> dict[str, Any]:
        device = next(model.parameters()).device
        return evaluate_mlm(model, evaluation_blocks, eval_collator, batch_size=loop.batch_size, device=device).as_dict()

    def before_step(step: int, horizon: int | None) -> dict[str, Any]:
        collator.set_mlm_probability(masking_rate(config, step, horizon))
        return {"mlm_probability": collator.masking.selection.mlm_probability}

    def batches(skip: int):
        stream = MicroBatches(
            blocks.train, collator, batch_size=loop.batch_size, seed=loop.seed, dupe_factor=config.dupe_factor,
            skip=skip, shard=shard,
        )  # fmt: skip
        return micro_batches(stream, workers=config.num_workers)

    return Job(model=model, tokenizer=tokenizer, batches=batches, evaluate=evaluate, loss=mlm_loss_sum, before_step=before_step)
