"""Pre-training: corpus -> blocks -> masked-LM job for the training loop (:mod:`tokenmask.train.loop`).

This module decides what is trained (a preset or a checkpoint), on what (the corpus's packed
blocks, masked by :class:`~tokenmask.collate.collator.MaskingCollator`), with which loss (the
sparse MLM head) and how it is scored (fixed-mask loss, perplexity, accuracy); the loop does
the rest.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from tokenmask.collate.collator import MaskingCollator
from tokenmask.text.corpus import read_texts
from tokenmask.blocks.build import PretrainBlocks, build_blocks, corpus_blocks
from tokenmask.text.resources import shakespeare_scenes
from tokenmask.collate.stream import MicroBatches, Shard, micro_batches
from tokenmask.text.token_tables import require_mask_token
from tokenmask.recipes.config import PretrainConfig
from tokenmask.use.evaluate import EVAL_SEED_OFFSET, evaluate_mlm
from tokenmask.train.loop import Job, QuietReporter, Reporter, TrainResult, mlm_loss_sum, train
from tokenmask.train.models import build_model, load_model_with_notes, paired_tokenizer

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


def corpus_texts(config: PretrainConfig) -> Iterable[str]:
    """The documents, streamed: the given corpus or the bundled plays (one per scene)."""
    if config.corpus:
        return read_texts(config.corpus, **_reading(config))
    return shakespeare_scenes()


def _reading(config: PretrainConfig) -> dict[str, Any]:
    """How the corpus is read: the keywords of :func:`~tokenmask.text.corpus.read_documents`."""
    return dict(
        unit=config.document_unit, text_field=config.text_field, strict=config.strict, max_line_bytes=config.max_line_bytes
    )


def load_blocks(config: PretrainConfig, tokenizer: PreTrainedTokenizerBase) -> PretrainBlocks:
    """The run's training and validation blocks, from the block cache when it holds them."""
    settings = dict(
        block_length=config.max_length,
        validation_share=config.validation_share,
        cache_dir=config.cache_dir,
        use_cache=not config.no_cache,
    )
    if config.corpus:
        return corpus_blocks(config.corpus, tokenizer, **_reading(config), **settings)
    return build_blocks(shakespeare_scenes(), tokenizer, **settings)


def masking_rate(config: PretrainConfig, step: int, horizon: int | None) -> float:
    """The selection rate at ``step``: constant, or linear from the start rate to ``mlm_probability_end``."""
    start = float(config.masking.get("mlm_probability", 0.15))
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
    return train(config, lambda checkpoint, shard: _job(config, checkpoint, shard, reporter if shard.is_main else QuietReporter()), reporter)


def _job(config: PretrainConfig, checkpoint: Path | None, shard: Shard, reporter: Reporter) -> Job:
    tokenizer = paired_tokenizer(config.init, config.tokenizer)
    require_mask_token(tokenizer)
    notes: tuple[str, ...] = ()
    if checkpoint is not None or config.init:
        loaded = load_model_with_notes(checkpoint or config.init, vocab_size=len(tokenizer), max_length=config.max_length)
        model, notes = loaded.model.train(), loaded.notes
    else:
        model = build_model(config.preset, vocab_size=len(tokenizer), max_length=config.max_length, pad_token_id=tokenizer.pad_token_id)
    blocks = load_blocks(config, tokenizer)
    for line in (blocks.describe(), *notes):
        reporter.message(line)
    collator = MaskingCollator(tokenizer, seed=config.seed, **config.masking)
    eval_masking = {**config.masking, "mlm_probability": config.eval_mlm_probability}
    eval_collator = MaskingCollator(tokenizer, seed=config.seed + EVAL_SEED_OFFSET, **eval_masking)
    evaluation_blocks = (blocks.validation or blocks.train)[: config.eval_blocks]

    def evaluate(model: torch.nn.Module) -> dict[str, Any]:
        device = next(model.parameters()).device
        return evaluate_mlm(model, evaluation_blocks, eval_collator, batch_size=config.batch_size, device=device).as_dict()

    def before_step(step: int, horizon: int | None) -> dict[str, Any]:
        collator.set_mlm_probability(masking_rate(config, step, horizon))
        return {"mlm_probability": collator.selection.mlm_probability}

    def batches(skip: int):
        stream = MicroBatches(
            blocks.train, collator, batch_size=config.batch_size, seed=config.seed, dupe_factor=config.dupe_factor,
            skip=skip, shard=shard,
        )  # fmt: skip
        return micro_batches(stream, workers=config.num_workers)

    return Job(model=model, tokenizer=tokenizer, batches=batches, evaluate=evaluate, loss=mlm_loss_sum, before_step=before_step)
