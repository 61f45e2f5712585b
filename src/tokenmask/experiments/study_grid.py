"""The grid of a pre-training study: which masking each cell trains with, and what each cell is called.

A :class:`StudyGrid` crosses objectives x strategies x masking rates x rate schedules x corruptions, and each
point runs once per seed: ``StudyGrid(("token", "span"), (0.15, 0.3)).cells(first_seed=0)`` gives
the four cells ``token-0.15-bert-seed0, token-0.3-bert-seed0, span-0.15-bert-seed0,
span-0.3-bert-seed0``; each axis is declared once, as a setting (its flag, help and YAML key)
and as an :class:`~tokenmask.experiments.sweep.Axis` of the sweep. :func:`cell_config` turns a
base :class:`PretrainConfig` into a cell's own: only the masking, the rate schedule, the seed,
the output folder, the objective and the common evaluation differ between cells. No torch here: the command
line validates a grid before anything loads.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

from tokenmask.experiments.plan import Axis, Cell, Coordinates, check_axis, cross
from tokenmask.masking.config import COMMAND_LINE_STRATEGIES, Strategy
from tokenmask.recipes.config import DETECTION_SETTINGS, PretrainConfig
from tokenmask.settings import check, setting
from tokenmask.train.job import Reporter

CORRUPTIONS: dict[str, tuple[float, float]] = {"bert": (0.8, 0.1), "mask-only": (1.0, 0.0)}
"""Corruption name -> (``mask_replace_prob``, ``random_replace_prob``): ``bert`` is 80/10/10,
``mask-only`` replaces every target by the mask token."""

GRID_KEYS = (
    "strategy", "mlm_probability", "mlm_probability_end", "mask_replace_prob", "random_replace_prob", "eval_masking", "objective",
)  # fmt: skip
"""The pre-training settings each cell sets itself; a study's base config leaves them at their defaults."""

TERMS = "terms"
"""The grid's strategy that masks the study's domain terms first (whole words for the rest of the rate):
``whole_word`` with ``mask_terms`` set to the study's terms file."""

TERMS_FILE = "terms.txt"
"""OUTPUT/terms.txt: the terms a study's :data:`TERMS` cells select first (found in its corpus, or
a copy of the file given)."""

OBJECTIVES = ("mlm", "rtd")
"""The pre-training objectives a grid may cross: masked LM, replaced-token detection (ELECTRA)."""

BASELINE = "baseline"
"""The grid point of the cells that fine-tune the untrained model (``baseline-seed0``, …)."""


@dataclass(frozen=True)
class StudyGrid:
    """What the study crosses: every strategy x rate x rate end x corruption, each at ``seeds`` seeds.

    The defaults are the built-in study: 4 strategies x 2 rates x 80/10/10, one seed; with
    :data:`DEFAULT_CELL_TOKENS` each, about 30 minutes on 2 CPU cores. ``ngram`` (close to
    ``span``) is left to ``--strategies`` to keep the default within that time.

    Raises:
        ValueError: an empty axis, an unknown strategy or corruption, a rate outside (0, 1], a
            value given twice, or fewer than one seed; the message names the axis.
    """

    strategies: tuple[str, ...] = setting(
        ("token", "whole_word", "span", "pmi"),
        separator=",",
        help="comma-separated masking strategies; 'terms' = whole words, with the domain's terms (--terms-file, or "
        "found in the corpus as tokenmask terms finds them) selected first",
    )
    rates: tuple[float, ...] = setting((0.15, 0.3), separator=",", help="comma-separated masking rates")
    corruptions: tuple[str, ...] = setting(
        ("bert",), flag="corruption", separator=",", help="comma-separated: bert (80/10/10), mask-only (every target [MASK])"
    )
    rate_ends: tuple[float | None, ...] = setting(
        (None,),
        separator=",",
        help="comma-separated rate-schedule ends: none = constant rate, a number = linearly from the cell's rate to it",
    )
    seeds: int = setting(1, help="runs per cell, seeds --seed, --seed + 1, …", ge=1)
    objectives: tuple[str, ...] = setting(
        ("mlm",),
        separator=",",
        help="comma-separated pre-training objectives: mlm (masked LM), rtd (replaced-token detection, ELECTRA: "
        "a modernbert or electra preset); each strategy x rate is trained with each",
    )

    def __post_init__(self) -> None:
        check(self)
        check_axis("objectives", self.objectives, lambda o: o in OBJECTIVES, f"one of {', '.join(OBJECTIVES)}")
        allowed = (*COMMAND_LINE_STRATEGIES, TERMS)  # every strategy but 'given', whose spans come from the caller
        check_axis("strategies", self.strategies, lambda s: s in allowed, f"one of {', '.join(allowed)}")
        check_axis("rates", self.rates, lambda r: 0.0 < r <= 1.0, "in (0, 1]")
        check_axis("corruption", self.corruptions, lambda c: c in CORRUPTIONS, f"one of {', '.join(CORRUPTIONS)}")
        check_axis("rate ends", self.rate_ends, lambda r: r is None or 0.0 < r <= 1.0, "'none' or in (0, 1]")

    def axes(self, first_seed: int = 0) -> tuple[Axis, ...]:
        """The sweep's axes, slowest first: (objective,) strategy, rate, rate end, corruption, seed.

        The objective is an axis only when the grid crosses more than the masked LM, so the
        cells of a masked-LM study keep the names and identities they always had.
        """
        objective = (Axis("objective", self.objectives),) if self.objectives != ("mlm",) else ()
        return (
            *objective,
            Axis("strategy", self.strategies),
            Axis("rate", self.rates),
            Axis("rate_end", self.rate_ends),
            Axis("corruption", self.corruptions),
            Axis("seed", self.seed_list(first_seed)),
        )

    def seed_list(self, first_seed: int = 0) -> tuple[int, ...]:
        return tuple(range(first_seed, first_seed + self.seeds))

    def cells(self, first_seed: int = 0) -> list[Cell]:
        """Every cell, strategy by strategy, then rate, rate end, corruption and seed."""
        return cross(self.axes(first_seed), name=cell_name, folder=cell_folder, derive=lambda c: {"point": point(c)})

    def describe(self) -> str:
        """``8 cells: 4 strategies x 2 rates x 1 corruption x 1 seed`` (``2 objectives x …`` when it crosses them)."""
        axes = [(len(self.objectives), "objective", "", "s")] if self.objectives != ("mlm",) else []
        axes += [(len(self.strategies), "strateg", "y", "ies"), (len(self.rates), "rate", "", "s")]
        if self.rate_ends != (None,):
            axes.append((len(self.rate_ends), "rate schedule", "", "s"))
        axes += [(len(self.corruptions), "corruption", "", "s"), (self.seeds, "seed", "", "s")]
        count = len(self.cells())
        return f"{count} cell{'s' * (count != 1)}: " + " x ".join(
            f"{n} {stem}{one if n == 1 else many}" for n, stem, one, many in axes
        )

    def to_dict(self) -> dict[str, Any]:
        """The grid as a plan records it; ``objectives`` only when it is not the masked LM alone,
        so that the plans of studies recorded before the axis existed still match."""
        grid = {key: list(value) if isinstance(value, tuple) else value for key, value in dataclasses.asdict(self).items()}
        if self.objectives == ("mlm",):
            del grid["objectives"]
        return grid


def baseline_cells(seeds: Sequence[int]) -> list[Cell]:
    """One cell per seed that fine-tunes the model untrained: ``baseline-seed0``, …"""
    axes = (Axis("strategy", (None,)), Axis("rate", (None,)), Axis("rate_end", (None,)), Axis("corruption", (None,)))
    return cross((*axes, Axis("seed", tuple(seeds))), name=cell_name, folder=cell_folder, derive=lambda c: {"point": point(c)})


def point(coordinates: Coordinates) -> str:
    """The grid point, the same for every seed: ``span-0.3-bert``, ``span-0.3to0.15-bert``,
    ``rtd-span-0.3-bert`` (replaced-token detection), or ``baseline``."""
    if coordinates["strategy"] is None:
        return BASELINE
    end = f"to{coordinates['rate_end']:g}" if coordinates["rate_end"] is not None else ""
    objective = "rtd-" if coordinates.get("objective") == "rtd" else ""
    return f"{objective}{coordinates['strategy']}-{coordinates['rate']:g}{end}-{coordinates['corruption']}"


def cell_name(coordinates: Coordinates) -> str:
    """``whole_word-0.3-mask-only-seed1``, ``baseline-seed0``."""
    return f"{point(coordinates)}-seed{coordinates['seed']}"


def cell_folder(coordinates: Coordinates) -> str:
    """``cells/whole_word-0.3-mask-only-seed1``: where the cell's runs are, under the study's folder."""
    return f"cells/{cell_name(coordinates)}"


def cell_config(
    base: PretrainConfig, coordinates: Coordinates, output: str | Path, *, resume: bool = False, terms: str | None = None
) -> PretrainConfig:
    """``base`` with a cell's objective, masking, rate schedule, seed and output, scored on the
    common masks; a :data:`TERMS` cell masks whole words with ``terms`` (a terms file) first.

    Raises:
        ValueError: a baseline cell (it does not pre-train), a terms cell without ``terms``, or a
            masking the config refuses.
    """
    if coordinates["strategy"] is None:
        raise ValueError(f"the {BASELINE} cell is not pre-trained")
    if coordinates["strategy"] == TERMS:
        if terms is None:
            raise ValueError(f"the {TERMS} cells need a terms file")
        units = replace(base.masking.units, strategy="whole_word", mask_terms=terms)
    else:
        units = replace(base.masking.units, strategy=cast(Strategy, coordinates["strategy"]))  # checked by UnitConfig
    mask, random = CORRUPTIONS[coordinates["corruption"]]
    masking = base.masking
    masking = replace(
        masking,
        units=units,
        selection=replace(masking.selection, mlm_probability=coordinates["rate"]),
        corruption=replace(masking.corruption, mask_replace_prob=mask, random_replace_prob=random),
    )
    loop = replace(base.loop, output=str(output), seed=coordinates["seed"], resume=resume, overwrite=False)
    objective = coordinates.get("objective", "mlm")
    cell = replace(base, masking=masking, mlm_probability_end=coordinates["rate_end"], eval_masking="common", loop=loop)
    if objective == "rtd":
        return replace(cell, objective="rtd")
    # the base's detection settings are for the rtd cells: a masked-LM cell leaves them at their defaults
    return replace(cell, objective="mlm", **DETECTION_SETTINGS)  # type: ignore[arg-type]


DEFAULT_GRID = StudyGrid()
"""The built-in study (the defaults of :class:`StudyGrid`)."""

DEFAULT_CELL_TOKENS = 1_000_000
"""Each cell's budget when none is given: 1M training tokens (about 980 steps of 8 x 128), so
every cell sees the same amount of data whatever its speed or what runs beside it. At the
default run's 6.6k tokens/s on 2 cores (README), about 2.5 min at 15% and 4 min at 30% (the
sparse head predicts twice the targets: 1.6x the time per token), plus ~20 s of evaluations,
checkpoints and set-up per cell: the default grid in about 29 minutes."""


def domain_terms(base: PretrainConfig, path: Path, reporter: Reporter) -> Path:
    """Find the terms of the study's pre-training corpus (:func:`~tokenmask.text.terms.find_terms`,
    its defaults) and write them to ``path``.

    Raises:
        ValueError: a corpus that cannot be read, or holds no term.
    """
    from tokenmask.text.terms import TermsConfig, find_terms

    table = find_terms(TermsConfig(corpus=base.corpus, reading=base.reading, output=str(path)))
    if not table.entries:
        raise ValueError(f"no domain term found in the corpus for the '{TERMS}' cells: give them a file with --terms-file")
    path.parent.mkdir(parents=True, exist_ok=True)
    table.write(path)
    shown = ", ".join(entry.text for entry in table.entries[:8])
    reporter.message(f"terms: {len(table.entries)} found in the corpus against {table.background} ({shown}, …) in {path}")
    return path


def terms_fingerprint(path: str | None) -> str | None:
    """What the terms cells mask first, for the plan: a hash of the terms file's content (None
    while there is none), not its path, so a study resumed from another directory matches."""
    import hashlib

    if path is None or not Path(path).is_file():
        return None
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
