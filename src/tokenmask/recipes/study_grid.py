"""The grid of a pre-training study: which masking each cell trains with, and what each cell is called.

A :class:`StudyGrid` crosses strategies x masking rates x rate schedules x corruptions, and each
point runs once per seed: ``StudyGrid(("token", "span"), (0.15, 0.3)).cells(first_seed=0)`` gives
the four cells ``token-0.15-bert-seed0, token-0.3-bert-seed0, span-0.15-bert-seed0,
span-0.3-bert-seed0``. :meth:`Cell.config` turns a base :class:`PretrainConfig` into the cell's
own: only the masking, the rate schedule, the seed, the output folder and the common evaluation
differ between cells. No torch here: the command line validates a grid before anything loads.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

from tokenmask.masking.config import STRATEGIES, Strategy, UnitConfig
from tokenmask.recipes.config import PretrainConfig

CORRUPTIONS: dict[str, tuple[float, float]] = {"bert": (0.8, 0.1), "mask-only": (1.0, 0.0)}
"""Corruption name -> (``mask_replace_prob``, ``random_replace_prob``): ``bert`` is 80/10/10,
``mask-only`` replaces every target by the mask token."""

GRID_KEYS = ("strategy", "mlm_probability", "mlm_probability_end", "mask_replace_prob", "random_replace_prob", "eval_masking")
"""The pre-training settings each cell sets itself; a study's base config leaves them at their defaults."""

BASELINE = "baseline"
"""The name of the cells that fine-tune the untrained model (``baseline-seed0``, …)."""


def study_strategies() -> tuple[str, ...]:
    """The strategies a study may cross: those the masking config offers on the command line
    (every strategy but ``given``, which needs spans from the caller). A strategy added to
    :class:`~tokenmask.masking.config.UnitConfig` (``pmi``) is accepted here as soon as it is there."""
    declared = {f.name: f for f in dataclasses.fields(UnitConfig)}["strategy"]
    return tuple(declared.metadata.get("choices") or (s for s in STRATEGIES if s != "given"))


@dataclass(frozen=True)
class Cell:
    """One run of the study: a grid point at one seed, or (``strategy`` None) the baseline of a seed.

    ``name`` is the cell's folder under ``OUTPUT/cells``: ``whole_word-0.3-mask-only-seed1``;
    with a rate schedule ``span-0.3to0.15-bert-seed0``; the baseline ``baseline-seed0``.
    """

    strategy: str | None
    rate: float | None
    corruption: str | None
    seed: int
    rate_end: float | None = None

    @classmethod
    def baseline(cls, seed: int) -> Cell:
        return cls(strategy=None, rate=None, corruption=None, seed=seed)

    @property
    def point(self) -> str:
        """The grid point, the same for every seed: ``span-0.3-bert``, or ``baseline``."""
        if self.strategy is None:
            return BASELINE
        end = f"to{self.rate_end:g}" if self.rate_end is not None else ""
        return f"{self.strategy}-{self.rate:g}{end}-{self.corruption}"

    @property
    def name(self) -> str:
        return f"{self.point}-seed{self.seed}"

    def describe(self) -> dict[str, Any]:
        """The cell's coordinates, JSON-ready (the start of its result)."""
        return {"name": self.name, "point": self.point, **dataclasses.asdict(self)}

    def config(self, base: PretrainConfig, output: str | Path, *, resume: bool = False) -> PretrainConfig:
        """``base`` with this cell's masking, rate schedule, seed and output, scored on the common masks.

        Raises:
            ValueError: the baseline cell (it does not pre-train), or a masking the config refuses.
        """
        if self.strategy is None or self.rate is None or self.corruption is None:
            raise ValueError(f"the {BASELINE} cell is not pre-trained")
        mask, random = CORRUPTIONS[self.corruption]
        masking = base.masking
        masking = replace(
            masking,
            units=replace(masking.units, strategy=cast(Strategy, self.strategy)),  # checked by UnitConfig
            selection=replace(masking.selection, mlm_probability=self.rate),
            corruption=replace(masking.corruption, mask_replace_prob=mask, random_replace_prob=random),
        )
        loop = replace(base.loop, output=str(output), seed=self.seed, resume=resume, overwrite=False)
        return replace(base, masking=masking, mlm_probability_end=self.rate_end, eval_masking="common", loop=loop)


@dataclass(frozen=True)
class StudyGrid:
    """What the study crosses: every strategy x rate x rate end x corruption, each at ``seeds`` seeds.

    Attributes:
        strategies: masking strategies (:func:`study_strategies`).
        rates: masking rates, each in (0, 1].
        corruptions: names in :data:`CORRUPTIONS`.
        rate_ends: None = a constant rate; a number = the rate moves linearly from the cell's
            rate to this one over the run (``mlm_probability_end``).
        seeds: runs per grid point, seeds ``seed``, ``seed + 1``, … (the same for every point).

    Raises:
        ValueError: an empty axis, an unknown strategy or corruption, a rate outside (0, 1], a
            value given twice, or fewer than one seed; the message names the axis.
    """

    strategies: tuple[str, ...]
    rates: tuple[float, ...]
    corruptions: tuple[str, ...] = ("bert",)
    rate_ends: tuple[float | None, ...] = (None,)
    seeds: int = 1

    def __post_init__(self) -> None:
        allowed = study_strategies()
        _check_axis("strategies", self.strategies, lambda s: s in allowed, f"one of {', '.join(allowed)}")
        _check_axis("rates", self.rates, lambda r: 0.0 < r <= 1.0, "in (0, 1]")
        _check_axis("corruption", self.corruptions, lambda c: c in CORRUPTIONS, f"one of {', '.join(CORRUPTIONS)}")
        _check_axis("rate ends", self.rate_ends, lambda r: r is None or 0.0 < r <= 1.0, "'none' or in (0, 1]")
        if self.seeds < 1:
            raise ValueError(f"seeds must be >= 1; got {self.seeds}")

    def cells(self, first_seed: int = 0) -> list[Cell]:
        """Every cell, strategy by strategy, then rate, rate end, corruption and seed."""
        return [
            Cell(strategy, rate, corruption, seed, rate_end)
            for strategy in self.strategies
            for rate in self.rates
            for rate_end in self.rate_ends
            for corruption in self.corruptions
            for seed in range(first_seed, first_seed + self.seeds)
        ]

    def describe(self) -> str:
        """``8 cells: 4 strategies x 2 rates x 1 corruption x 1 seed``."""
        axes = [(len(self.strategies), "strateg", "y", "ies"), (len(self.rates), "rate", "", "s")]
        if self.rate_ends != (None,):
            axes.append((len(self.rate_ends), "rate schedule", "", "s"))
        axes += [(len(self.corruptions), "corruption", "", "s"), (self.seeds, "seed", "", "s")]
        count = len(self.cells())
        return f"{count} cell{'s' * (count != 1)}: " + " x ".join(
            f"{n} {stem}{one if n == 1 else many}" for n, stem, one, many in axes
        )

    def to_dict(self) -> dict[str, Any]:
        return {key: list(value) if isinstance(value, tuple) else value for key, value in dataclasses.asdict(self).items()}


def _check_axis(axis: str, values: Sequence[Any], good, allowed: str) -> None:
    if not values:
        raise ValueError(f"the grid is empty: give at least one value for {axis}")
    for value in values:
        if not good(value):
            raise ValueError(f"{axis} must be {allowed}; got {value!r}")
    if len(set(values)) != len(values):
        raise ValueError(f"{axis}: each value once, please; got {', '.join(map(str, values))}")


DEFAULT_GRID = StudyGrid(strategies=("token", "whole_word", "span", "pmi"), rates=(0.15, 0.3), corruptions=("bert",))
"""The built-in study: 4 strategies x 2 rates x 80/10/10, one seed; with :data:`DEFAULT_CELL_TOKENS`
each, about 30 minutes on 2 CPU cores. ``ngram`` (close to ``span``) is left to ``--strategies``
to keep the default within that time."""

DEFAULT_CELL_TOKENS = 1_000_000
"""Each cell's budget when none is given: 1M training tokens (about 980 steps of 8 x 128), so
every cell sees the same amount of data whatever its speed or what runs beside it. At the
default run's 6.6k tokens/s on 2 cores (README), about 2.5 min at 15% and 4 min at 30% (the
sparse head predicts twice the targets: 1.6x the time per token), plus ~20 s of evaluations,
checkpoints and set-up per cell: the default grid in about 29 minutes."""
