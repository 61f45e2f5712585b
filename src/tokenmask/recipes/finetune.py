"""Fine-tuning: labelled examples -> a classification, token-labelling or question-answering job for the training loop.

The sibling of :mod:`tokenmask.recipes.pretrain`: same loop (:mod:`tokenmask.train.loop`),
another job. The data are labelled examples (or a question's windows:
:mod:`tokenmask.recipes.answering`) batched by length
(:class:`~tokenmask.labelled.sampler.LengthGroupedBatches`), optionally [MASK]-augmented with their
labels kept (:class:`~tokenmask.collate.augment.MaskingAugmenter`, never at evaluation); the
loss is cross-entropy on a new head (:mod:`tokenmask.train.classifier`). A task enters as its
:class:`TaskParts`. Around each evaluation this module keeps the best checkpoint (``OUTPUT/best``)
and runs the divergence watch (:mod:`tokenmask.recipes.watch`), which may halve the augmentation
rate. At the end it writes ``OUTPUT/results.json`` and, for classifiers, ``OUTPUT/confusion.png``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from accelerate.utils import extract_model_from_parallel

from tokenmask.collate.augment import MaskingAugmenter
from tokenmask.collate.stream import Shard
from tokenmask.files import write_json
from tokenmask.labelled.align import FinetuneData
from tokenmask.labelled.sampler import LengthGroupedBatches
from tokenmask.recipes.config import FinetuneConfig, resumed_hub
from tokenmask.recipes.retrieval import (
    RetrievalData,
    save_sentence_transformer,
)
from tokenmask.recipes.run_cards import FinetuneCards, tokens_at
from tokenmask.recipes.tasks import BatchOrder, Scored, TaskData, TaskParts, load_task_data, task_parts
from tokenmask.recipes.watch import DivergenceWatch, halved_rate, training_loss_between
from tokenmask.settings import flatten
from tokenmask.train.checkpoint import load_state, save_model
from tokenmask.train.classifier import (
    load_classifier,
    load_classifier_tokenizer,
)
from tokenmask.train.config import LoopConfig
from tokenmask.train.documents import keep_documents_apart
from tokenmask.train.job import Job, QuietReporter, Reporter, TrainResult
from tokenmask.train.logs import read_metrics
from tokenmask.train.loop import train
from tokenmask.train.models import check_fits
from tokenmask.train.names import Checkpoint, resolve_checkpoint
from tokenmask.train.speed import flops_per_token
from tokenmask.use.classifier_scores import Evaluation
from tokenmask.use.metrics import plot_confusion

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

RESULTS_FILE = "results.json"
CONFUSION_FILE = "confusion.png"
BEST_FOLDER = "best"
_WATCH_FIELDS = ("train_loss", "divergence_streak", "divergence_warning", "augment_rate")
"""What :class:`_Tracker` adds to each evaluation's record (not metrics of the model)."""


def loop_settings(config: FinetuneConfig, data: TaskData) -> LoopConfig:
    """``config.loop`` with ``epochs`` turned into ``max_steps`` (the smaller wins if both are given)."""
    loop = config.loop
    if config.epochs is None:
        return loop
    micro_batches = global_batches_per_epoch(len(data.train), loop.batch_size, Shard.from_environment().world)
    steps = math.ceil(config.epochs * micro_batches / loop.grad_accum)
    return replace(loop, max_steps=min(steps, loop.max_steps or steps))


def global_batches_per_epoch(examples: int, batch_size: int, world: int) -> int:
    """Micro-batches (global: ``batch_size`` on each of ``world`` processes) per epoch: a last
    batch shorter than ``world`` is dropped, so no process gets an empty part.

    ``global_batches_per_epoch(13, 2, 3)  ->  2`` (batches of 6, 6 and 1: the 1 is dropped)

    Raises:
        ValueError: fewer examples than processes.
    """
    full, rest = divmod(examples, batch_size * world)
    if full == 0 and rest < world:
        raise ValueError(f"{examples} training examples cannot give each of {world} processes one")
    return full + (rest >= world)


# ---- what happens at each evaluation -------------------------------------------------------


class _Tracker:
    """Between evaluations: the divergence watch, the augmentation rate, the best score, the last evaluation.

    Everything it decides is a function of the run's logged losses, so a resumed run
    rebuilds it with :meth:`replay` and decides as the uninterrupted run would have.
    """

    def __init__(self, config: FinetuneConfig) -> None:
        self.config = config
        self.watch = DivergenceWatch(config.patience)
        self.rate = config.augment_rate
        self.previous_evaluation: int | None = None
        self.best: dict[str, float] = {}
        self.best_step: int | None = None
        self.last: Scored | None = None
        self.last_step = 0
        self.warnings: list[dict[str, Any]] = []

    def observe(self, step: int, metrics: dict[str, float], records: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """Judge one evaluation; returns the fields to log with it."""
        previous, self.previous_evaluation = self.previous_evaluation, step
        train_loss = None if previous is None else training_loss_between(records, previous, step)
        verdict = self.watch.observe(train_loss, metrics["loss"])
        fields: dict[str, Any] = {} if train_loss is None else {"train_loss": train_loss}
        fields["divergence_streak"] = verdict.streak
        if verdict.fired:
            event: dict[str, Any] = {"step": step, "evaluations": self.config.patience}
            if self.config.augment_adaptive:
                event["augment_rate"] = [self.rate, halved_rate(self.rate)]
                self.rate = halved_rate(self.rate)
            self.warnings.append(event)
            fields["divergence_warning"] = True
        if self.config.augment_rate:
            fields["augment_rate"] = self.rate
        value, best = metrics[self.config.metric], self.best.get(self.config.metric)
        if best is None or (value < best if self.config.metric == "loss" else value > best):
            self.best, self.best_step = dict(metrics), step
        return fields

    def warning(self) -> str:
        """The console line for the newest firing."""
        event = self.warnings[-1]
        count = event["evaluations"]
        text = (
            f"warning: step {event['step']}: validation loss rose while training loss fell, "
            f"{count} evaluation{'s' if count > 1 else ''} in a row (over-fitting?)"
        )
        if "augment_rate" in event:
            old, new = event["augment_rate"]
            text += f"; augmentation rate {old:g} -> {new:g}" + (" (off)" if new == 0 else "")
        return text

    def replay(self, records: Sequence[dict[str, Any]], upto: int) -> None:
        """Rebuild the state of a run resumed at step ``upto`` from its logged evaluations."""
        evaluations = {r["step"]: r for r in records if "eval_loss" in r and r["step"] <= upto}
        for step in sorted(evaluations):
            logged = {k[len("eval_") :]: v for k, v in evaluations[step].items() if k.startswith("eval_")}
            metrics = {k: v for k, v in logged.items() if k not in _WATCH_FIELDS}
            self.observe(step, metrics, records)


# ---- the job -------------------------------------------------------------------------------


def _job(
    config: FinetuneConfig,
    start: Checkpoint,
    parts: TaskParts,
    tokenizer: PreTrainedTokenizerBase,
    tracker: _Tracker,
    checkpoint: Path | None,
    shard: Shard,
    reporter: Reporter,
    card: FinetuneCards,
) -> Job:
    loop = config.loop
    output = Path(loop.output)
    # a resumed run loads its checkpoint: a local folder (no revision), with the same permission to run code
    loaded = load_classifier(checkpoint or start, task=parts.head, labels=parts.labels, hub=replace(config.hub, revision=None))
    check_fits(loaded.model, vocab_size=len(tokenizer), max_length=config.max_length, name=str(checkpoint or config.model))
    if config.unpad:
        why = keep_documents_apart(loaded.model, unpad=True)
        reporter.message("unpadded batches" if why is None else f"batches padded after all: {why}")
    if checkpoint is None:
        for note in loaded.notes:
            reporter.message(note)
    else:
        tracker.replay(read_metrics(output), int(load_state(checkpoint)["step"]))
    augmenter = MaskingAugmenter(tokenizer, rate=tracker.rate, strategy=config.augment_strategy, seed=loop.seed)

    def before_step(step: int, horizon: int | None) -> dict[str, Any]:
        augmenter.set_rate(tracker.rate)  # the divergence watch may have lowered it
        return {"augment_rate": tracker.rate} if config.augment_rate else {}

    def evaluate(model: torch.nn.Module, step: int, horizon: int | None) -> dict[str, Any]:
        evaluation = parts.evaluate(model)
        tracker.last, tracker.last_step = evaluation, step
        records = read_metrics(output)
        fields = tracker.observe(step, evaluation.metrics(), records)
        if fields.get("divergence_warning"):
            reporter.message(tracker.warning())
        if tracker.best_step == step and shard.is_main:
            best = card.best(output / BEST_FOLDER, step, tokens_at(records, step), evaluation.metrics())
            save_model(output / BEST_FOLDER, extract_model_from_parallel(model), tokenizer, card=best)
        return {**evaluation.metrics(), **fields}

    def final_card(result: TrainResult) -> str:
        assert tracker.last is not None  # the loop evaluates the model before it writes the card
        return card.final(result.steps, result.tokens, tracker.last.metrics())

    return Job(
        model=loaded.model.train(),
        tokenizer=tokenizer,
        batches=training_batches(parts, augmenter, loop.batch_size, loop.seed, shard),
        evaluate=evaluate,
        loss=parts.loss,
        before_step=before_step,
        card=final_card,
        flops_per_token=flops_per_token(loaded.model, length=config.max_length),
    )


def training_batches(
    parts: TaskParts, augmenter: MaskingAugmenter, batch_size: int, seed: int, shard: Shard
) -> Callable[[int, int | None], Iterator[dict[str, Any]]]:
    """``(skip, horizon) -> this process's augmented micro-batches forever``, in the task's order
    (length-grouped by default), epoch after epoch (the same whatever the horizon)."""
    train, collate = parts.train, parts.collate or (lambda augmenter, examples: augmenter(examples))
    sampler: BatchOrder
    if parts.order is None:
        sampler = LengthGroupedBatches([len(e["input_ids"]) for e in train], batch_size * shard.world, seed=seed)
    else:
        sampler = parts.order(batch_size * shard.world, seed)  # global batches
    per_epoch = global_batches_per_epoch(len(train), batch_size, shard.world)

    def epoch_batches() -> list[list[int]]:
        """This process's part of each global batch (near-equal contiguous parts; a last batch
        shorter than the number of processes is dropped, so no process gets an empty one)."""
        usable = [b for b in sampler.batches() if len(b) >= shard.world]
        return [np.array_split(np.asarray(b), shard.world)[shard.rank].tolist() for b in usable]

    def batches(skip: int, horizon: int | None) -> Iterator[dict[str, Any]]:
        epoch, offset = divmod(skip, per_epoch)
        while True:
            sampler.set_epoch(epoch)
            augmenter.set_epoch(epoch)
            for indices in epoch_batches()[offset:]:
                yield collate(augmenter, [train[i] for i in indices])
            epoch, offset = epoch + 1, 0

    return batches


# ---- the run -------------------------------------------------------------------------------


@dataclass
class FinetuneResult:
    """What a fine-tuning run gave.

    Attributes:
        output: the run folder (``model``, ``best``, ``results.json``, a classifier's ``confusion.png``…).
        labels: a classifier's labels; none for question answering.
        final: the last evaluation (of the model in ``OUTPUT/model``), at ``final_step``.
        best: the metrics of the best evaluation by ``metric`` (the model in ``OUTPUT/best``).
        warnings: divergence-watch firings: ``{"step", "evaluations"[, "augment_rate": [old, new]]}``.
    """

    output: str
    task: str
    labels: tuple[str, ...]
    steps: int
    seconds: float
    metric: str
    final: Scored
    final_step: int
    best: dict[str, float]
    best_step: int
    warnings: list[dict[str, Any]] = field(default_factory=list)
    model: Any = None

    def to_dict(self) -> dict[str, Any]:
        """The content of ``results.json`` (less the config)."""
        return {
            "task": self.task,
            "labels": list(self.labels),
            "steps": self.steps,
            "seconds": self.seconds,
            "metric": self.metric,
            "final": {"step": self.final_step, **self.final.to_dict()},
            "best": {"step": self.best_step, **self.best},
            "divergence_warnings": self.warnings,
        }


def pin_revision(config: FinetuneConfig) -> tuple[FinetuneConfig, Checkpoint]:
    """``config`` with the Hub commit its model resolved to as its revision, and the resolved model.

    A model named by Hub id stands for one commit (``--revision``, else ``main``); written into
    ``config.yaml`` and the cards, it makes a replay load these weights however the branch moves
    on; a resumed run keeps the commit it started from (:func:`~tokenmask.recipes.config.resumed_hub`).
    A folder or ``minilm`` leaves the config as it is.

    Raises:
        ValueError: the model cannot be had (:func:`~tokenmask.train.names.resolve_checkpoint`).
    """
    config = replace(config, hub=resumed_hub(config.hub, config.loop, config.model, key="model"))
    start = resolve_checkpoint(config.model, hub=config.hub)
    if start.commit is None:
        return config, start
    return replace(config, hub=replace(config.hub, revision=start.commit)), start


def describe(config: FinetuneConfig) -> str:
    """The run's first line: what is fine-tuned for which task, and the limits in force."""
    revision = f" (Hub revision {config.hub.revision})" if config.hub.revision else ""
    return f"fine-tuning {config.model}{revision} ({config.task}); {config.loop.describe_limits(epochs=config.epochs)}"


def finetune(
    config: FinetuneConfig,
    reporter: Reporter = QuietReporter(),
    *,
    data: TaskData | None = None,
    command: str | None = None,
) -> FinetuneResult:
    """Fine-tune ``config.model`` on labelled data; the model ends in ``config.loop.output``/model.

    Evaluates at the start, every ``eval_every`` steps and at the end; keeps the best model by
    ``config.metric`` in ``OUTPUT/best``; writes ``OUTPUT/results.json`` (final and best
    metrics, labels, divergence warnings, config) and a classifier's ``OUTPUT/confusion.png``. With
    ``config.loop.resume``, continues from the newest checkpoint as if never interrupted.

    Args:
        config: the run's settings.
        reporter: where progress and warnings go.
        data: encoded examples (:func:`~tokenmask.recipes.tasks.load_task_data` with this model's
            tokenizer); None reads them from ``config``. Several runs on the same data can share them.
        command: the command line, as typed, for the model cards of OUTPUT/model and
            OUTPUT/best; None says the run came from the Python API.

    Raises:
        ValueError: bad data, model or output settings; all before OUTPUT is written.
    """
    reporter = reporter if Shard.from_environment().is_main else QuietReporter()
    config, start = pin_revision(config)
    tokenizer = load_classifier_tokenizer(start)
    reporter.message(describe(config))  # before the data: reading and cutting SQuAD takes half a minute
    if data is None:
        data = load_task_data(config, tokenizer)
    reporter.message(data.describe())
    parts = task_parts(data, tokenizer, config)
    tracker, card = _Tracker(config), FinetuneCards(config, data, command)

    def build(checkpoint: Path | None, shard: Shard) -> Job:
        return _job(
            config, start, parts, tokenizer, tracker, checkpoint, shard, reporter if shard.is_main else QuietReporter(), card
        )

    trained = train(loop_settings(config, data), build, reporter, settings=flatten(config))
    # train() evaluates at least once in every run that returns (at the end if not at the last step),
    # and the first evaluation observed sets the best one
    assert tracker.last is not None and tracker.best_step is not None
    result = FinetuneResult(
        output=trained.output,
        task=data.task,
        labels=data.labels.labels if isinstance(data, FinetuneData) else (),
        steps=trained.steps,
        seconds=trained.seconds,
        metric=config.metric,
        final=tracker.last,
        final_step=tracker.last_step,
        best=tracker.best,
        best_step=tracker.best_step,
        warnings=tracker.warnings,
        model=trained.model,
    )
    if Shard.from_environment().is_main:
        _write_results(result, config)
        if isinstance(data, RetrievalData):
            for folder in ("model", BEST_FOLDER):
                save_sentence_transformer(Path(result.output) / folder, max_length=config.max_length)
    return result


def _write_results(result: FinetuneResult, config: FinetuneConfig) -> None:
    """``OUTPUT/results.json`` (the result and the resolved settings) and a classifier's ``OUTPUT/confusion.png``, each atomically."""
    output = Path(result.output)
    write_json(output / RESULTS_FILE, {**result.to_dict(), "config": flatten(config)})
    if not isinstance(result.final, Evaluation):
        return
    title = f"validation, step {result.final_step}"
    plot_confusion(result.final.scores.confusion, result.labels, output / CONFUSION_FILE, title=title)
