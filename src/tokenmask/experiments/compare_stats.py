"""The numbers of an augmentation comparison: mean ± sd over seeds, drops under corruption, paired tests.

Pure Python over the per-run scores of :mod:`tokenmask.experiments.compare` (no torch, no model):
:func:`summarize` turns the finished runs into one row per (training size, arm, evaluation set,
metric). A difference between an arm and rate 0 is judged *paired*: per seed, both ran on the
same training sample, the same corrupted texts and the same initialisation seed, so the
seed-to-seed spread they share cancels in the difference. The test is a two-sided 95% Student t
interval over the seeds' differences; "within noise" means the interval holds 0.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

CLEAN = "clean"
"""The name of the uncorrupted evaluation set."""
BASELINE_ARM = "rate-0"
"""The arm every other one is compared with: fine-tuning without augmentation."""

_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)  # fmt: skip
"""The 97.5% quantile of Student's t with 1, 2, … 30 degrees of freedom (standard tables)."""


def t_quantile_975(df: int) -> float:
    """The 97.5% quantile of Student's t: tabled up to 30 degrees of freedom, beyond by the
    Cornish–Fisher expansion around the normal's 1.95996 (error below 1e-3).

    ``t_quantile_975(1) -> 12.706``, ``t_quantile_975(4) -> 2.776``.
    """
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1; got {df}")
    if df <= len(_T975):
        return _T975[df - 1]
    z = 1.959964
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


@dataclass(frozen=True)
class Paired:
    """An arm minus the baseline, seed by seed: mean difference and its 95% t interval.

    ``low``/``high`` are None with a single seed (no spread to judge noise by).
    """

    n: int
    mean: float
    sd: float
    low: float | None
    high: float | None

    @property
    def within_noise(self) -> bool | None:
        """True when the interval holds 0; None when there is no interval."""
        if self.low is None or self.high is None:
            return None
        return self.low <= 0.0 <= self.high

    @classmethod
    def of(cls, differences: Sequence[float]) -> Paired:
        """``Paired.of([0.02, 0.04])``: mean 0.03, sd 0.01414, half-width 12.706 × 0.01414 / √2 = 0.127,
        so the interval is [-0.097, 0.157]: within noise."""
        n = len(differences)
        mean = statistics.fmean(differences)
        if n < 2:
            return cls(n, mean, 0.0, None, None)
        sd = statistics.stdev(differences)
        half = t_quantile_975(n - 1) * sd / math.sqrt(n)
        return cls(n, mean, sd, mean - half, mean + half)

    def describe(self) -> str:
        """``"+0.0300 [-0.0971, +0.1571] noise"``, ``"-0.0500 [-0.0700, -0.0300] worse"``, ``"+0.0100 (1 seed: no interval)"``."""
        if self.low is None or self.high is None:
            return f"{self.mean:+.4f} ({self.n} seed: no interval)"
        verdict = "noise" if self.within_noise else ("better" if self.mean > 0 else "worse")
        return f"{self.mean:+.4f} [{self.low:+.4f}, {self.high:+.4f}] {verdict}"


@dataclass(frozen=True)
class Row:
    """One (size, arm, evaluation set, metric) over its seeds.

    ``drop`` / ``relative_drop``: the clean mean minus this set's mean, and that over the clean
    mean (None on the clean set). ``paired``: this arm minus :data:`BASELINE_ARM` on the same
    seeds (None for the baseline itself or when it did not run).
    """

    size: str
    arm: str
    set: str
    metric: str
    seeds: tuple[int, ...]
    values: tuple[float, ...]
    mean: float
    sd: float
    drop: float | None = None
    relative_drop: float | None = None
    paired: Paired | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {
            "paired": None if self.paired is None else {**asdict(self.paired), "within_noise": self.paired.within_noise}
        }


def summarize(cells: Sequence[Mapping[str, Any]], metrics: Sequence[str]) -> list[Row]:
    """One :class:`Row` per (size, arm, set, metric) of the finished ``cells``, in their order.

    A cell is ``{"size": "100", "arm": "rate-0.1", "seed": 0, "scores": {"clean": {"macro_f1": …}, "typo-0.05": …}}``.
    """
    groups: dict[tuple[str, str], dict[int, Mapping[str, Mapping[str, float]]]] = {}
    for cell in cells:
        groups.setdefault((str(cell["size"]), str(cell["arm"])), {})[int(cell["seed"])] = cell["scores"]
    rows = []
    for (size, arm), by_seed in groups.items():
        baseline = groups.get((size, BASELINE_ARM)) if arm != BASELINE_ARM else None
        sets = list(next(iter(by_seed.values())))
        for name in sets:
            for metric in metrics:
                rows.append(_row(size, arm, name, metric, by_seed, baseline))
    return rows


def _row(
    size: str,
    arm: str,
    name: str,
    metric: str,
    by_seed: Mapping[int, Mapping[str, Mapping[str, float]]],
    baseline: Mapping[int, Mapping[str, Mapping[str, float]]] | None,
) -> Row:
    seeds = tuple(sorted(by_seed))
    values = tuple(float(by_seed[s][name][metric]) for s in seeds)
    mean = statistics.fmean(values)
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    drop = relative = None
    if name != CLEAN:
        clean = statistics.fmean(float(by_seed[s][CLEAN][metric]) for s in seeds)
        drop = clean - mean
        relative = drop / clean if clean else None
    paired = None
    if baseline is not None:
        shared = [s for s in seeds if s in baseline and name in baseline[s]]
        if shared:
            paired = Paired.of([float(by_seed[s][name][metric]) - float(baseline[s][name][metric]) for s in shared])
    return Row(size, arm, name, metric, seeds, values, mean, sd, drop, relative, paired)
