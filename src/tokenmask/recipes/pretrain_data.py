"""Where pre-training's blocks come from: the block cache, or the stream (``--streaming``).

The cache (:mod:`tokenmask.blocks.build`) encodes the corpus first and serves blocks in a
seeded random order; the step count places a resumed run. The stream
(:mod:`tokenmask.collate.chunked`) packs blocks as the corpus is read, in its order shuffled
within chunks; its position is saved in checkpoints. Both give the job a :class:`PretrainData`,
whose batches mask each step at its rate (:func:`rate_schedule`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from tokenmask.blocks.entry import PretrainBlocks
from tokenmask.blocks.load import load_blocks
from tokenmask.blocks.streamed import held_out_blocks
from tokenmask.collate.chunked import ChunkBatches, RatedStream, StreamPosition, positioned_batches
from tokenmask.collate.collator import MaskingCollator
from tokenmask.collate.rate import BatchRamp, RateSchedule, parse_phases
from tokenmask.collate.stream import MicroBatches, Shard, micro_batches
from tokenmask.recipes.config import PretrainConfig
from tokenmask.text.streaming import DocumentStream

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from tokenmask.text.phrases import Phrases


@dataclass(frozen=True)
class PretrainData:
    """What a pre-training job reads.

    Attributes:
        evaluation: the blocks it is scored on (fixed masks).
        summary: one line on the blocks, for the model card.
        report: what was read, for the run's log.
        scored_on: where ``evaluation`` comes from: ``"validation"``, ``"training"`` or ``"evaluation corpus"``.
        batches: ``(skip, horizon, device) -> micro-batches forever`` (``skip`` and ``horizon``:
            as the loop's :attr:`~tokenmask.train.job.Job.batches`).
        position: the stream's position, saved in checkpoints; None for the cache.
    """

    evaluation: Sequence[Any]
    summary: str
    report: str
    scored_on: str
    batches: Callable[[int, int | None, torch.device], Iterator[dict[str, Any]]]
    position: StreamCursor | None = None


class StreamCursor:
    """A rank's :class:`~tokenmask.collate.chunked.StreamPosition`: loaded on resume, moved by
    each micro-batch the loop takes (:class:`~tokenmask.train.job.DataPosition`)."""

    def __init__(self) -> None:
        self.now = StreamPosition()

    def state(self) -> dict[str, Any]:
        return self.now.as_dict()

    def load(self, state: dict[str, Any]) -> None:
        self.now = StreamPosition.from_dict(state)


class StreamedBatches:
    """A streamed run's micro-batches, ``(skip, horizon, device) -> micro-batches``, and where
    the stream stands (:attr:`cursor`, saved in checkpoints).

    Each call reads from the cursor on. With a masking-rate schedule, a call that continues
    where the last one stopped (the horizon moved, so the rates did) reads on from the same
    :class:`~tokenmask.collate.chunked.RatedStream` instead of reading the corpus again up to
    the cursor.
    """

    def __init__(
        self, config: PretrainConfig, stream: DocumentStream, tokenizer: PreTrainedTokenizerBase, collator: MaskingCollator,
        *, validation_share: float | None, phrases: Phrases | None,
    ) -> None:  # fmt: skip
        self.config, self.stream, self.tokenizer, self.collator = config, stream, tokenizer, collator
        self.validation_share, self.phrases = validation_share, phrases
        self.cursor = StreamCursor()
        self.rated: RatedStream | None = None

    def __call__(self, skip: int, horizon: int | None, device: torch.device) -> Iterator[dict[str, Any]]:
        rate = rate_schedule(self.config, horizon, self.stream.world)
        workers, pin_memory = loader_workers(self.config, device), device.type == "cuda"
        positioned: Iterator[tuple[dict[str, Any], StreamPosition]]
        if rate is None:
            positioned = positioned_batches(self._chunks(None), first=skip, workers=workers, pin_memory=pin_memory)
        else:
            if self.rated is None or self.rated.taken != skip:  # else the run goes on from where the reading stands
                self.rated = RatedStream(self._chunks(rate), first=skip, workers=workers, pin_memory=pin_memory)
            positioned = self.rated.batches(rate)
        cursor = self.cursor
        for batch, cursor.now in positioned:
            yield batch

    def _chunks(self, rate: RateSchedule | None) -> ChunkBatches:
        """The stream's chunks from the cursor on (collated in workers without a rate schedule)."""
        config, loop = self.config, self.config.loop
        return ChunkBatches(
            self.stream, self.tokenizer, self.collator, block_length=config.blocks.max_length, batch_size=loop.batch_size,
            seed=loop.seed, characters=config.blocks.chunk_characters, validation_share=self.validation_share,
            dupe_factor=config.dupe_factor, start=self.cursor.now, phrases=self.phrases, rate=rate,
        )  # fmt: skip


def pretrain_data(
    config: PretrainConfig,
    tokenizer: PreTrainedTokenizerBase,
    collator: MaskingCollator,
    shard: Shard,
    *,
    phrases: Phrases | None = None,
) -> PretrainData:
    """The blocks of a run: from the cache, or streamed with ``config.blocks.streaming``.

    Raises:
        ValueError: a corpus that cannot be read, or gives no training or validation text.
    """
    evaluation = None
    if config.eval_corpus:
        evaluation = held_out_blocks(
            DocumentStream(config.eval_corpus, config.reading), tokenizer, block_length=config.blocks.max_length,
            count=config.eval_blocks, validation_share=None, phrases=phrases,
        )  # fmt: skip
    if config.blocks.streaming:
        return _streamed(config, tokenizer, collator, shard, phrases, evaluation)
    return _cached(config, tokenizer, collator, shard, phrases, evaluation)


def _cached(
    config: PretrainConfig, tokenizer: PreTrainedTokenizerBase, collator: MaskingCollator, shard: Shard,
    phrases: Phrases | None, evaluation: Sequence[Any] | None,
) -> PretrainData:  # fmt: skip
    blocks = load_blocks(config.corpus, tokenizer, reading=config.reading, blocks=config.blocks, phrases=phrases)
    check_blocks(blocks, batch_size=config.loop.batch_size, processes=shard.world)
    loop = config.loop

    def batches(skip: int, horizon: int | None, device: torch.device) -> Iterator[dict[str, Any]]:
        stream = MicroBatches(
            blocks.train, collator, batch_size=loop.batch_size, seed=loop.seed, dupe_factor=config.dupe_factor,
            skip=skip, shard=shard, rate=rate_schedule(config, horizon, shard.world),
        )  # fmt: skip
        return micro_batches(stream, workers=loader_workers(config, device), pin_memory=device.type == "cuda")

    if evaluation is not None:
        scored_on = "evaluation corpus"
    else:
        scored_on = "validation" if blocks.validation else "training"
        evaluation = (blocks.validation or blocks.train)[: config.eval_blocks]
    summary = (
        f"{_corpus_name(config)}: {len(blocks.train):,} training and {len(blocks.validation):,} validation blocks "
        f"of {blocks.block_length} tokens"
    )
    return PretrainData(evaluation, summary, blocks.describe(), scored_on, batches)


def _streamed(
    config: PretrainConfig, tokenizer: PreTrainedTokenizerBase, collator: MaskingCollator, shard: Shard,
    phrases: Phrases | None, evaluation: Sequence[Any] | None,
) -> PretrainData:  # fmt: skip
    share = None if evaluation is not None else config.blocks.validation_share
    stream = DocumentStream(config.corpus, config.reading, rank=shard.rank, world=shard.world)
    if evaluation is None:  # the held-out documents at the start of the whole stream, the same on every rank
        evaluation = held_out_blocks(
            DocumentStream(config.corpus, config.reading), tokenizer, block_length=config.blocks.max_length,
            count=config.eval_blocks, validation_share=share, phrases=phrases,
        )  # fmt: skip
    batches = StreamedBatches(config, stream, tokenizer, collator, validation_share=share, phrases=phrases)
    held = "the evaluation corpus" if config.eval_corpus else f"{config.blocks.validation_share:.0%} of documents held out"
    summary = (
        f"{_corpus_name(config)}, streamed: blocks of {config.blocks.max_length} tokens packed as read, shuffled within chunks of "
        f"{config.blocks.chunk_characters:,} characters; scored on {len(evaluation):,} blocks of {held}"
    )
    scored_on = "evaluation corpus" if config.eval_corpus else "validation"
    return PretrainData(evaluation, summary, summary, scored_on, batches, batches.cursor)


def _corpus_name(config: PretrainConfig) -> str:
    return ", ".join(config.corpus) if config.corpus else "the bundled Shakespeare plays (one document per scene)"


def rate_schedule(config: PretrainConfig, horizon: int | None, world: int = 1) -> RateSchedule | None:
    """The run's masking-rate schedule, over the learning-rate schedule's ``horizon`` (None until
    it is fitted: the start rate meanwhile), its steps' micro-batches those of ``world`` processes'
    :func:`batch_ramp`; None for a constant rate (no ``mlm_probability_end`` nor ``mlm_phases``).

    ``--mlm-probability 0.3 --mlm-probability-end 0.1``, horizon 8: step 2 masks at 0.25.
    """
    if config.mlm_probability_end is None and not config.mlm_phases:
        return None
    start, phases = config.masking.selection.mlm_probability, parse_phases(config.mlm_phases)
    return RateSchedule(start, config.mlm_probability_end, horizon=horizon, ramp=batch_ramp(config, world), phases=phases)


def batch_ramp(config: PretrainConfig, world: int) -> BatchRamp:
    """The micro-batches of each step: ``grad_accum``, or a batch-size warm-up over ``batch_warmup_tokens``
    counted in full blocks of all ``world`` processes."""
    loop = config.loop
    micro_tokens = loop.batch_size * config.blocks.max_length * world
    return BatchRamp(loop.grad_accum, tokens=config.batch_warmup_tokens or 0, micro_tokens=micro_tokens)


def loader_workers(config: PretrainConfig, device: torch.device) -> int:
    """DataLoader workers for the run: ``config.num_workers``, or by default 2 on a GPU and 0 on a CPU."""
    if config.num_workers is not None:
        return config.num_workers
    return 2 if device.type == "cuda" else 0


def check_blocks(blocks: PretrainBlocks, *, batch_size: int, processes: int = 1) -> None:
    """Refuse cached blocks the loop could not train on, before it writes anything.

    Raises:
        ValueError: fewer training blocks than one batch on each process (the message says
            how many there are and which ``--batch-size`` fits, e.g. ``the corpus gives 3
            training blocks of 128 tokens, fewer than one batch of 8: pass --batch-size 3 or
            less, or give more text``).
    """
    count, world = len(blocks.train), processes
    if count < batch_size * world:
        on = f" on each of {world} processes" if world > 1 else ""
        fits = count // world
        advice = f"pass --batch-size {fits}{' or less' * (fits > 1)}, or give" if fits else "give"
        raise ValueError(
            f"the corpus gives {count:,} training block{'s' * (count != 1)} of {blocks.block_length} tokens, "
            f"fewer than one batch of {batch_size}{on}: {advice} more text (or a shorter --max-length)"
        )


def check_maskable(evaluation: Sequence[dict[str, Any]], protected: np.ndarray, scored_on: str) -> None:
    """Refuse evaluation blocks without a token that masking may select.

    Args:
        protected: ``(V,)`` bool, the ids masking never selects (special tokens, ``[UNK]``…).

    Raises:
        ValueError: every token of ``evaluation`` is protected (e.g. all ``[UNK]``).
    """
    if not any((~protected[np.asarray(block["input_ids"])]).any() for block in evaluation):
        raise ValueError(
            f"the {scored_on} blocks hold no token that may be masked: all are special tokens such as [UNK] "
            "(does the tokenizer cover the corpus's characters?)"
        )
