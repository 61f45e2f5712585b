"""Does [MASK] augmentation help? The same fine-tuning over training sizes, arms and seeds, on the sweep runner.

One cell = (training-set size, seed, arm); an arm is a fixed augmentation rate (``rate-0.1``)
or the adaptive augmentation that starts there (``adaptive-0.1``). Each cell is one
:func:`~tokenmask.recipes.finetune.finetune` run in ``OUTPUT/size-S/ARM/seed-N`` on a training
sample drawn with its seed, stratified by label (:mod:`tokenmask.labelled.subsets`), every run
with the same budget (``--max-steps`` or ``--max-time``). The final model is scored on the clean
validation set and on corrupted copies of it (:mod:`tokenmask.labelled.robustness`). The
bookkeeping is the sweep runner's (:mod:`tokenmask.experiments.sweep`): ``OUTPUT/compare.json``
(the plan, every cell, the summary of :mod:`tokenmask.experiments.compare_stats`), each cell's
``cell.json``, resume, ``jobs``; the page is :mod:`tokenmask.experiments.compare_report`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tokenmask.experiments.compare_data import CompareData, load_compare_data
from tokenmask.experiments.compare_report import COMPARE_FILE, AugmentComparison, write_compare_report
from tokenmask.experiments.compare_stats import BASELINE_ARM, CLEAN, summarize
from tokenmask.experiments.plan import RUN_KEYS, Axis, Cell, Coordinates, SweepRun, check_axis, cross, replayable
from tokenmask.experiments.sweep import run_sweep
from tokenmask.experiments.tuning import SCORED_METRICS, tune_and_score
from tokenmask.labelled.robustness import Corruption, parse_corruptions
from tokenmask.recipes.config import FinetuneConfig
from tokenmask.settings import build, check, flatten, setting
from tokenmask.train.job import QuietReporter, Reporter

_LIMITS = ("epochs", "max_steps", "max_tokens", "max_time")


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

    def coordinates(self) -> dict[str, Any]:
        return {"arm": self.name, "rate": self.rate, "adaptive": self.adaptive}


@dataclass(frozen=True)
class ComparePlan:
    """What is compared: arms × training sizes × seeds, scored on the clean and corrupted sets.

    Raises:
        ValueError: no rate or a rate outside [0, 1) or given twice, seeds below 1, no size or a
            size below 1 or given twice, adaptive arms without a rate above 0, corrupted sets
            without ``robustness`` or malformed.
    """

    rates: tuple[float, ...] = setting(
        (0.0, 0.05, 0.1, 0.2), separator=",", help="comma-separated augmentation rates; rate 0 is the baseline of the tests"
    )
    seeds: int = setting(3, help="runs per size and arm, seeds --seed, --seed + 1, …", ge=1)
    train_sizes: tuple[int | None, ...] = setting(
        (None,),
        separator=",",
        none="all",
        help="comma-separated training-set sizes, whole numbers or 'all', e.g. 100,300,1000,all",
    )
    adaptive: bool = setting(
        False,
        flag="augment_adaptive",
        help="add an arm per rate above 0 that halves its rate each time the divergence warning fires (off below 0.01)",
    )
    robustness: bool = setting(
        False,
        help="also score every run on corrupted copies of the validation set (default sets: typos in 5/10/20% of words, "
        "words deleted or replaced by the unknown token at 10/20/30%; classification only)",
    )
    corruptions: tuple[str, ...] = setting(
        (),
        metavar="KIND=RATES",
        help="the corrupted sets of --robustness instead of the defaults, KIND one of typo, delete, unk: "
        "e.g. --corruptions typo=0.1,0.2 unk=0.2",
    )
    keep_models: bool = setting(
        True,
        help="keep each run's model, best and checkpoints folders; --no-keep-models removes them once the run is scored, "
        "keeping its results, metrics and plots (minilm: ~175 MB a run)",
    )

    def __post_init__(self) -> None:
        check(self)
        check_axis("rates", self.rates, lambda r: 0.0 <= r < 1.0, "in [0, 1)")
        check_axis("train sizes", self.train_sizes, lambda n: n is None or n >= 1, "whole numbers >= 1 or 'all'")
        if self.adaptive and not any(self.rates):
            raise ValueError("adaptive augmentation starts from a rate above 0: give one in --rates")
        if self.corruptions and not self.robustness:
            raise ValueError("--corruptions chooses the sets of --robustness: give --robustness too")
        if self.robustness:
            try:
                parse_corruptions(self.corruptions)  # malformed sets are refused here, before anything runs
            except ValueError as error:
                raise ValueError(f"--corruptions: {error}") from None

    @property
    def arms(self) -> tuple[Arm, ...]:
        """The fixed rates in the order given, then the adaptive arms."""
        return tuple(Arm(r) for r in self.rates) + tuple(Arm(r, True) for r in self.rates if r > 0 and self.adaptive)

    @property
    def corruption_sets(self) -> tuple[Corruption, ...]:
        """The corrupted evaluation sets (none without ``robustness``)."""
        return parse_corruptions(self.corruptions) if self.robustness else ()

    def seed_list(self, first_seed: int) -> tuple[int, ...]:
        return tuple(range(first_seed, first_seed + self.seeds))

    def to_dict(self, first_seed: int) -> dict[str, Any]:
        return {
            "rates": list(self.rates), "seeds": list(self.seed_list(first_seed)), "adaptive": self.adaptive,
            "train_sizes": [size_name(s) for s in self.train_sizes], "arms": [a.name for a in self.arms],
            "robustness": [{"set": c.name, "kind": c.kind, "rate": c.rate} for c in self.corruption_sets],
        }  # fmt: skip


@dataclass(frozen=True)
class CompareConfig:
    """A comparison: the fine-tuning every run shares and what the runs vary.

    Attributes:
        base: every run's settings but its augmentation, seed and output (``base.loop.output``
            is the comparison's folder, ``base.loop.seed`` its first seed, ``base.loop.resume``
            continues it, ``base.loop.overwrite`` starts it afresh).

    Raises:
        ValueError: no output folder, ``--robustness`` for token labelling, a setting out of range.
    """

    base: FinetuneConfig = setting(
        factory=FinetuneConfig,
        help="fine-tuning (every run)",
        exclude=("augment_rate", "augment_adaptive"),
        reword={
            "output": "the comparison's folder: OUTPUT/compare.json, report.html and plots, each run in "
            "OUTPUT/size-S/ARM/seed-N; required",
            "resume": "continue the comparison in OUTPUT: finished runs are kept as they are, an interrupted one "
            "continues from its newest checkpoint, the others start",
            "overwrite": "run every cell again in an OUTPUT that holds a comparison",
            "seed": "the first seed: the runs of each size and arm use seeds SEED .. SEED + --seeds - 1",
            "max_time": "stop each run after this many minutes, counted across resumes (each run's length is "
            "required: --max-steps, --max-tokens, --max-time or --epochs)",
        },
    )
    plan: ComparePlan = setting(factory=ComparePlan, help="the comparison")
    jobs: int = setting(1, help="runs trained at once, each in its own process", ge=1)

    def __post_init__(self) -> None:
        check(self)
        if not self.base.loop.output:
            raise ValueError("--output is required: the folder the comparison writes to")
        if self.plan.robustness and self.base.task != "classify":
            raise ValueError(
                "--robustness corrupts the text of classification examples; for --task tokens a deleted word would "
                "have to take its tag along, which is not supported"
            )

    @property
    def output(self) -> Path:
        return Path(self.base.loop.output)

    @property
    def metric(self) -> str:
        """The metric compared: the best-checkpoint metric where every set is scored by it, else the task's last."""
        scored = SCORED_METRICS[self.base.task]
        return self.base.metric if self.base.metric in scored else scored[-1]


def compare_config(settings: Mapping[str, Any]) -> CompareConfig:
    """A comparison from flat settings (as on the command line or in its ``config.yaml``).

    ``compare_config({"output": "runs/cmp", "max_steps": 60, "rates": "0,0.1", "train_sizes": "100,all"})``

    Raises:
        ValueError: no run length given (each run would take the default 9 minutes), an
            augmentation rate given (the arms set it), an unknown setting, a value out of range.
    """
    keys = {str(key).replace("-", "_") for key in settings}
    if not set(_LIMITS) & keys:  # 9 minutes each would be a surprise
        raise ValueError("give the length of each run: --epochs, --max-steps, --max-tokens or --max-time (minutes per run)")
    if "augment_rate" in keys:
        raise ValueError("compare-augment sets the augmentation rate of each run: give them with --rates, not --augment-rate")
    return build(CompareConfig, settings)


def size_name(size: int | None) -> str:
    """``100 -> "100"``, ``None -> "all"``."""
    return "all" if size is None else str(size)


def cell_name(coordinates: Coordinates) -> str:
    """``size-100/rate-0.1/seed-0``: the cell's name and its folder under OUTPUT."""
    return f"size-{coordinates['size']}/{coordinates['arm']}/seed-{coordinates['seed']}"


@dataclass(frozen=True)
class CompareExperiment:
    """The comparison as the sweep runner runs it (:class:`~tokenmask.experiments.plan.Experiment`)."""

    config: CompareConfig
    kind: str = "comparison"
    record_file: str = COMPARE_FILE

    def plan(self) -> dict[str, Any]:
        """The plan (rates, sizes, seeds, arms, sets) and every run's settings: a resumed comparison must match."""
        settings = {k: v for k, v in flatten(self.config.base).items() if k not in RUN_KEYS}
        return {**self.config.plan.to_dict(self.config.base.loop.seed), "settings": settings}

    @property
    def growing(self) -> tuple[tuple[str, ...], ...]:
        """The axes a resumed comparison may change: rates (and so arms), sizes, seeds."""
        return (("rates",), ("adaptive",), ("arms",), ("train_sizes",), ("seeds",))

    def settings(self) -> dict[str, Any]:
        """The flat settings that replay the comparison (``config.yaml``); a replay neither resumes nor overwrites unasked."""
        return replayable(flatten(self.config))

    def cells(self) -> list[Cell]:
        """Size by size, then seed, then arm (each seed's arms side by side, for the paired tests)."""
        plan, first_seed = self.config.plan, self.config.base.loop.seed
        axes = (
            Axis("size", tuple(size_name(s) for s in plan.train_sizes)),
            Axis("seed", plan.seed_list(first_seed)),
            Axis("arm", tuple(arm.coordinates() for arm in plan.arms)),
        )
        return cross(axes, name=cell_name, folder=cell_name)

    def former_identities(self, record: Mapping[str, Any]) -> dict[str, set[str]]:
        """``{}``: a comparison's cell identities never changed."""
        return {}

    def load(self) -> CompareData:
        """The data every run draws its sample and its sets from, read and encoded once."""
        return load_compare_data(self.config.base)

    def introduce(self, loaded: CompareData, finished: int) -> str:
        """What was read, and the runs."""
        base = self.config.base
        kept = f"; {finished} finished before, kept" if finished else ""
        runs = f"comparison: {len(self.cells())} runs, each {base.loop.describe_limits(epochs=base.epochs)}{kept}"
        return f"{loaded.full.describe()}\n{runs}"

    def forecast(self, loaded: CompareData, pending: Sequence[Cell], output: Path) -> str:
        """None: each run's length is given (``--max-steps``, ``--max-time``…)."""
        return ""

    def run_cell(
        self, cell: Cell, folder: Path, reporter: Reporter, *, loaded: CompareData, resume: bool, command: str | None
    ) -> dict[str, Any]:
        """Fine-tune one cell on its training sample, score it on every set; returns its record."""
        from tokenmask.recipes.finetune import BEST_FOLDER
        from tokenmask.train.runs import CHECKPOINTS

        base, where = self.config.base, cell.coordinates
        loop = replace(base.loop, output=str(folder), seed=where["seed"], resume=resume)
        run = replace(base, loop=loop, augment_rate=where["rate"], augment_adaptive=where["adaptive"])
        size = None if where["size"] == "all" else int(where["size"])
        keep = ("model", BEST_FOLDER, CHECKPOINTS) if self.config.plan.keep_models else ()
        scored = tune_and_score(
            run, loaded, reporter, size=size, corruptions=self.config.plan.corruption_sets, keep=keep, command=command
        )
        return {**where, **scored}

    def finished_line(self, result: Mapping[str, Any]) -> str:
        """``clean macro_f1 0.7120 after 60 steps (41 s)``."""
        metric = self.config.metric
        return f"clean {metric} {result['scores'][CLEAN][metric]:.4f} after {result['steps']} steps ({result['seconds']:.0f} s)"

    def summary(self, finished: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """The metric compared, the test, and one summary row per (size, arm, set, metric)."""
        base, metrics = self.config.base, list(SCORED_METRICS[self.config.base.task])
        return {
            "metric": self.config.metric,
            "metrics": metrics,
            "budget": base.loop.describe_limits(epochs=base.epochs),
            "baseline": BASELINE_ARM,
            "test": "paired over seeds (same training sample, corrupted texts and seed): two-sided 95% Student t "
            "interval of the per-seed differences against rate 0; within noise when it holds 0",
            "config": flatten(base),
            "summary": [row.to_dict() for row in summarize(finished, metrics)],
        }


def compare_augment(
    config: CompareConfig, reporter: Reporter = QuietReporter(), *, command: str | None = None
) -> AugmentComparison:
    """Fine-tune every cell of the comparison not finished yet, then write ``OUTPUT/compare.json``,
    the plots and ``report.html``; returns the comparison.

    Every run has ``config.base``'s settings but its own ``output`` folder, ``augment_rate``,
    ``augment_adaptive``, ``seed`` and training sample. With ``config.base.loop.resume``,
    finished cells are read back and an unfinished one continues from its newest checkpoint;
    with ``overwrite``, every cell runs again. ``command`` (the command line, as typed) goes
    into each run's model cards.

    Raises:
        ValueError: an OUTPUT that holds something else, or ``resume`` on a comparison of
            another plan (the message names what differs); the errors of the runs.
    """
    from tokenmask.recipes.finetune import pin_revision

    config = replace(config, base=pin_revision(config.base)[0])  # every run starts from the same Hub commit
    loop = config.base.loop
    run = SweepRun(config.output, resume=loop.resume, overwrite=loop.overwrite, jobs=config.jobs)
    run_sweep(CompareExperiment(config), run, reporter, command=command)
    return write_compare_report(config.output)
