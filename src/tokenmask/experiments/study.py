"""Which masking pays? A pre-training ablation grid on the sweep runner, every cell its own resumable run.

Each cell of the :class:`~tokenmask.experiments.study_grid.StudyGrid` is one
:func:`~tokenmask.recipes.pretrain.pretrain` run in ``OUTPUT/cells/<name>/pretrain``, with the
study's base settings, budget and seeds; only the masking differs. Every cell is scored on the
same fixed masks (``eval_masking="common"``: token-level 80/10/10 at the evaluation rate), its
own-masking score beside.

With ``--finetune DATA`` the study answers on the user's task
(:mod:`tokenmask.experiments.downstream`): every model (the starting checkpoint itself, the
baseline, and each cell's at the shares of its budget in ``--pretrain-fractions``) is
fine-tuned at each label budget x augmentation rate x fine-tuning seed, in
``OUTPUT/cells/<name>/tune/…``, and scored on the held-out set and its corrupted copies; the
paired numbers against the baseline are :mod:`tokenmask.experiments.downstream_stats`', and
the best fine-tuned model is kept in ``OUTPUT/best-model``.

The bookkeeping is the sweep runner's (:mod:`tokenmask.experiments.sweep`): ``OUTPUT/study.json``
(the plan and every cell), each cell's ``cell.json``, resume, ``jobs``. The page is
:mod:`tokenmask.experiments.study_report`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tokenmask.experiments.compare_data import CompareData
from tokenmask.experiments.compare_stats import CLEAN
from tokenmask.experiments.downstream import (
    DownstreamPlan,
    baseline_model,
    best_model,
    check_finetune_length,
    finetune_cells,
    keep_best_model,
    load_downstream_data,
    source_model,
)
from tokenmask.experiments.downstream_stats import FINETUNE
from tokenmask.experiments.plan import RUN_KEYS, Cell, Coordinates, SweepRun, plan_digest, replayable, shared_part
from tokenmask.experiments.study_grid import (
    DEFAULT_CELL_TOKENS,
    GRID_KEYS,
    TERMS,
    TERMS_FILE,
    StudyGrid,
    baseline_cells,
    cell_config,
    terms_fingerprint,
)
from tokenmask.experiments.study_report import STUDY_FILE, write_study_report
from tokenmask.experiments.study_terms import identities_with_terms, study_terms
from tokenmask.experiments.sweep import check_folder, run_sweep
from tokenmask.experiments.tuning import SCORED_METRICS, tune_and_score
from tokenmask.files import write_json
from tokenmask.recipes.config import DETECTION_SETTINGS, PretrainConfig, changed_detection_setting, pretrain_config
from tokenmask.settings import build, check, flatten, leaves, setting
from tokenmask.train.config import LoopConfig
from tokenmask.train.job import QuietReporter, Reporter

UNTRAINED = "untrained"
"""A baseline cell's folder for the untrained model of a study built from scratch."""

GROWING = (
    *(("grid", axis) for axis in ("strategies", "rates", "rate_ends", "corruptions", "seeds")),
    *(("finetune", axis) for axis in ("label_budgets", "seeds", "augment_rates")),
    ("terms",),
)
"""The axes a resumed study may change (:attr:`~tokenmask.experiments.plan.Experiment.growing`):
more seeds, budgets, strategies… Not the pre-training fractions: each pre-training cell saves
the snapshots it was planned with. The terms file's fingerprint comes and goes with the terms
cells, whose identities hold it (:attr:`~tokenmask.experiments.plan.Cell.inputs`); a resumed
study may not change it (:func:`study_terms`)."""

ADDED_LATER = DETECTION_SETTINGS
"""Pre-training settings added after studies were first recorded, with their defaults: a plan
leaves them out at those values, so a study recorded before they existed still resumes (its
cells' identities include the plan)."""

_SCORES = ("loss", "perplexity", "accuracy", "targets")
"""The fixed-mask scores a cell's result keeps (from the last evaluation of metrics.jsonl)."""


@dataclass(frozen=True)
class StudyConfig:
    """A study: the base pre-training settings every cell shares, the grid, optional fine-tuning.

    Attributes:
        base: every cell's settings but the masking (``base.loop.output`` is the study's
            folder, ``base.loop.seed`` its first seed, ``base.loop.resume`` continues it).

    Raises:
        ValueError: a base config that sets what the grid sets per cell (``strategy``…), no
            output folder, or a setting out of range.
    """

    base: PretrainConfig = setting(
        factory=lambda: PretrainConfig(loop=LoopConfig(max_tokens=DEFAULT_CELL_TOKENS)),
        help="pre-training (every cell)",
        exclude=(*GRID_KEYS, "overwrite", "snapshots"),
        reword={
            "output": "the study's folder: OUTPUT/study.json, OUTPUT/report.html, each cell's runs in OUTPUT/cells/NAME; "
            "required",
            "resume": "continue the study in OUTPUT: finished cells are kept as they are, an interrupted one continues "
            "from its newest checkpoint, the others start",
            "seed": "the first seed: each cell runs with seeds SEED .. SEED + --seeds - 1",
            "max_time": "stop each cell after this many minutes, counted across resumes",
        },
    )
    grid: StudyGrid = setting(factory=StudyGrid, help="the grid: what the cells cross")
    downstream: DownstreamPlan = setting(factory=DownstreamPlan, help="fine-tuning every model on labelled data")
    jobs: int = setting(1, help="cells run at once, each in its own process (a fine-tuning waits for its model)", ge=1)
    terms_file: str | None = setting(
        None,
        metavar="FILE",
        help="the terms the 'terms' cells select first, one per line (none = found in the pre-training corpus as "
        "tokenmask terms finds them, and written to OUTPUT/terms.txt)",
    )
    estimate: bool = setting(
        True, help="first time a few steps of each kind of run (under a minute) and say how long the study will take"
    )

    def __post_init__(self) -> None:
        check(self)
        if not self.base.loop.output:
            raise ValueError("--output is required: the folder the study writes to")
        given, default = flatten(self.base), flatten(PretrainConfig())
        for key in GRID_KEYS:
            if given[key] != default[key]:
                raise ValueError(
                    f"{key} is set per cell by the grid: leave it at its default ({default[key]}) in the base config"
                )
        terms = TERMS in self.grid.strategies
        if self.terms_file is not None and not Path(self.terms_file).is_file():
            raise ValueError(f"--terms-file {self.terms_file}: no such file")
        if terms and self.base.masking.units.mask_terms is not None:
            raise ValueError("--mask-terms applies to every cell: give the terms cells' file with --terms-file instead")
        if self.terms_file is not None and not terms:
            raise ValueError(f"--terms-file is what the '{TERMS}' cells mask first: add {TERMS} to --strategies")
        if "rtd" in self.grid.objectives:
            try:
                replace(self.base, objective="rtd")  # the checks an rtd cell's config will meet, before anything runs
            except ValueError as error:
                raise ValueError(f"--objectives rtd: {error}") from None
        elif (changed := changed_detection_setting(self.base)) is not None:
            raise ValueError(f"{changed} is a setting of replaced-token detection: add rtd to --objectives, or leave it out")
        if self.longer_finetuning is not None and not self.base.init:
            blocks = self.base.blocks.max_length
            raise ValueError(
                f"--finetune-max-length {self.longer_finetuning}: the models a study builds from --preset have positions "
                f"for --max-length {blocks} tokens; give at most {blocks}, or a longer --max-length"
            )
        loop = self.base.loop
        if self.snapshots and (loop.max_time is not None or not (loop.max_tokens or loop.max_steps)):
            raise ValueError(
                "--pretrain-fractions are shares of each cell's token or step limit: give --max-tokens or --max-steps, "
                "and no --max-time (a cell stopped by the clock would miss its snapshots)"
            )

    @property
    def output(self) -> Path:
        return Path(self.base.loop.output)

    @property
    def longer_finetuning(self) -> int | None:
        """``--finetune-max-length`` where it is longer than the pre-training blocks (None
        elsewhere): the models need positions the pre-training cells' own check does not cover."""
        longest = self.downstream.finetune_max_length if self.downstream.enabled else None
        return longest if longest is not None and longest > self.base.blocks.max_length else None

    @property
    def snapshots(self) -> tuple[float, ...]:
        """The shares of its budget at which each pre-training cell saves its model for fine-tuning (1 is its final model)."""
        return tuple(share for share in self.downstream.pretrain_fractions if share < 1.0) if self.downstream.enabled else ()

    def cells(self) -> list[Cell]:
        """The grid's cells; with fine-tuning, first the baseline (one per seed for a model built
        from scratch, one for ``--init``), and each model followed by its fine-tuning cells."""
        first = self.base.loop.seed
        sources = self.grid.cells(first)
        if TERMS in self.grid.strategies:  # the terms they mask first make their models, and their fine-tunings'
            inputs = {"terms": terms_fingerprint(self.terms_file) or ""}  # "": none yet (run_study finds them first)
            sources = [replace(c, inputs=inputs) if c.coordinates["strategy"] == TERMS else c for c in sources]
        if not self.downstream.enabled:
            return sources
        seeds = self.grid.seed_list(first)
        baselines = baseline_cells(seeds[:1] if self.base.init else seeds)
        return finetune_cells([*baselines, *sources], self.downstream, first)

    def plan(self) -> dict[str, Any]:
        """What the study trains, JSON-ready: the part of ``study.json`` a resumed study must match."""
        settings = {k: v for k, v in flatten(self.base).items() if k not in (*GRID_KEYS, *RUN_KEYS)}
        settings = {k: v for k, v in settings.items() if k not in ADDED_LATER or v != ADDED_LATER[k]}
        finetune = self.downstream.to_dict(self.base) if self.downstream.enabled else None
        plan: dict[str, Any] = {"grid": self.grid.to_dict(), "settings": settings, "finetune": finetune}
        if TERMS in self.grid.strategies:
            plan["terms"] = terms_fingerprint(self.terms_file)
        return plan

    def settings(self) -> dict[str, Any]:
        """The flat settings that replay the study (``config.yaml``): all but what each cell sets,
        and where the study ran but not how (a replay neither resumes nor overwrites unasked)."""
        return replayable(flatten(self))


def study_config(settings: Mapping[str, Any]) -> StudyConfig:
    """A study from flat settings (as on the command line or in its ``config.yaml``): the
    pre-training ones (with the recipe :func:`~tokenmask.recipes.config.pretrain_config`
    picks), the grid's and the study's own. With no limit given, each cell stops at
    :data:`~tokenmask.experiments.study_grid.DEFAULT_CELL_TOKENS` tokens.

    ``study_config({"output": "runs/study", "max_steps": 300, "rates": "0.15,0.3"})``

    Raises:
        ValueError: a setting the grid sets per cell, an unknown setting, or a value out of range.
    """
    for key in GRID_KEYS:
        if key in settings:
            raise ValueError(
                f"{key} is set per cell by the grid (--strategies, --rates, --rate-ends, --corruption, --objectives)"
            )
    sections: dict[str, dict[str, Any]] = {"base": {}, "grid": {}, "study": {}}
    where = {leaf.key: leaf.path[0] for leaf in leaves(StudyConfig)}
    for key, value in settings.items():
        section = where.get(str(key).replace("-", "_"))
        if section is None:
            raise ValueError(f"unknown setting {key!r}")
        sections[section if section in sections else "study"][key] = value
    base = sections["base"]
    if not {"max_steps", "max_tokens", "max_time"} & {str(k).replace("-", "_") for k in base}:
        base = {**base, "max_tokens": DEFAULT_CELL_TOKENS}
    return build(StudyConfig, sections["study"], StudyConfig(base=pretrain_config(base), grid=build(StudyGrid, sections["grid"])))


@dataclass(frozen=True)
class StudyExperiment:
    """The study as the sweep runner runs it (:class:`~tokenmask.experiments.plan.Experiment`)."""

    config: StudyConfig
    kind: str = "study"
    record_file: str = STUDY_FILE

    def plan(self) -> dict[str, Any]:
        return self.config.plan()

    @property
    def growing(self) -> tuple[tuple[str, ...], ...]:
        return GROWING

    def settings(self) -> dict[str, Any]:
        return self.config.settings()

    def cells(self) -> list[Cell]:
        return self.config.cells()

    def former_identities(self, record: Mapping[str, Any]) -> dict[str, set[str]]:
        """Each cell's identity when the terms fingerprint was in every cell's (tokenmask before
        cells had inputs), for each fingerprint this study's terms ever had: the record's, and
        the terms file's (the copy in OUTPUT says which, even after the record dropped them)."""
        kept = str(self.config.output / TERMS_FILE)
        candidates = (record["plan"].get("terms"), terms_fingerprint(self.config.terms_file), terms_fingerprint(kept))
        fingerprints = {terms for terms in candidates if terms is not None}
        return identities_with_terms(self.cells(), shared_part(self), fingerprints) if fingerprints else {}

    def load(self) -> CompareData | None:
        """The fine-tuning data, read and encoded once (None without ``--finetune``): bad data
        fails here, before anything is written. Pre-training cells read their corpus as a
        pre-training run does (through the block cache)."""
        downstream = self.config.downstream
        if not downstream.enabled:
            return None
        data = load_downstream_data(downstream, self.config.base)
        available = len(data.full.train)
        for budget in downstream.label_budgets:
            if budget is not None and budget > available:
                raise ValueError(
                    f"--label-budgets {budget} is more than the {available:,} training examples: give at most {available:,}, "
                    "or all"
                )
        return data

    def introduce(self, loaded: CompareData | None, finished: int) -> str:
        """The study's first lines: the grid, the budget of each cell, the common evaluation, the fine-tuning."""
        base, downstream = self.config.base, self.config.downstream
        kept = f"; {finished} finished before, kept" if finished else ""
        lines = [
            f"study: {self.config.grid.describe()}, each {base.preset if not base.init else base.init}, "
            f"{base.loop.describe_limits()}; scored on the same token-level 80/10/10 masks at "
            f"{base.eval_mlm_probability:g}{kept}"
        ]
        if loaded is not None:
            start = base.init or f"an untrained {base.preset}"
            lines += [loaded.full.describe(), f"{downstream.describe()}, beside {start} fine-tuned directly (the baseline)"]
        return "\n".join(lines)

    def forecast(self, loaded: CompareData | None, pending: Sequence[Cell], output: Path) -> str:
        """How long the pending cells will take (:func:`tokenmask.experiments.pace.forecast`; ``""`` with ``--no-estimate``)."""
        from tokenmask.experiments.pace import forecast

        return forecast(self.config, loaded, pending, output, plan=plan_digest(shared_part(self))) if self.config.estimate else ""

    def run_cell(
        self, cell: Cell, folder: Path, reporter: Reporter, *, loaded: CompareData | None, resume: bool, command: str | None
    ) -> dict[str, Any]:
        """Pre-train a cell, make the baseline's model, or fine-tune one model (``role`` finetune).

        The result: the cell's coordinates and ``role``; for a pre-trained cell ``steps``,
        ``tokens``, ``common`` (the final fixed-mask ``loss``, ``perplexity``, ``accuracy``,
        ``targets`` on the common masks), ``own`` (the same on its own masks, or None where they
        are the common ones) and ``curve`` (``step``, ``tokens``, ``loss``, ``accuracy`` at each
        evaluation); for a fine-tuning cell ``pretrain_tokens`` (of its model), ``examples``,
        ``steps``, ``seconds`` and ``scores`` (``{set: {metric: value}}``, the clean set first).
        """
        from tokenmask.recipes.pretrain import pretrain

        coordinates = cell.coordinates
        if coordinates.get("role") == FINETUNE:
            assert loaded is not None  # load() reads the data whenever the plan has fine-tuning cells
            return self._finetune(coordinates, folder, reporter, loaded, resume=resume, command=command)
        if coordinates["strategy"] is None:
            baseline_model(self.config.base, coordinates["seed"], folder / UNTRAINED)
            return {"role": "baseline", **coordinates}
        run = cell_config(self.config.base, coordinates, folder / "pretrain", resume=resume, terms=self.config.terms_file)
        run = replace(run, loop=replace(run.loop, snapshots=self.config.snapshots))
        trained = pretrain(run, reporter, command=command)
        return {"role": "pretrain", **coordinates, **_pretrain_result(folder / "pretrain", trained.steps, trained.tokens)}

    def _finetune(
        self, where: Coordinates, folder: Path, reporter: Reporter, data: CompareData, *, resume: bool, command: str | None
    ) -> dict[str, Any]:
        from tokenmask.recipes.finetune import BEST_FOLDER
        from tokenmask.train.runs import CHECKPOINTS

        base, downstream = self.config.base, self.config.downstream
        if where["fraction"] == 0.0:  # the baseline's model: --init, or the untrained model its source cell saved
            model, tokens = (
                baseline_model(base, where["pretrain_seed"], self.config.output / where["source_folder"] / UNTRAINED),
                0,
            )
        else:
            model, tokens = source_model(self.config.output, where)
        # --init itself is fine-tuned at the study's pinned commit; a cell's model is a folder
        hub = base.hub if model == base.init else replace(base.hub, revision=None)
        tuning = downstream.finetune_config(base)
        loop = replace(tuning.loop, output=str(folder), seed=where["seed"], resume=resume)
        run = replace(tuning, loop=loop, model=model, hub=hub, augment_rate=where["augment"])
        keep = ("model", BEST_FOLDER, CHECKPOINTS) if downstream.keep_models else ("model",)
        size = None if where["size"] == "all" else int(where["size"])
        scored = tune_and_score(
            run, data, reporter, size=size, corruptions=downstream.corruption_sets, keep=keep, command=command
        )
        del scored["config"]  # the plan holds every run's settings; the cell, what differs
        return {**where, "pretrain_tokens": tokens, **scored}

    def finished_line(self, result: Mapping[str, Any]) -> str:
        """``done in 3.1 min; fixed-mask accuracy 0.1234 (own masks 0.1100)`` or ``done in 0.9 min; macro_f1 0.7100``."""
        parts = [f"done in {result['minutes']:.1f} min"]
        if result.get("common"):
            own = f" (own masks {result['own']['accuracy']:.4f})" if result.get("own") else ""
            parts.append(f"fixed-mask accuracy {result['common']['accuracy']:.4f}{own}")
        if result.get("scores"):
            metric = self.primary_metric
            parts.append(f"held-out {metric} {result['scores'][CLEAN][metric]:.4f}")
        return "; ".join(parts)

    @property
    def primary_metric(self) -> str:
        """What the verdict and the best model go by: macro-F1, or entity F1 for token labelling."""
        return "span_f1" if self.config.downstream.tuning.task == "tokens" else "macro_f1"

    def summary(self, finished: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """How every cell is scored; with fine-tuning, the downstream numbers and (once every cell
        finished) the best fine-tuned model."""
        base = self.config.base
        summary: dict[str, Any] = {
            "evaluation": {
                "masking": "token-level 80/10/10",
                "mlm_probability": base.eval_mlm_probability,
                "blocks": base.eval_blocks,
            }
        }
        if not self.config.downstream.enabled:
            return summary
        from tokenmask.experiments.downstream_stats import summarize_downstream

        metrics = SCORED_METRICS[self.config.downstream.tuning.task]
        done = {cell["name"]: cell for cell in finished}  # pending cells too: which seeds the baseline has
        every = [done.get(cell.name) or {**cell.describe(), "status": "pending"} for cell in self.cells()]
        summary["downstream"] = summarize_downstream(every, metrics=metrics, primary=self.primary_metric)
        tuned = [cell for cell in finished if cell.get("role") == FINETUNE]
        if tuned and len(finished) == len(self.cells()):
            summary["best_model"] = best_model(tuned, self.primary_metric)
        return summary


def run_study(config: StudyConfig, reporter: Reporter = QuietReporter(), *, command: str | None = None) -> dict[str, Any]:
    """Train every cell not finished yet, then write ``OUTPUT/study.json`` and ``OUTPUT/report.html``;
    returns the content of ``study.json``.

    ``study.json``: ``plan`` (grid, settings, fine-tuning), ``cells`` (one result per cell in
    grid order, baselines last: :meth:`StudyExperiment.run_cell`), ``complete``. With
    ``config.base.loop.resume``, finished cells are read back as they are and the others
    continue (from their newest checkpoint, if any). ``command`` goes into the model cards.

    Raises:
        ValueError: an OUTPUT that holds another study (or a run), or ``resume`` on a study of
            another plan, or whose terms cells selected other terms; all before anything is
            written. The errors of the cells (bad input refused by the first cell of a new study
            leaves no ``study.json`` behind).
        Interrupted: SIGINT or SIGTERM (the running cells saved a checkpoint first).
    """
    from tokenmask.recipes.pretrain import pin_revision

    base, start = pin_revision(config.base)
    config = replace(config, base=base)  # every cell starts from the same Hub commit
    if start is not None and "rtd" in config.grid.objectives:
        from tokenmask.recipes.detection import check_detector_start

        check_detector_start(start)  # before any cell runs: the masked-LM cells come first
    if start is not None and config.longer_finetuning is not None:
        check_finetune_length(start, base, config.longer_finetuning)  # before any cell runs
    run = SweepRun(config.output, resume=config.base.loop.resume, jobs=config.jobs)
    record = check_folder(config.output, StudyExperiment(config), resume=run.continues)  # before terms.txt is written there
    recorded = record["plan"].get("terms") if record is not None else None
    found = None
    if TERMS in config.grid.strategies:
        path, found = study_terms(config.output, config.terms_file, recorded, config.base, reporter)
        config = replace(config, terms_file=str(path))
    try:
        study = run_sweep(StudyExperiment(config), run, reporter, command=command)
    except (ValueError, OSError):
        if found is not None and not (config.output / STUDY_FILE).exists():  # refused at its start: the next try writes it again
            found.unlink(missing_ok=True)
        raise
    if study.get("best_model"):
        held = keep_best_model(config.output, study, keep_others=config.downstream.keep_models)
        if held != study["best_model"]:
            study = {**study, "best_model": held}
            write_json(config.output / STUDY_FILE, study)
    write_study_report(config.output)
    return study


def _pretrain_result(folder: Path, steps: int, tokens: int) -> dict[str, Any]:
    from tokenmask.train.logs import read_metrics

    evaluations = [r for r in read_metrics(folder) if "eval_loss" in r]
    final = evaluations[-1]
    common = {name: final[f"eval_{name}"] for name in _SCORES}
    own = {name: final[f"eval_own_{name}"] for name in _SCORES} if "eval_own_loss" in final else None
    curve = [
        {"step": r["step"], "tokens": r["tokens"], "loss": r["eval_loss"], "accuracy": r["eval_accuracy"]} for r in evaluations
    ]
    return {"steps": steps, "tokens": tokens, "common": common, "own": own, "curve": curve}
