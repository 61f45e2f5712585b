"""Does [MASK] augmentation help? The same fine-tuning over training sizes, arms and seeds.

One *cell* = (training-set size, arm, seed); an arm is a fixed augmentation rate (``rate-0.1``)
or the adaptive augmentation that starts there (``adaptive-0.1``). Each cell is one
:func:`~tokenmask.recipes.finetune.finetune` run in ``OUTPUT/size-S/ARM/seed-N`` on a training
sample drawn with its seed, stratified by label (:mod:`tokenmask.labelled.subsets`), every run
with the same budget (``--max-steps`` or ``--max-time``). The final model is scored on the clean
validation set and on corrupted copies of it (:mod:`tokenmask.labelled.robustness`), and the
scores go to ``cell.json`` in the cell's folder, written atomically: a cell with that file is
finished, and ``resume`` reads it back instead of training again; an unfinished one continues
from its newest checkpoint. ``OUTPUT/compare.json`` is rewritten after every cell and marked
``"complete"`` at the end, when the plots and ``report.html`` are written
(:mod:`tokenmask.recipes.compare_report`).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tokenmask.labelled.align import FinetuneData, LabelledExample, encode_texts_with_labels
from tokenmask.labelled.examples import LabelledText, SideCounts
from tokenmask.labelled.robustness import Corruption, corrupt_texts
from tokenmask.labelled.subsets import stratified_sample
from tokenmask.recipes.classifier import evaluate_classifier, load_classifier_tokenizer
from tokenmask.recipes.compare_report import AugmentComparison, write_compare_report
from tokenmask.recipes.compare_stats import BASELINE_ARM, CLEAN, summarize
from tokenmask.recipes.config import FinetuneConfig
from tokenmask.recipes.finetune import BEST_FOLDER, finetune, validation_batches
from tokenmask.recipes.finetune_data import load_finetune_split
from tokenmask.settings import flatten
from tokenmask.train.loop import QuietReporter, Reporter
from tokenmask.train.runs import CHECKPOINTS

COMPARE_FILE = "compare.json"
CELL_FILE = "cell.json"
SCORED_METRICS = {"classify": ("accuracy", "macro_f1"), "tokens": ("accuracy", "macro_f1", "span_f1")}
"""What every evaluation set is scored by, per task (higher is better for each)."""


@dataclass(frozen=True)
class Arm:
    """A way of fine-tuning: ``Arm(0.1)`` masks 10% of training tokens; ``adaptive`` halves that
    rate each time the divergence watch fires."""

    rate: float
    adaptive: bool = False

    @property
    def name(self) -> str:
        """``"rate-0.1"`` or ``"adaptive-0.1"``: the arm's folder and its name in results."""
        return f"{'adaptive' if self.adaptive else 'rate'}-{self.rate:g}"


@dataclass(frozen=True)
class ComparePlan:
    """What is compared: arms × training sizes × seeds, scored on the clean and corrupted sets.

    Args:
        rates: fixed augmentation rates, each in [0, 1); 0 is the baseline of the paired tests.
        seeds: seeds per (size, arm): ``first_seed``, ``first_seed + 1``, …
        train_sizes: training examples per cell; None = all of them.
        corruptions: the corrupted evaluation sets (none = the clean set only).
        adaptive: add an adaptive arm for each rate above 0.
        first_seed: the first seed (the loop's ``--seed``).
        keep_models: keep each run's ``model``, ``best`` and ``checkpoints`` folders; False
            removes them once the run is scored (minilm: ~175 MB a run kept).

    Raises:
        ValueError: no rate or a rate outside [0, 1) or given twice, seeds below 1, no size or a
            size below 1 or given twice.
    """

    rates: tuple[float, ...]
    seeds: int = 3
    train_sizes: tuple[int | None, ...] = (None,)
    corruptions: tuple[Corruption, ...] = ()
    adaptive: bool = False
    first_seed: int = 0
    keep_models: bool = True

    def __post_init__(self) -> None:
        check_rates(self.rates, self.seeds)
        if not self.train_sizes:
            raise ValueError("give at least one training-set size")
        for size in self.train_sizes:
            if size is not None and size < 1:
                raise ValueError(f"training-set sizes must be >= 1 (or 'all'); got {size}")
        if len(set(self.train_sizes)) != len(self.train_sizes):
            raise ValueError(f"each training-set size once, please; got {', '.join(map(size_name, self.train_sizes))}")
        if self.adaptive and not any(self.rates):
            raise ValueError("adaptive augmentation starts from a rate above 0: give one in --rates")

    @property
    def arms(self) -> tuple[Arm, ...]:
        """The fixed rates in the order given, then the adaptive arms."""
        return tuple(Arm(r) for r in self.rates) + tuple(Arm(r, True) for r in self.rates if r > 0 and self.adaptive)

    @property
    def seed_list(self) -> tuple[int, ...]:
        return tuple(range(self.first_seed, self.first_seed + self.seeds))

    def to_dict(self) -> dict[str, Any]:
        return {
            "rates": list(self.rates), "seeds": list(self.seed_list), "adaptive": self.adaptive,
            "train_sizes": [size_name(s) for s in self.train_sizes], "arms": [a.name for a in self.arms],
            "robustness": [{"set": c.name, "kind": c.kind, "rate": c.rate} for c in self.corruptions],
        }  # fmt: skip


def size_name(size: int | None) -> str:
    """``100 -> "100"``, ``None -> "all"``."""
    return "all" if size is None else str(size)


def parse_train_sizes(value: str) -> tuple[int | None, ...]:
    """``"100,300,all" -> (100, 300, None)``; raises ValueError for anything else."""
    sizes: list[int | None] = []
    for part in (p.strip() for p in str(value).split(",")):
        if part.lower() == "all":
            sizes.append(None)
        elif part.isdigit():
            sizes.append(int(part))
        elif part:
            raise ValueError(f"--train-sizes: expected whole numbers or 'all', e.g. 100,300,all; got {value!r}")
    return tuple(sizes)


def check_rates(rates: Sequence[float], seeds: int) -> None:
    """Raises ValueError for no rate, a rate outside [0, 1), a rate given twice, or seeds below 1."""
    if not rates:
        raise ValueError("give at least one augmentation rate")
    for rate in rates:
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"augmentation rates must be in [0, 1); got {rate}")
    if len(set(rates)) != len(rates):
        raise ValueError(f"each rate once, please; got {', '.join(map(str, rates))}")
    if seeds < 1:
        raise ValueError(f"seeds must be >= 1; got {seeds}")


class _Relay:
    """Passes a run's progress and warnings on, not its set-up messages (said once for all runs)."""

    def __init__(self, reporter: Reporter) -> None:
        self.reporter = reporter

    def message(self, text: str) -> None:
        if text.startswith("warning"):
            self.reporter.message(text)

    def step(self, step: int, total: int | None, loss: float, tokens_per_s: float) -> None:
        self.reporter.step(step, total, loss, tokens_per_s)


# ---- the data, read once ------------------------------------------------------------------


@dataclass
class _Data:
    """Everything encoded once: all training examples, the clean validation set, and the raw
    texts that the training samples and the corrupted sets are drawn from."""

    full: FinetuneData
    strata: list[str]
    """The label of each training example (``classify``); one stratum for ``tokens``."""
    train_raw: list[Any]
    validation_raw: list[Any]
    tokenizer: Any
    batch_size: int
    corrupted: dict[tuple[int, str], list[dict[str, Any]]]
    """Collated corrupted sets by ``(seed, set name)``, built when first asked for."""

    def training(self, size: int | None, seed: int) -> FinetuneData:
        """The full data with the training side cut to a stratified sample (label vocabulary kept)."""
        chosen = stratified_sample(self.strata, size, seed=seed)
        return replace(
            self.full,
            train=[self.full.train[i] for i in chosen],
            train_counts=SideCounts.of([self.train_raw[i] for i in chosen]),
        )

    def corrupted_batches(self, seed: int, corruption: Corruption) -> list[dict[str, Any]]:
        key = (seed, corruption.name)
        if key not in self.corrupted:
            texts = corrupt_texts(
                [e.text for e in self.validation_raw], corruption, seed=seed, unk_token=self.tokenizer.unk_token
            )
            examples = [LabelledText(t, e.label) for t, e in zip(texts, self.validation_raw)]
            side = encode_texts_with_labels(
                examples, self.tokenizer, self.full.labels, max_length=self.full.max_length, side="validation"
            )
            self.corrupted[key] = validation_batches(
                _ids_after(side.examples, len(self.full.train)), self.tokenizer, self.batch_size
            )
        return self.corrupted[key]


def _ids_after(examples: list[LabelledExample], first: int) -> list[LabelledExample]:
    return [{**e, "id": first + i} for i, e in enumerate(examples)]


def _load(config: FinetuneConfig, plan: ComparePlan) -> _Data:
    """Read, split and encode once; keep the examples for samples and corrupted sets."""
    if plan.corruptions and config.task != "classify":
        raise ValueError(
            "--robustness corrupts the text of classification examples; for --task tokens a deleted word would "
            "have to take its tag along, which is not supported"
        )
    tokenizer = load_classifier_tokenizer(config.model)
    full, train, validation = load_finetune_split(config, tokenizer)
    strata = [getattr(e, "label", "") for e in train] if config.task == "classify" else [""] * len(train)
    return _Data(full, strata, train, validation, tokenizer, config.loop.batch_size, {})


# ---- the cells ----------------------------------------------------------------------------


def cell_folder(output: Path, size: int | None, arm: Arm, seed: int) -> Path:
    """``OUTPUT/size-100/rate-0.1/seed-0``"""
    return output / f"size-{size_name(size)}" / arm.name / f"seed-{seed}"


def _cell_config(config: FinetuneConfig, folder: Path, arm: Arm, seed: int) -> FinetuneConfig:
    return replace(config.with_loop(output=str(folder), seed=seed), augment_rate=arm.rate, augment_adaptive=arm.adaptive)


def _finished(folder: Path, run: FinetuneConfig, plan: ComparePlan) -> dict[str, Any] | None:
    """The cell's record if it finished with these settings and sets; raises ValueError if it
    ran with other settings or was scored on other sets (its numbers would not compare)."""
    path = folder / CELL_FILE
    if not path.exists():
        return None
    record = json.loads(path.read_text(encoding="utf-8"))
    if _comparable(record["config"]) != _comparable(flatten(run)):
        raise ValueError(f"{folder} was run with other settings: use another --output, or --overwrite to start afresh")
    if set(record["scores"]) != {CLEAN, *(c.name for c in plan.corruptions)}:
        raise ValueError(
            f"{folder} was scored on {', '.join(record['scores'])}: give the same --robustness sets, or another --output"
        )
    return record


def _comparable(settings: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in settings.items() if k not in ("resume", "overwrite")}


def _run_cell(
    data: _Data, run: FinetuneConfig, plan: ComparePlan, size: int | None, arm: Arm, reporter: Reporter, command: str | None
) -> dict[str, Any]:
    """Train one cell, score it on every set, write its ``cell.json``; returns the record."""
    seed, folder = run.loop.seed, Path(run.loop.output)
    subset = data.training(size, seed)
    result = finetune(run, _Relay(reporter), data=subset, command=command)
    scores = {CLEAN: _scored(result.final.metrics(), run)}
    for corruption in plan.corruptions:
        evaluation = evaluate_classifier(
            result.model, data.corrupted_batches(seed, corruption), task="classify", labels=subset.labels
        )
        scores[corruption.name] = _scored(evaluation.metrics(), run)
    record = {
        "size": size_name(size), "examples": len(subset.train), "arm": arm.name, "rate": arm.rate, "adaptive": arm.adaptive,
        "seed": seed, "steps": result.steps, "seconds": result.seconds, "divergence_warnings": len(result.warnings),
        "scores": scores, "config": flatten(run),
    }  # fmt: skip
    write_json(folder / CELL_FILE, record)
    if not plan.keep_models:  # only now: an unfinished run needs its checkpoints to resume
        for name in (BEST_FOLDER, "model", CHECKPOINTS):
            shutil.rmtree(folder / name, ignore_errors=True)
    return record


def _scored(metrics: dict[str, float], run: FinetuneConfig) -> dict[str, float]:
    return {name: float(metrics[name]) for name in SCORED_METRICS[run.task]}


def write_json(path: Path, content: dict[str, Any]) -> None:
    """Write through a temporary file and a rename, so a crash leaves the old file or the new one."""
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(content, indent=2), encoding="utf-8")
    temporary.replace(path)


# ---- the comparison -----------------------------------------------------------------------


def compare_augment(
    config: FinetuneConfig,
    plan: ComparePlan | None = None,
    *,
    rates: Sequence[float] | None = None,
    seeds: int = 3,
    reporter: Reporter = QuietReporter(),
    command: str | None = None,
) -> AugmentComparison:
    """Fine-tune every cell of ``plan`` (sizes, then seeds, then arms) and compare them.

    Every run has ``config``'s settings but its own ``output`` folder, ``augment_rate``,
    ``augment_adaptive`` and ``seed``. With ``config.loop.resume``, finished cells are read
    back and an unfinished one continues from its newest checkpoint. ``command`` (the command
    line, as typed) goes into each run's model cards.

    ``compare_augment(config, rates=[0, 0.1], seeds=3)`` (no plan) is the plan of those rates
    and seeds on the whole training set, seeds from ``config.loop.seed``, adaptive arms if
    ``config.augment_adaptive``, without corrupted sets.

    Raises:
        ValueError: both or neither of ``plan`` and ``rates``, ``--robustness`` for token
            labelling, a cell finished with other settings, and the errors of the runs.
    """
    if (plan is None) == (rates is None):
        raise ValueError("give compare_augment a plan, or rates (and seeds), not both")
    if plan is None:
        assert rates is not None  # checked above
        plan = ComparePlan(tuple(rates), seeds, adaptive=config.augment_adaptive, first_seed=config.loop.seed)
    output = Path(config.loop.output)
    data = _load(config, plan)
    reporter.message(data.full.describe())
    reporter.message(
        f"{len(plan.train_sizes) * len(plan.arms) * plan.seeds} runs, each {config.loop.describe_limits(epochs=config.epochs)}"
    )
    cells: list[dict[str, Any]] = []
    header = _header(config, plan)
    for size in plan.train_sizes:
        for seed in plan.seed_list:
            for arm in plan.arms:
                folder = cell_folder(output, size, arm, seed)
                run = _cell_config(config, folder, arm, seed)
                record = _finished(folder, run, plan) if config.loop.resume else None
                if record is not None:
                    reporter.message(_cell_line(record, config.metric) + "; finished before, read back")
                else:
                    folder.parent.mkdir(parents=True, exist_ok=True)
                    record = _run_cell(data, run, plan, size, arm, reporter, command)
                    reporter.message(_cell_line(record, config.metric))
                cells.append(record)
                write_json(output / COMPARE_FILE, _content(header, cells, complete=False))
    write_json(output / COMPARE_FILE, _content(header, cells, complete=True))
    return write_compare_report(output)


def _header(config: FinetuneConfig, plan: ComparePlan) -> dict[str, Any]:
    return {
        "metric": config.metric if config.metric in SCORED_METRICS[config.task] else SCORED_METRICS[config.task][-1],
        "metrics": list(SCORED_METRICS[config.task]),
        "budget": config.loop.describe_limits(epochs=config.epochs),
        "baseline": BASELINE_ARM,
        "test": "paired over seeds (same training sample, corrupted texts and seed): two-sided 95% Student t interval "
        "of the per-seed differences against rate 0; within noise when it holds 0",
        "plan": plan.to_dict(),
        "config": flatten(config),
    }


def _content(header: dict[str, Any], cells: list[dict[str, Any]], *, complete: bool) -> dict[str, Any]:
    rows = summarize(cells, header["metrics"])
    return {**header, "complete": complete, "cells": cells, "summary": [row.to_dict() for row in rows]}


def _cell_line(record: dict[str, Any], metric: str) -> str:
    clean = record["scores"][CLEAN].get(metric, record["scores"][CLEAN]["accuracy"])
    return (
        f"size {record['size']}, {record['arm']}, seed {record['seed']}: clean {metric} {clean:.4f} "
        f"after {record['steps']} steps ({record['seconds']:.0f} s)"
    )
