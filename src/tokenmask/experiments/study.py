"""Which masking pays, on your task: a grid of pre-training runs and fine-tunings, each cell its own resumable run.

A pre-training cell is a :func:`~tokenmask.recipes.pretrain.pretrain` run with the settings of
``--pretrain-config``, its masking and seed its own, scored on the same fixed masks as every cell.
With ``--finetune DATA``, every model, the starting one (the *baseline*) too, is fine-tuned with the
settings of ``--finetune-config`` at each label budget x augmentation x seed, and compared with
paired intervals. ``--strategies none`` fine-tunes the starting model alone.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tokenmask.experiments.grid import (
    DEFAULT_ROBUSTNESS,
    FINETUNE,
    GRID_KEYS,
    NONE,
    TERMS,
    Cell,
    Downstream,
    StudyGrid,
    augment_arm,
    baseline_cells,
    cell_config,
)
from tokenmask.experiments.runner import RECORD, SETTINGS, check_folder, finished, run_cells, write_record
from tokenmask.experiments.stats import CLEAN, SCORED, best_cell, summarize
from tokenmask.recipes.config import FINETUNE_LOOP, FinetuneConfig, PretrainConfig, changed_detection_setting, pretrain_config
from tokenmask.settings import build, check, flatten, read_settings_file, setting
from tokenmask.train.config import LoopConfig
from tokenmask.train.job import QuietReporter, Reporter

FINETUNE_STEPS, DEFAULT_CELL_TOKENS, BEST_MODEL = 150, 1_000_000, "best-model"
"""Budgets when the recipes' settings give none (the default grid: about 30 min on 2 cores); --keep-best's folder."""
OFFERED = ("corpus", "init", "revision", "max_tokens")  # the pre-training settings a study takes as flags too
PER_TUNING = ("model", "output", "augment_rate", "augment_adaptive", "resume", "overwrite", "data", "eval_data")
"""The fine-tuning settings the study sets for each cell: a ``--finetune-config`` file's values for them are not used."""
GROWING = (*(("grid", axis) for axis in ("strategies", "rates", "corruptions", "pretrain_seeds", "objectives")),
           *(("finetune", axis) for axis in ("label_budgets", "seeds", "augment_rates")), ("terms",))  # fmt: skip
"""The axes a resumed study may grow. Not the pre-training fractions: each cell saves the snapshots it was planned with."""


@dataclass(frozen=True)
class StudyConfig:
    """A study: the grid, the fine-tuning axes, and the two recipes' settings every cell shares.
    Settings out of range or that contradict each other raise ValueError naming them."""

    output: str = setting("", help="the study's folder: OUTPUT/study.json, OUTPUT/report.html, each cell in OUTPUT/cells/NAME")
    grid: StudyGrid = setting(factory=StudyGrid, help="the grid")
    downstream: Downstream = setting(factory=Downstream, help="fine-tuning every model on labelled data")
    base: PretrainConfig = setting(
        factory=lambda: PretrainConfig(loop=LoopConfig(max_tokens=DEFAULT_CELL_TOKENS)), help="pre-training", only=OFFERED,
        reword={"init": "the checkpoint every cell starts from, the baseline: a folder, minilm or a Hub id ORG/NAME",
                "max_tokens": "training tokens of each pre-training cell (the default when its settings give no limit)"},
    )  # fmt: skip
    tuning: FinetuneConfig = setting(
        factory=lambda: FinetuneConfig(loop=replace(FINETUNE_LOOP, max_steps=FINETUNE_STEPS)), help="fine-tuning", only=("task",)
    )
    pretrain_config: str | None = setting(
        None, metavar="FILE", help="YAML of every pre-training cell's settings (a pretrain run's OUTPUT/config.yaml is one)"
    )
    finetune_config: str | None = setting(
        None, metavar="FILE", help="YAML of every fine-tuning's settings (a finetune run's OUTPUT/config.yaml is one)"
    )
    terms_file: str | None = setting(
        None, metavar="FILE", help="the terms the terms cells select first (none = found in the corpus, kept in OUTPUT/terms.txt)"
    )
    jobs: int = setting(1, help="processes running cells at once", ge=1)
    resume: bool = setting(False, help="continue the study in OUTPUT: finished cells are kept, the others continue")
    keep_best: bool = setting(False, help="copy the best fine-tuned model to OUTPUT/best-model at the end")
    keep_models: bool = setting(False, help="keep every fine-tuned model (by default removed once the study completes)")

    def __post_init__(self) -> None:
        check(self)
        if not self.output:
            raise ValueError("--output is required: the folder the study writes to")
        if self.grid.strategies == (NONE,) and not self.downstream.enabled:
            raise ValueError("--strategies none pre-trains nothing: give --finetune DATA to fine-tune the starting model")
        if self.terms_file is not None and not Path(self.terms_file).is_file():
            raise ValueError(f"--terms-file {self.terms_file}: no such file")
        if self.terms_file is not None and TERMS not in self.grid.strategies:
            raise ValueError(f"--terms-file is what the '{TERMS}' cells mask first: add {TERMS} to --strategies")
        if "rtd" in self.grid.objectives:
            try:
                replace(self.base, objective="rtd")  # the checks an rtd cell's config will meet, before anything runs
            except ValueError as error:
                raise ValueError(f"--objectives rtd: {error}") from None
        elif (changed := changed_detection_setting(self.base)) is not None:
            raise ValueError(f"{changed} is a setting of replaced-token detection: add rtd to --objectives, or leave it out")
        loop = self.base.loop
        if self.snapshots and (loop.max_time is not None or not (loop.max_tokens or loop.max_steps)):
            raise ValueError("--pretrain-fractions are shares of each cell's token or step limit: give max_tokens or "
                             "max_steps, and no max_time (a cell stopped by the clock would miss its snapshots)")  # fmt: skip
        if self.downstream.enabled and self.tuning.loop.max_steps is None:
            raise ValueError("the study's fine-tunings need max_steps (one evaluation at the end): set it in --finetune-config")
        if self.tuning.task != "classify" and self.downstream.robustness_sets not in (DEFAULT_ROBUSTNESS, (NONE,)):
            raise ValueError("--robustness-sets corrupt the text of classification examples, not of tagged words")

    @property
    def snapshots(self) -> tuple[float, ...]:
        """The shares of its budget at which each pre-training cell saves its model for fine-tuning."""
        return tuple(f for f in self.downstream.pretrain_fractions if f < 1.0) if self.downstream.enabled else ()


def study_config(settings: Mapping[str, Any]) -> StudyConfig:
    """A study from flat settings (the command line's, or its replayed ``config.yaml``): the recipes'
    settings from their files, the offered ones (corpus, init, max tokens) on top; ValueError names a bad one."""
    given: dict[str, Any] = {str(key).replace("-", "_"): value for key, value in settings.items()}
    offered: dict[str, Any] = {key: given.pop(key) for key in OFFERED if key in given}
    pretraining: dict[str, Any] = {**_read(given.get("pretrain_config")), **offered}
    pretraining = {k: v for k, v in pretraining.items() if k not in GRID_KEYS}
    if all(pretraining.get(limit) is None for limit in ("max_steps", "max_tokens", "max_time")):
        pretraining["max_tokens"] = DEFAULT_CELL_TOKENS
    base = pretrain_config(pretraining)
    tuned = {"max_steps": FINETUNE_STEPS, "max_length": base.blocks.max_length, **_read(given.get("finetune_config"))}
    tuned |= {"task": given.pop("task")} if given.get("task") is not None else {}  # --task over the file's
    tuning = build(FinetuneConfig, {k: v for k, v in tuned.items() if k not in PER_TUNING})
    study = build(StudyConfig, {"output": "unset", **given})  # the defaults' base and tuning, replaced next
    return replace(study, output=str(given.get("output", "")), base=base, tuning=tuning)


def _read(path: str | None) -> dict[str, Any]:
    return {str(k).replace("-", "_"): v for k, v in read_settings_file(path).items()} if path else {}


@dataclass(frozen=True)
class StudyRun:
    """The study as the runner runs it (:class:`~tokenmask.experiments.runner.Study`)."""

    config: StudyConfig
    growing: tuple[tuple[str, ...], ...] = GROWING

    def plan(self) -> dict[str, Any]:
        """What the study trains, JSON-ready: a resumed study must have the same, but for its growing axes."""
        config = self.config
        plan: dict[str, Any] = {
            "grid": config.grid.to_dict(),
            "pretrain": {k: v for k, v in flatten(config.base).items() if k not in GRID_KEYS},
            "finetune": None,
        }
        if config.downstream.enabled:
            tuned = {k: v for k, v in flatten(self.tuning()).items() if k not in PER_TUNING}
            sets = [c.name for c in config.downstream.robustness(config.tuning.task)]
            plan["finetune"] = {**config.downstream.to_dict(config.tuning.loop.seed), "robustness_sets": sets, "settings": tuned}
        if TERMS in config.grid.strategies:
            plan["terms"] = _fingerprint(config.terms_file)
        return plan

    def cells(self) -> list[Cell]:
        """The grid's cells; with fine-tuning, the baseline first (one per seed for a model built from
        scratch, one for ``init``), each model followed by its fine-tunings."""
        config, first = self.config, self.config.base.loop.seed
        terms = {"terms": _fingerprint(config.terms_file)}  # in the terms cells' identity, and their fine-tunings'
        sources = [replace(c, coordinates={**c.coordinates, **terms}) if c.coordinates["strategy"] == TERMS else c
                   for c in config.grid.cells(first)]  # fmt: skip
        if not config.downstream.enabled:
            return sources
        seeds = config.grid.seed_list(first)
        return config.downstream.cells([*baseline_cells(seeds[:1] if config.base.init else seeds), *sources],
                                       config.tuning.loop.seed)  # fmt: skip

    def tuning(self) -> FinetuneConfig:
        """Every fine-tuning's settings but model, output, seed and augmentation: evaluated once, at the
        end (the score compared), a checkpoint every third of the run (a killed study resumes there)."""
        config, tuning = self.config, self.config.tuning
        steps = int(tuning.loop.max_steps or 1)
        save = max(1, steps // 3) if tuning.loop.max_time is None else min(max(1, steps // 3), 50)
        loop = replace(tuning.loop, eval_every=steps, eval_at_start=False, save_every=save, keep_last=1, report_to="none")
        data = () if config.downstream.finetune == ("builtin",) else config.downstream.finetune
        return replace(tuning, loop=loop, data=data, eval_data=config.downstream.finetune_eval, hub=config.base.hub)

    def load(self) -> Any:
        """The fine-tuning data, read and encoded once per process (None without ``--finetune``)."""
        if not self.config.downstream.enabled:
            return None
        from tokenmask.experiments.tuning import load_tuning_data
        from tokenmask.train.models import paired_tokenizer

        base = self.config.base
        data = load_tuning_data(self.tuning(), paired_tokenizer(base.init, base.tokenizer, hub=base.hub))
        available = len(data.full.train)
        for budget in self.config.downstream.label_budgets:
            if budget is not None and budget > available:
                raise ValueError(f"--label-budgets {budget} is more than the {available:,} training examples: give fewer, or all")
        return data

    def run_cell(self, cell: Cell, folder: Path, reporter: Reporter, *, loaded: Any) -> dict[str, Any]:
        """Pre-train a cell, save the baseline's model, or fine-tune one model, from its checkpoint if it
        has one (a folder only this study writes to, under its plan); returns its result."""
        from tokenmask.recipes.pretrain import pretrain

        c, config = dict(cell.coordinates), self.config
        if c.get("role") == FINETUNE:
            return self._finetune(c, folder, reporter, loaded)
        if c["strategy"] is None:
            self._start(c["seed"], folder / "untrained")
            return {"role": "baseline", **c}
        run = cell_config(config.base, c, folder / "pretrain", resume=True, terms=config.terms_file)
        trained = pretrain(replace(run, loop=replace(run.loop, snapshots=config.snapshots)), reporter)
        return {"role": "pretrain", **c, **_pretrain_result(folder / "pretrain", trained.steps, trained.tokens)}

    def _finetune(self, c: dict[str, Any], folder: Path, reporter: Reporter, data: Any) -> dict[str, Any]:
        from tokenmask.experiments.tuning import source_model, tune_and_score

        base = self.config.base
        if c["fraction"] == 0.0:
            model, tokens = self._start(c["pretrain_seed"], Path(self.config.output, c["source_folder"], "untrained")), 0
        else:
            model, tokens = source_model(Path(self.config.output), c)
        hub = base.hub if model == base.init else replace(base.hub, revision=None)  # --init at the pinned commit
        rate, adaptive = augment_arm(c["augment"])
        tuning = self.tuning()
        run = replace(tuning, loop=replace(tuning.loop, output=str(folder), seed=c["seed"], resume=True), model=model,
                      hub=hub, augment_rate=rate, augment_adaptive=adaptive)  # fmt: skip
        size = None if c["size"] == "all" else int(c["size"])
        corruptions = self.config.downstream.robustness(tuning.task)
        scored = tune_and_score(run, data, reporter, size=size, corruptions=corruptions, keep_checkpoints=self.config.keep_models)
        return {**c, "pretrain_tokens": tokens, **scored}

    def _start(self, seed: int, folder: Path) -> str:
        """The model the study starts from: ``init``, or the untrained preset model of the cells of ``seed``."""
        from tokenmask.recipes.pretrain import save_untrained_model

        base = self.config.base
        return base.init or str(save_untrained_model(replace(base, loop=replace(base.loop, seed=seed)), folder))

    def guess_minutes(self, cell: Cell) -> float:
        """A rough guess at 2-core CPU speeds of the presets (the runner scales it by the finished cells)."""
        c, base, tuned = cell.coordinates, self.config.base.loop, self.config.tuning.loop
        if c.get("role") == FINETUNE:
            return (tuned.max_steps or 150) * tuned.batch_size / 8000 + 0.1  # 64-token examples at ~8.5k tokens/s
        tokens = base.max_tokens or (base.max_steps or 1000) * base.batch_size * self.config.base.blocks.max_length
        return 0.05 if c["strategy"] is None else tokens * (1 + c["rate"]) / 360_000  # ~6k tokens/s

    def finished_line(self, result: Mapping[str, Any]) -> str:
        """``done in 3.1 min; fixed-mask accuracy 0.1234`` or ``done in 0.9 min; held-out macro_f1 0.7100``."""
        metric, scores = SCORED[self.config.tuning.task][-1], result.get("scores")
        score = f"; fixed-mask accuracy {result['common']['accuracy']:.4f}" if result.get("common") else ""
        score += f"; held-out {metric} {scores[CLEAN][metric]:.4f}" if scores else ""
        return f"done in {result['minutes']:.1f} min{score}"

    def summary(self, cells: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """How the pre-training cells are scored; with fine-tuning, the paired numbers and the best fine-tuned model."""
        base, metrics = self.config.base, SCORED[self.config.tuning.task]
        found: dict[str, Any] = {"evaluation": {"masking": "token-level 80/10/10", "mlm_probability": base.eval_mlm_probability,
                                "blocks": base.eval_blocks}} if self.config.grid.strategies != (NONE,) else {}  # fmt: skip
        if self.config.downstream.enabled:
            found |= {"downstream": summarize(cells, metrics=metrics), "best": best_cell(cells, metrics[-1])}
        return found


def run_study(config: StudyConfig, reporter: Reporter = QuietReporter()) -> dict[str, Any]:
    """Run every cell not finished yet, then write ``OUTPUT/study.json`` and ``OUTPUT/report.html``; returns the record.

    Raises:
        ValueError: an OUTPUT that holds something else, or a resumed study of another plan (before
            anything is written); a cell's error (a new study refused at its start leaves no record).
        Interrupted: SIGINT or SIGTERM (a cell stopped while training saved a checkpoint).
    """
    from tokenmask.experiments.report import write_study_report
    from tokenmask.recipes.pretrain import pin_revision
    from tokenmask.train.runs import write_settings

    base, start = pin_revision(config.base)
    config = replace(config, base=base)  # every cell starts from the same Hub commit
    if start is not None and "rtd" in config.grid.objectives:
        from tokenmask.recipes.detection import check_detector_start

        check_detector_start(start)
    output = Path(config.output)
    record = check_folder(output, StudyRun(config), resume=config.resume)
    if TERMS in config.grid.strategies:
        config = replace(config, terms_file=_terms(config, reporter))
    study = StudyRun(config)
    terms = (record["plan"].get("terms") if record else None, study.plan().get("terms"))
    if None not in terms and terms[0] != terms[1]:  # the terms cells' identities would refuse it later, unnamed
        raise ValueError(f"--resume: the terms cells of {output} selected other terms: give their --terms-file again")
    reporter.message(f"study: {len(study.cells())} cells in {output}")
    write_record(output, study)
    recipes = {
        "pretrain_config": (output / "pretrain.yaml", config.base),
        "finetune_config": (output / "finetune.yaml", config.tuning),
    }
    for path, recipe in recipes.values():  # the replay reads its own copies: the files given may change or move
        write_settings(path, flatten(recipe))
    replay = {k: v for k, v in flatten(config).items() if k != "resume"} | {k: str(p.resolve()) for k, (p, _) in recipes.items()}
    write_settings(output / SETTINGS, replay)
    try:
        run_cells(study, output, reporter, jobs=config.jobs)
    except (ValueError, OSError):
        if record is None and not finished(output, study, study.cells()):  # bad input: the next try starts afresh
            for name in (RECORD, SETTINGS, "pretrain.yaml", "finetune.yaml"):
                (output / name).unlink(missing_ok=True)
            shutil.rmtree(output / "cells", ignore_errors=True)
        raise
    record = write_record(output, study)
    if record["complete"] and config.downstream.enabled:
        _keep_models(config, record, reporter)
    write_study_report(output)
    return record


def _keep_models(config: StudyConfig, record: Mapping[str, Any], reporter: Reporter) -> None:
    """Copy the best fine-tuned model to OUTPUT/best-model (``keep_best``), then remove the others (unless ``keep_models``)."""
    output = Path(config.output)
    tuned = {c["name"]: output / c["folder"] for c in record["cells"] if c.get("role") == FINETUNE}
    best = record.get("best")
    if config.keep_best and best:
        model = tuned[best["name"]] / "model"
        if model.is_dir():
            shutil.rmtree(output / BEST_MODEL, ignore_errors=True)
            shutil.copytree(model, output / BEST_MODEL)
        elif not (output / BEST_MODEL).is_dir():
            reporter.message(f"warning: the best model, of cell {best['name']}, was removed when the study first completed")
    if not config.keep_models:
        for folder in tuned.values():
            shutil.rmtree(folder / "model", ignore_errors=True)


def _terms(config: StudyConfig, reporter: Reporter) -> str:
    """The terms cells' file: ``--terms-file``, or ``OUTPUT/terms.txt``, found in the corpus the first time."""
    kept = Path(config.output) / "terms.txt"
    if config.terms_file is None and not kept.exists():
        from tokenmask.text.terms import TermsConfig, find_terms

        table = find_terms(TermsConfig(corpus=config.base.corpus, reading=config.base.reading, output=str(kept)))
        if not table.entries:
            raise ValueError(f"no domain term found in the corpus for the '{TERMS}' cells: give them a file with --terms-file")
        kept.parent.mkdir(parents=True, exist_ok=True)
        table.write(kept)
        reporter.message(f"terms: {len(table.entries)} found in the corpus ({', '.join(e.text for e in table.entries[:8])}, …)")
    return config.terms_file or str(kept)


def _fingerprint(path: str | None) -> str | None:
    """A hash of the terms file's content (not its path: a study resumed from elsewhere matches); None for none."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16] if path and Path(path).is_file() else None


def _pretrain_result(folder: Path, steps: int, tokens: int) -> dict[str, Any]:
    """A pre-training cell's final fixed-mask scores (common masks, and its own where they differ) and its curve."""
    from tokenmask.train.logs import read_metrics

    evaluations = [r for r in read_metrics(folder) if "eval_loss" in r]
    final, names = evaluations[-1], ("loss", "perplexity", "accuracy", "targets")
    own = {n: final[f"eval_own_{n}"] for n in names} if "eval_own_loss" in final else None
    curve = [{"step": r["step"], "tokens": r["tokens"], **{k: r[f"eval_{k}"] for k in ("loss", "accuracy")}} for r in evaluations]
    return {"steps": steps, "tokens": tokens, "common": {n: final[f"eval_{n}"] for n in names}, "own": own, "curve": curve}
