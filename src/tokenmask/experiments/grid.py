"""The grid of a study: its axes, the cells they cross into, what each cell is called and trains with.

Pre-training cells cross objective x strategy x rate x corruption x seed (:class:`StudyGrid`);
every model is fine-tuned at label budget x seed x augmentation x pre-training fraction (:class:`Downstream`).
``token-0.15-bert-seed0`` runs in ``cells/token-0.15-bert-seed0``, its fine-tunings in
``…/tune/fraction-1/size-100/augment-0/seed-0``. No torch here.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

from tokenmask.labelled.robustness import Corruption, parse_corruptions
from tokenmask.masking.config import COMMAND_LINE_STRATEGIES, Strategy
from tokenmask.recipes.config import DETECTION_SETTINGS, PretrainConfig
from tokenmask.settings import check, setting

CORRUPTIONS: dict[str, tuple[float, float]] = {"bert": (0.8, 0.1), "mask-only": (1.0, 0.0)}  # (mask, random) shares
GRID_KEYS = (
    "strategy", "mlm_probability", "mask_replace_prob", "random_replace_prob", "eval_masking",
    "objective", "output", "resume", "overwrite", "snapshots",
)  # fmt: skip
"""The pre-training settings each cell sets itself: a ``--pretrain-config`` file's values for them are not used."""
TERMS, NONE, BASELINE, FINETUNE = "terms", "none", "baseline", "finetune"
OBJECTIVES = ("mlm", "rtd")
DEFAULT_ROBUSTNESS = ("typo=0.1", "delete=0.2", "unk=0.2")

Coordinates = Mapping[str, Any]  # a cell's place in the grid, JSON-ready: {"strategy": "span", "rate": 0.3, "seed": 0}


@dataclass(frozen=True)
class Cell:
    """One run, in ``folder`` under OUTPUT, after the cells whose models it starts from."""

    name: str
    folder: str
    coordinates: Coordinates
    after: tuple[str, ...] = ()


def cross(axes: Sequence[tuple[str, Sequence[Any]]], spell: Callable[[Coordinates], tuple[str, str]]) -> list[Cell]:
    """Every combination, the first axis slowest: ``[("rate", (0.1, 0.2)), ("seed", (0, 1))]`` gives
    ``(0.1, 0), (0.1, 1), (0.2, 0), (0.2, 1)``; ``spell`` names each and gives its folder."""
    cells = []
    for values in itertools.product(*(values for _, values in axes)):
        coordinates = {name: value for (name, _), value in zip(axes, values)}
        cells.append(Cell(*spell(coordinates), coordinates))
    return cells


def check_axis(name: str, values: Sequence[Any], good: Callable[[Any], bool], allowed: str) -> None:
    """Refuse an empty axis, a value not ``good``, or a value given twice: ``rates must be in (0, 1]; got 2.0``."""
    if not values:
        raise ValueError(f"the grid is empty: give at least one value for {name}")
    if bad := [value for value in values if not good(value)]:
        raise ValueError(f"{name} must be {allowed}; got {bad[0]!r}")
    if len(set(values)) != len(values):
        raise ValueError(f"{name}: each value once, please; got {', '.join(map(str, values))}")


@dataclass(frozen=True)
class StudyGrid:
    """What the pre-training cells cross; the defaults take about 30 minutes on 2 CPU cores."""

    strategies: tuple[str, ...] = setting(
        ("token", "whole_word", "span", "pmi"),
        separator=",",
        help="comma-separated masking strategies; terms = whole words with the domain's terms first; none = no "
        "pre-training, only the starting model is fine-tuned",
    )
    rates: tuple[float, ...] = setting((0.15, 0.3), separator=",", help="comma-separated masking rates")
    corruptions: tuple[str, ...] = setting(
        ("bert",), separator=",", help="comma-separated: bert (80/10/10), mask-only (every target [MASK])"
    )
    pretrain_seeds: int = setting(
        1, help="pre-training runs per grid point, seeds SEED, SEED + 1, … (SEED: the pre-training settings')", ge=1
    )
    objectives: tuple[str, ...] = setting(
        ("mlm",), separator=",", help="comma-separated: mlm (masked LM), rtd (replaced-token detection, ELECTRA)"
    )

    def __post_init__(self) -> None:
        check(self)
        check_axis("objectives", self.objectives, lambda o: o in OBJECTIVES, f"one of {', '.join(OBJECTIVES)}")
        allowed = (*COMMAND_LINE_STRATEGIES, TERMS, NONE)
        check_axis("strategies", self.strategies, lambda s: s in allowed, f"one of {', '.join(allowed)}")
        if NONE in self.strategies and len(self.strategies) > 1:
            raise ValueError(f"--strategies: '{NONE}' stands alone; got {','.join(self.strategies)}")
        check_axis("rates", self.rates, lambda r: 0.0 < r <= 1.0, "in (0, 1]")
        check_axis("corruptions", self.corruptions, lambda c: c in CORRUPTIONS, f"one of {', '.join(CORRUPTIONS)}")

    def seed_list(self, first: int) -> tuple[int, ...]:
        return tuple(range(first, first + self.pretrain_seeds))

    def cells(self, first_seed: int) -> list[Cell]:
        """Every pre-training cell, objective by objective, then strategy, rate, corruption and seed
        (every axis a coordinate, even of one value, so that a resumed study may grow any of them)."""
        if self.strategies == (NONE,):
            return []
        axes = [("objective", self.objectives), ("strategy", self.strategies), ("rate", self.rates)]
        return cross([*axes, ("corruption", self.corruptions), ("seed", self.seed_list(first_seed))], _source_names)

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}


def baseline_cells(seeds: Sequence[int]) -> list[Cell]:
    """The starting model's cells, one per seed: ``baseline-seed0``, …"""
    return cross([("strategy", (None,)), ("seed", tuple(seeds))], _source_names)


def point(c: Coordinates) -> str:
    """The grid point, the same for every seed: ``span-0.3-bert``, ``rtd-span-0.3to0.15-bert`` or ``baseline``."""
    if c["strategy"] is None:
        return BASELINE
    objective = "rtd-" if c.get("objective") == "rtd" else ""
    return f"{objective}{c['strategy']}-{c['rate']:g}-{c['corruption']}"


def _source_names(c: Coordinates) -> tuple[str, str]:
    name = f"{point(c)}-seed{c['seed']}"
    return name, f"cells/{name}"


def augment_arm(label: str) -> tuple[float, bool]:
    """An augmentation value as (rate, adaptive): ``"0.1" -> (0.1, False)``, ``"adaptive-0.1" -> (0.1, True)``."""
    adaptive = label.startswith("adaptive-")
    try:
        rate = float(label.removeprefix("adaptive-"))
    except ValueError:
        rate = -1.0
    if not (0.0 < rate < 1.0 if adaptive else 0.0 <= rate < 1.0):
        raise ValueError(f"--augment-rates: {label!r} is neither a rate in [0, 1) nor adaptive-RATE with a rate in (0, 1)")
    return rate, adaptive


@dataclass(frozen=True)
class Downstream:
    """What every model is fine-tuned on, and what the fine-tunings vary."""

    finetune: tuple[str, ...] = setting(
        (), separator=",", metavar="DATA", help="labelled data every model is fine-tuned on; builtin = Rotten Tomatoes"
    )
    finetune_eval: tuple[str, ...] = setting(
        (), separator=",", metavar="DATA", help="held-out data every fine-tuned model is scored on (none = a share of --finetune)"
    )
    label_budgets: tuple[int | None, ...] = setting(
        (None,), separator=",", none="all", help="training-set sizes, stratified and nested, e.g. 100,300,all"
    )
    finetune_seeds: int = setting(3, help="fine-tunings of each model, budget and augmentation (2+ give intervals)", ge=1)
    augment_rates: tuple[str, ...] = setting(
        ("0",), separator=",", help="[MASK] augmentation while fine-tuning: rates, and adaptive-RATE (halved on divergence)"
    )
    pretrain_fractions: tuple[float, ...] = setting(
        (1.0,), separator=",", help="fine-tune each pre-training cell's model at these shares of its budget, e.g. 0.25,0.5,1"
    )
    robustness_sets: tuple[str, ...] = setting(
        DEFAULT_ROBUSTNESS, metavar="KIND=RATES", help="corrupted held-out sets also scored (typo, delete, unk); none = none"
    )

    def __post_init__(self) -> None:
        check(self)
        check_axis("label budgets", self.label_budgets, lambda n: n is None or n >= 1, "whole numbers >= 1 or 'all'")
        check_axis("augmentation rates", [augment_label(a) for a in self.augment_rates], lambda a: True, "")
        check_axis("pre-training fractions", self.pretrain_fractions, lambda f: 0.0 < f <= 1.0, "in (0, 1]")
        if "builtin" in self.finetune and len(self.finetune) > 1:
            raise ValueError(f"--finetune: 'builtin' stands alone; got {','.join(self.finetune)}")
        try:
            self.robustness()  # malformed sets are refused here, before anything runs
        except ValueError as error:
            raise ValueError(f"--robustness-sets: {error}") from None
        if self.finetune_eval and not self.finetune:
            raise ValueError("--finetune-eval scores the fine-tuned models: give --finetune DATA too")

    @property
    def enabled(self) -> bool:
        return bool(self.finetune)

    def robustness(self, task: str = "classify") -> tuple[Corruption, ...]:
        """The corrupted held-out sets: none for ``--robustness-sets none``, or to label tokens (a
        deleted word would have to take its tag along)."""
        return () if self.robustness_sets in ((), (NONE,)) or task != "classify" else parse_corruptions(self.robustness_sets)

    def to_dict(self, first_seed: int) -> dict[str, Any]:
        return {
            "label_budgets": ["all" if n is None else str(n) for n in self.label_budgets],
            "seeds": list(range(first_seed, first_seed + self.finetune_seeds)),
            "augment_rates": [augment_label(a) for a in self.augment_rates],
            "pretrain_fractions": list(self.pretrain_fractions),
        }

    def cells(self, sources: Sequence[Cell], first_seed: int) -> list[Cell]:
        """Each source cell followed by its fine-tunings (budget, then seed, augmentation, fraction),
        each after its source; the starting model's at fraction 0."""
        plan = self.to_dict(first_seed)
        cells: list[Cell] = []
        for source in sources:
            fractions = (0.0,) if source.coordinates["strategy"] is None else self.pretrain_fractions
            axes = [("size", plan["label_budgets"]), ("seed", plan["seeds"]), ("augment", plan["augment_rates"]),
                    ("fraction", fractions)]  # fmt: skip
            origin = {k: v for k, v in source.coordinates.items() if k != "seed"}
            origin |= {"role": FINETUNE, "point": point(source.coordinates), "pretrain_seed": source.coordinates["seed"],
                       "source": source.name, "source_folder": source.folder}  # fmt: skip
            tuned = cross(axes, functools.partial(_tune_names, source))
            cells += [source, *(replace(c, coordinates={**origin, **c.coordinates}, after=(source.name,)) for c in tuned)]
        return cells


def augment_label(value: str) -> str:
    """``"0.10" -> "0.1"``, ``"adaptive-0.10" -> "adaptive-0.1"``: how the record spells an augmentation value."""
    rate, adaptive = augment_arm(str(value))
    return f"adaptive-{rate:g}" if adaptive else f"{rate:g}"


def _tune_names(source: Cell, c: Coordinates) -> tuple[str, str]:
    where = f"fraction-{c['fraction']:g}/size-{c['size']}/augment-{c['augment']}"
    return f"{source.name}/{where}/tune-seed-{c['seed']}", f"{source.folder}/tune/{where}/seed-{c['seed']}"


def cell_config(base: PretrainConfig, c: Coordinates, output: Path, *, resume: bool, terms: str | None) -> PretrainConfig:
    """``base`` with a pre-training cell's objective, masking, seed and output,
    scored on the common masks; a terms cell masks whole words with ``terms`` (a file) first."""
    own, kept = ("whole_word", terms) if c["strategy"] == TERMS else (c["strategy"], base.masking.units.mask_terms)
    units = replace(base.masking.units, strategy=cast(Strategy, own), mask_terms=kept)
    mask, random = CORRUPTIONS[c["corruption"]]
    selection = replace(base.masking.selection, mlm_probability=c["rate"])
    corruption = replace(base.masking.corruption, mask_replace_prob=mask, random_replace_prob=random)
    masking = replace(base.masking, units=units, selection=selection, corruption=corruption)
    loop = replace(base.loop, output=str(output), seed=c["seed"], resume=resume, overwrite=False)
    cell = replace(base, masking=masking, eval_masking="common", loop=loop)
    if c.get("objective") == "rtd":
        return replace(cell, objective="rtd")
    return replace(cell, objective="mlm", **DETECTION_SETTINGS)  # type: ignore[arg-type]
