"""Pre-training: corpus -> blocks -> masked-LM job for the training loop (:mod:`tokenmask.train.loop`).

This module decides what is trained (a preset or a checkpoint), on what (the corpus's packed
blocks, masked by :class:`~tokenmask.collate.collator.MaskingCollator`), with which loss (the
sparse MLM head) and how it is scored (fixed-mask loss, perplexity, accuracy); the loop does
the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import torch

from tokenmask.blocks.load import load_phrases
from tokenmask.blocks.pack import batched, frame_ids
from tokenmask.collate.collator import MaskingCollator
from tokenmask.collate.stream import Shard
from tokenmask.masking.config import MaskingConfig
from tokenmask.recipes.config import COMMON_EVAL_MASKING, PretrainConfig, resumed_hub
from tokenmask.recipes.detection import (
    check_objective_settings,
    check_resumed_objective,
    detector_metrics,
    detector_model,
    place_generator,
    replaced_collator,
)
from tokenmask.recipes.plateau import PlateauGuard, token_text, unigram_baseline, warmup_length
from tokenmask.recipes.pretrain_data import batch_ramp, check_maskable, pretrain_data, rate_schedule
from tokenmask.recipes.run_cards import pretrain_card
from tokenmask.settings import flatten
from tokenmask.text.token_tables import require_mask_token
from tokenmask.text.tokenizer import tokenizer_commit
from tokenmask.train.checkpoint import STATE_FILE, save_model
from tokenmask.train.detector import ReplacedTokenDetector, detection_loss_sum, masked_lm
from tokenmask.train.documents import keep_documents_apart
from tokenmask.train.heads import head_support
from tokenmask.train.job import Job, QuietReporter, Reporter, TrainResult
from tokenmask.train.loop import train
from tokenmask.train.models import load_model_with_notes, paired_tokenizer
from tokenmask.train.names import Checkpoint, resolve_checkpoint
from tokenmask.train.presets import build_model, generator_words
from tokenmask.train.speed import flops_per_token
from tokenmask.train.step import LossFunction, mlm_loss_sum
from tokenmask.use.evaluate import EVAL_SEED_OFFSET, evaluate_mlm


def pretrain(config: PretrainConfig, reporter: Reporter = QuietReporter(), *, command: str | None = None) -> TrainResult:
    """Train a masked-LM on ``config``; the model ends in ``config.loop.output``/model.

    The run stops at the first of ``max_steps``, ``max_tokens`` and ``max_time``; the
    learning-rate schedule (and a masking-rate schedule) spans that limit. With
    ``config.resume``, continue from the newest checkpoint: same model, optimizer, schedule,
    data order, masks and dropout state as the uninterrupted run would have had.

    The tokenizer is ``config.tokenizer``, else the ``init`` model's own, else bert-base-uncased;
    with ``init`` it must have the model's vocabulary. Tokenizer and model are checked (a mask
    token, an embedding per id, positions for ``max_length``) before the corpus is read, and
    the blocks (enough for one batch, something to mask) before the job is handed to the loop;
    the loop writes to ``output`` only once the job is built, so bad input leaves no
    half-written run. ``command`` (the command line, as typed) goes into the model card of
    ``output``/model; None says the run came from the Python API.

    Raises:
        ValueError: bad corpus, tokenizer, model or output settings; a corpus too small for
            one batch (the message says which ``batch_size`` fits); replaced-token detection's
            settings without ``objective="rtd"``, or a resumed checkpoint of the other objective.
    """
    check_objective_settings(config)
    decay_from = config.loop.decay_from
    if decay_from is not None and not (Path(decay_from) / STATE_FILE).is_file():
        raise ValueError(
            f"--decay-from {decay_from}: no training state there; give one of the stable run's OUTPUT/checkpoints/step-N"
        )
    config, start = pin_revision(config)
    reporter.message(describe(config))
    generator_cards: list[Callable[[TrainResult], str]] = []

    def build(checkpoint: Path | None, shard: Shard) -> Job:
        job, card = _job(config, start, checkpoint, shard, reporter if shard.is_main else QuietReporter(), command)
        if card is not None and shard.is_main:  # only the main process writes OUTPUT
            generator_cards.append(card)
        return job

    result = train(config.loop, build, reporter, settings=flatten(config))
    if generator_cards:
        place_generator(Path(config.loop.output), generator_cards[-1](result))
    return result


def pin_revision(config: PretrainConfig) -> tuple[PretrainConfig, Checkpoint | None]:
    """``config`` with its Hub revision made the commit it stands for, and the ``init`` checkpoint (or None).

    A model (else a tokenizer) named by Hub id resolves to one commit of its repository
    (``--revision``, else ``main``); that commit becomes the config's ``revision``, so the run's
    ``config.yaml`` replays exactly these weights however the branch moves on; a resumed run keeps
    the commit it started from (:func:`~tokenmask.recipes.config.resumed_hub`). Anything else
    leaves the config as it is.

    Raises:
        ValueError: the checkpoint or tokenizer cannot be had (:func:`~tokenmask.train.names.resolve_checkpoint`).
    """
    config = replace(
        config,
        hub=resumed_hub(config.hub, config.loop, config.init or config.tokenizer, key="init" if config.init else "tokenizer"),
    )
    source = config.init or config.loop.decay_from  # a decay run starts from its stable run's checkpoint
    start = resolve_checkpoint(source, hub=config.hub) if source else None
    commit = start.commit if start is not None else tokenizer_commit(config.tokenizer, hub=config.hub)
    return (config if commit is None else replace(config, hub=replace(config.hub, revision=commit))), start


def save_untrained_model(config: PretrainConfig, folder: Path) -> Path:
    """The model a from-scratch run of ``config`` starts from, saved once to ``folder`` with its tokenizer:
    the loop seeds torch with the run's seed before the job builds the model, so these are that run's
    first weights (a study fine-tunes them as the baseline of a grid built from scratch)."""
    if not (folder / "config.json").exists():
        tokenizer = paired_tokenizer(None, config.tokenizer, hub=config.hub)
        torch.manual_seed(config.loop.seed)
        model = build_model(
            config.preset, vocab_size=len(tokenizer), max_length=config.blocks.max_length, pad_token_id=tokenizer.pad_token_id
        )
        save_model(folder, model, tokenizer, card="")
    return folder


def demo_fill_mask(config: PretrainConfig, output: str | Path):
    """A fill-mask pipeline on the model a run wrote to ``output``/model (``output``/generator for
    replaced-token detection), opened as the run opened its start (repository code only with
    ``trust_remote_code``): for the demo after training."""
    from tokenmask.use.fill import load_fill_mask

    masked_lm = "generator" if config.objective == "rtd" else "model"  # a discriminator fills no masks
    return load_fill_mask(Path(output) / masked_lm, hub=replace(config.hub, revision=None))


def demo_lines(config: PretrainConfig, count: int = 6) -> list[str]:
    """Up to ``count`` sentences of 6-14 words, one from each of the corpus's held-out documents, for
    a fill-mask demo of the trained model (:func:`~tokenmask.blocks.build.held_out_lines`)."""
    from tokenmask.blocks.build import held_out_lines
    from tokenmask.text.streaming import corpus_documents

    return held_out_lines(corpus_documents(config.corpus, config.reading), config.blocks.validation_share, count)


def describe(config: PretrainConfig) -> str:
    """The run's first line: what is trained, with which recipe, and the limits in force.

    ``pre-training: continuing minilm with the continued-pretraining recipe (lr 0.001, head-only
    warm-up 30 steps, layer decay 0.8); stops at 9 min`` or ``pre-training modernbert-tiny from
    scratch (lr 0.002, batch 8); stops at 9 min``.
    """
    loop = config.loop
    if config.objective == "rtd" and not config.init:
        return (
            f"pre-training {config.preset} from scratch by replaced-token detection ({generator_words(config.preset, config.generator_share)}, "
            f"discriminator weight {config.rtd_weight:g}; lr {loop.lr:g}, batch {loop.batch_size}); {loop.describe_limits()}"
        )
    if not config.init:
        return f"pre-training {config.preset} from scratch (lr {loop.lr:g}, batch {loop.batch_size}); {loop.describe_limits()}"
    warmup = f"head-only warm-up {loop.head_warmup_steps} steps" if loop.head_warmup_steps else "no head-only warm-up"
    decay = f"layer decay {loop.layer_decay:g}" if loop.layer_decay != 1 else "no layer decay"
    revision = f" (Hub revision {config.hub.revision})" if config.hub.revision else ""
    objective = " by replaced-token detection" if config.objective == "rtd" else ""
    return (
        f"pre-training: continuing {config.init}{revision}{objective} with the continued-pretraining recipe "
        f"(lr {loop.lr:g}, {warmup}, {decay}); {loop.describe_limits()}"
    )


@dataclass(frozen=True)
class EvalMasks:
    """The masking and seed of a run's fixed evaluation masks (epoch 0 of ``seed``)."""

    masking: MaskingConfig
    seed: int


def evaluation_maskings(config: PretrainConfig) -> tuple[EvalMasks, EvalMasks | None]:
    """The masks a run is scored on, and those of the own-masking score logged beside (or None).

    ``eval_masking="own"``: the run's masking at ``eval_mlm_probability``, seed
    ``seed + EVAL_SEED_OFFSET``, nothing beside (the default run's meaning). ``"common"``:
    :data:`~tokenmask.recipes.config.COMMON_EVAL_MASKING` at that rate with the seed-0 masks
    (``EVAL_SEED_OFFSET``), whatever the run's seed, so every run on the same data is scored on
    the same targets; beside it the own masks, unless they use the common masking anyway. E.g.
    ``span`` at 30%, seed 2, common at 15% -> (token 15% seed 1000003, span 15% seed 1000005).
    """
    own = EvalMasks(config.masking.at_rate(config.eval_mlm_probability), config.loop.seed + EVAL_SEED_OFFSET)
    if config.eval_masking == "own":
        return own, None
    common = EvalMasks(COMMON_EVAL_MASKING.at_rate(config.eval_mlm_probability), EVAL_SEED_OFFSET)
    return common, (own if own.masking != common.masking else None)


def _model(
    config: PretrainConfig, start: Checkpoint | None, checkpoint: Path | None, tokenizer: Any, collator: MaskingCollator
) -> tuple[torch.nn.Module, tuple[str, ...]]:
    """What the run trains: a resumed run's checkpoint, the ``init`` checkpoint, or a new preset
    (a replaced-token detector for ``objective="rtd"``), and lines for the user, ending with what
    of its masked LM runs at the targets only."""
    detecting = config.objective == "rtd"
    if checkpoint is not None:
        check_resumed_objective(checkpoint, config.objective)
    source = checkpoint if checkpoint is not None else start  # a resumed run loads its checkpoint
    notes: tuple[str, ...] = ()
    model: torch.nn.Module
    if detecting:
        model, notes = detector_model(
            config, collator.vocab, pad_token_id=tokenizer.pad_token_id, start=start, checkpoint=checkpoint
        )
    elif source is not None:
        # a resumed run's checkpoint is a local folder: no revision, the same permission to run code
        loaded = load_model_with_notes(
            source, vocab_size=len(tokenizer), max_length=config.blocks.max_length, hub=replace(config.hub, revision=None)
        )
        model, notes = loaded.model.train(), loaded.notes
    else:
        model = build_model(
            config.preset, vocab_size=len(tokenizer), max_length=config.blocks.max_length, pad_token_id=tokenizer.pad_token_id
        )
    head_note = ("generator's " if detecting else "") + head_support(masked_lm(model)).note  # slower, not wrong, if unknown
    return model, (*notes, *_packing_notes(config, model, tokenizer), head_note)


def _packing_notes(config: PretrainConfig, model: torch.nn.Module, tokenizer: Any) -> tuple[str, ...]:
    """Keep packed documents apart (``packing="documents"``) where the model allows it; else say why not."""
    if config.packing == "blocks":
        return ()
    separator = frame_ids(tokenizer)[1]
    if config.objective == "rtd":
        why: str | None = "replaced-token detection is not covered"
    elif separator is None:
        why = "the tokenizer has no separator token to end documents with"
    else:
        why = keep_documents_apart(model, separator=separator)
    if why is None:
        return ("packing: each document attends to itself only, positions restarting at each",)
    return (f"packing: documents share attention within a block here ({why})",)


def _job(
    config: PretrainConfig,
    start: Checkpoint | None,
    checkpoint: Path | None,
    shard: Shard,
    reporter: Reporter,
    command: str | None,
) -> tuple[Job, Callable[[TrainResult], str] | None]:
    """The run's job, and the card of its generator (replaced-token detection; else None)."""
    loop = config.loop
    tokenizer = paired_tokenizer(start, config.tokenizer, hub=config.hub)
    require_mask_token(tokenizer)
    detecting = config.objective == "rtd"
    collator = MaskingCollator.from_config(tokenizer, config.masking, seed=loop.seed, replacement_noise=detecting)
    model, notes = _model(config, start, checkpoint, tokenizer, collator)
    phrases = load_phrases(config.corpus, tokenizer, config.masking.units, reading=config.reading, blocks=config.blocks)
    if phrases is not None:
        notes = (f"masked as units: {len(phrases.terms):,} terms, {len(phrases.ngrams):,} PMI n-grams", *notes)
    data = pretrain_data(config, tokenizer, collator, shard, phrases=phrases)
    for line in (data.report, *notes):
        reporter.message(line)
    scored, beside = evaluation_maskings(config)
    eval_collator = MaskingCollator.from_config(tokenizer, scored.masking, seed=scored.seed)
    own_collator = MaskingCollator.from_config(tokenizer, beside.masking, seed=beside.seed) if beside else None
    evaluation_blocks = data.evaluation
    check_maskable(evaluation_blocks, eval_collator.vocab.protected, data.scored_on)

    baseline = unigram_baseline(eval_collator.collate(chunk, epoch=0) for chunk in batched(evaluation_blocks, loop.batch_size))
    # an RTD generator is always new: its plateau is no pre-trained encoder knocked off by the lr
    guard = PlateauGuard(
        baseline, token=token_text(tokenizer, baseline.token_id), from_init=bool(config.init) and not detecting, lr=loop.lr
    )

    detector_collator = replaced_collator(tokenizer, scored.masking, seed=scored.seed) if detecting else None

    def evaluate(model: torch.nn.Module, step: int, horizon: int | None) -> dict[str, Any]:
        device = next(model.parameters()).device
        scored_lm = masked_lm(model)
        metrics = evaluate_mlm(scored_lm, evaluation_blocks, eval_collator, batch_size=loop.batch_size, device=device).as_dict()
        if own_collator is not None:
            own = evaluate_mlm(scored_lm, evaluation_blocks, own_collator, batch_size=loop.batch_size, device=device)
            metrics.update({f"own_{name}": value for name, value in own.as_dict().items()})
        if detector_collator is not None:
            assert isinstance(model, ReplacedTokenDetector)  # the collator exists for detection runs only
            metrics.update(detector_metrics(model, evaluation_blocks, detector_collator, batch_size=loop.batch_size))
        warmup = warmup_length(loop.head_warmup_steps, loop.warmup, horizon)
        warning = guard.observe(step, accuracy=metrics["accuracy"], loss=metrics["loss"], warmup_steps=warmup)
        if warning is not None:
            reporter.message(warning)
            metrics["plateau_warning"] = True
        return metrics

    def before_step(step: int, horizon: int | None) -> dict[str, Any]:
        schedule = rate_schedule(config, horizon, shard.world)  # the rate the step's batches were masked at
        return {"mlm_probability": config.masking.selection.mlm_probability if schedule is None else schedule.at(step)}

    def batches(skip: int, horizon: int | None) -> Iterator[dict[str, Any]]:
        return data.batches(skip, horizon, next(model.parameters()).device)

    loss: LossFunction = partial(detection_loss_sum, weight=config.rtd_weight) if detecting else mlm_loss_sum
    job = Job(
        model=model, tokenizer=tokenizer, batches=batches, evaluate=evaluate, loss=loss, before_step=before_step,
        card=pretrain_card(config, data, command), position=data.position,
        follows_horizon=rate_schedule(config, None) is not None, per_token_loss=detecting, ramp=batch_ramp(config, shard.world),
        flops_per_token=None if detecting else flops_per_token(
            model, length=config.blocks.max_length, target_share=config.masking.selection.mlm_probability
        ),
    )  # fmt: skip
    return job, (pretrain_card(config, data, command, part="generator") if detecting else None)
