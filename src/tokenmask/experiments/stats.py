"""A study's numbers: mean ± sd over seeds, paired 95% intervals, and a verdict for each comparison.

Pure Python over a record's fine-tuning cells. Two fine-tunings that share their seeds drew the same
sample and initialisation, so that spread cancels in the per-seed differences (Student's t interval).
A comparison is *better* or *worse* when its interval excludes 0, *no measurable difference* when it
holds 0 and is at most :data:`NARROW` wide on each side, *too wide to tell* otherwise.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

CLEAN = "clean"  # the uncorrupted held-out set
NARROW = 0.015
"""An interval's largest half-width (1.5 points of a 0–1 metric) that still shows "no measurable difference"."""
BETTER, WORSE, NULL, WIDE, ONE_SEED = "better", "worse", "no measurable difference", "too wide to tell", "no interval"
SCORED = {"classify": ("accuracy", "macro_f1"), "tokens": ("accuracy", "macro_f1", "span_f1"), "qa": ("exact_match", "f1"),
          "retrieval": ("recall@1", "mrr@10", "ndcg@10")}  # fmt: skip
"""What every held-out set is scored by, per task (higher is better); the last is the primary metric."""

_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)  # fmt: skip
"""The 97.5% quantile of Student's t with 1, 2, … 30 degrees of freedom (standard tables)."""


def t_quantile_975(df: int) -> float:
    """Tabled up to 30 degrees of freedom, beyond by the Cornish–Fisher expansion (error below 1e-3): ``4 -> 2.776``."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1; got {df}")
    if df <= len(_T975):
        return _T975[df - 1]
    z = 1.959964
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


@dataclass(frozen=True)
class Paired:
    """Differences seed by seed: their mean and 95% t interval (``low``/``high`` None for one seed).

    ``Paired.of([0.02, 0.03, 0.04])``: mean 0.03, sd 0.01, half-width 4.303 x 0.01 / √3 = 0.0248.
    """

    n: int
    mean: float
    sd: float
    low: float | None
    high: float | None

    @classmethod
    def of(cls, differences: Sequence[float]) -> Paired:
        n, mean = len(differences), statistics.fmean(differences)
        if n < 2:
            return cls(n, mean, 0.0, None, None)
        sd = statistics.stdev(differences)
        half = t_quantile_975(n - 1) * sd / math.sqrt(n)
        return cls(n, mean, sd, mean - half, mean + half)

    @property
    def verdict(self) -> str:
        """``Paired.of([0.02, 0.03, 0.04]).verdict -> "better"`` (interval [0.0052, 0.0548])."""
        if self.low is None or self.high is None:
            return ONE_SEED
        if self.low > 0 or self.high < 0:
            return BETTER if self.mean > 0 else WORSE
        return NULL if (self.high - self.low) / 2 <= NARROW else WIDE

    def to_dict(self) -> dict[str, Any]:
        half = None if self.low is None or self.high is None else (self.high - self.low) / 2
        return {**dataclasses.asdict(self), "half_width": half, "verdict": self.verdict}


Group = tuple[str, float, str]  # what a row is about: (point, pre-training fraction, augmentation)
Runs = dict[tuple[int, int], Mapping[str, Any]]  # a group's finished cells by (pre-training seed, fine-tuning seed)
COMPARISONS = ("against_baseline", "augmentation", "masking", "objective")


def size_order(size: str) -> tuple[int, float]:
    """Label budgets from smallest to all: ``sorted(["all", "300", "100"], key=size_order) -> ["100", "300", "all"]``."""
    return (0, float(size)) if size.isdigit() else (1, 0.0)


def summarize(cells: Sequence[Mapping[str, Any]], *, metrics: Sequence[str]) -> dict[str, Any]:
    """The study's fine-tuned numbers from every cell of the record (pending ones say which baselines exist).

    Keys: ``metrics``, ``primary`` (the last metric), ``sizes`` (smallest first), ``sets`` (clean
    first), ``points`` (point -> its objective, strategy, rate, corruption), and a list of
    rows per comparison, each row one (size, set, metric, point, fraction, augment) with ``values``,
    ``mean``, ``sd``, ``pretrain_tokens``, ``runs``, ``against`` (the group compared with) and
    ``paired`` (:meth:`Paired.to_dict`, None without shared seeds):

    - ``against_baseline``: the starting model fine-tuned at the same augmentation and seeds;
    - ``augmentation``: the same model without augmentation;
    - ``masking``: token masking at the same objective, rate and corruption;
    - ``objective``: replaced-token detection against the masked LM of the same masking.
    """
    tuning = [c for c in cells if c.get("role") == "finetune"]
    points = {c["point"]: {k: c.get(k) for k in ("objective", "strategy", "rate", "corruption")} for c in tuning}
    by_size: dict[str, dict[Group, Runs]] = {}
    for cell in (c for c in tuning if c.get("status") != "pending"):
        group = (str(cell["point"]), float(cell["fraction"]), str(cell["augment"]))
        by_size.setdefault(str(cell["size"]), {}).setdefault(group, {})[int(cell["pretrain_seed"]), int(cell["seed"])] = cell
    sets = sorted({name for runs in by_size.values() for g in runs.values() for c in g.values() for name in c["scores"]},
                  key=lambda name: (name != CLEAN, name))  # fmt: skip
    # one baseline per pre-training seed (a model built from scratch) pairs on both seeds; one (--init), on the fine-tuning seed
    several = len({c["pretrain_seed"] for c in tuning if c.get("strategy") is None}) > 1

    baseline = next((p for p, c in points.items() if c["strategy"] is None), None)
    by_baseline: Callable[[tuple[int, int]], Hashable] = (lambda k: k) if several else (lambda k: k[1])

    def references(g: Group) -> dict[str, tuple[Group, Callable[[tuple[int, int]], Hashable]]]:
        own = points[g[0]]
        match = lambda want: next((p for p, c in points.items() if c == want), None)  # noqa: E731
        same = lambda k: k  # noqa: E731
        found = {
            "against_baseline": (baseline if own["strategy"] else None, 0.0, g[2], by_baseline),
            "augmentation": (g[0] if g[2] != "0" else None, g[1], "0", same),
            "masking": (
                match({**own, "strategy": "token"}) if own["strategy"] not in (None, "token") else None,
                g[1],
                g[2],
                same,
            ),
            "objective": (match({**own, "objective": "mlm"}) if own["objective"] == "rtd" else None, g[1], g[2], same),
        }
        return {kind: ((p, f, a), pair) for kind, (p, f, a, pair) in found.items() if p is not None}

    rows: dict[str, list[dict[str, Any]]] = {kind: [] for kind in COMPARISONS}
    order = list(points)
    for size in sorted(by_size, key=size_order):
        groups = by_size[size]
        for g in sorted(groups, key=lambda g: (order.index(g[0]) if points[g[0]]["strategy"] else -1, g[1], g[2])):
            refs = references(g)
            base = refs.pop("against_baseline", None)
            for name in sets:
                for metric in metrics:  # every group has its row here: the baseline's own, and one without a baseline run
                    rows["against_baseline"].append(
                        _row(size, name, metric, g, groups, base if base and base[0] in groups else None)
                    )
                    for kind, (ref, pair_on) in refs.items():
                        if ref in groups:
                            rows[kind].append(_row(size, name, metric, g, groups, (ref, pair_on)))
    return {"metrics": list(metrics), "primary": metrics[-1], "sizes": sorted(by_size, key=size_order), "sets": sets,
            "points": points, **{kind: [r for r in found if r["values"]] for kind, found in rows.items()}}  # fmt: skip


def _row(
    size: str, name: str, metric: str, group: Group, groups: Mapping[Group, Runs],
    reference: tuple[Group, Callable[[tuple[int, int]], Hashable]] | None,
) -> dict[str, Any]:  # fmt: skip
    def scores(g: Group) -> dict[tuple[int, int], float]:
        found = {k: (c["scores"].get(name) or {}).get(metric) for k, c in sorted(groups[g].items())}
        return {k: float(v) for k, v in found.items() if v is not None}

    mine, paired, against = scores(group), None, None
    if reference is not None:
        (against, pair_on), differences = reference, []
        theirs = _by_pair(scores(against), pair_on)
        differences = [v - theirs[k] for k, v in _by_pair(mine, pair_on).items() if k in theirs]
        paired = Paired.of(differences).to_dict() if differences else None
    values = list(mine.values())
    tokens = [float(c.get("pretrain_tokens") or 0) for c in groups[group].values()]
    return {
        "size": size, "set": name, "metric": metric, "point": group[0], "fraction": group[1], "augment": group[2],
        "pretrain_tokens": statistics.fmean(tokens), "runs": [list(k) for k in mine], "values": values,
        "mean": statistics.fmean(values) if values else None, "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
        "against": None if against is None else dict(zip(("point", "fraction", "augment"), against)), "paired": paired,
    }  # fmt: skip


def _by_pair(values: Mapping[tuple[int, int], float], pair_on: Callable[[tuple[int, int]], Hashable]) -> dict[Hashable, float]:
    """Runs by what they pair on, averaged where several share it: against one baseline run per
    fine-tuning seed (``--init``), a cell's runs of that seed over its pre-training seeds are one
    pair, so ``n`` counts independent baseline runs.

    ``{(0, 0): 0.70, (1, 0): 0.74, (0, 1): 0.60}`` on the fine-tuning seed -> ``{0: 0.72, 1: 0.60}``.
    """
    grouped: dict[Hashable, list[float]] = {}
    for key, value in values.items():
        grouped.setdefault(pair_on(key), []).append(value)
    return {key: statistics.fmean(found) for key, found in grouped.items()}


def best_cell(cells: Sequence[Mapping[str, Any]], metric: str) -> dict[str, Any] | None:
    """The finished fine-tuning with the highest clean ``metric`` (the first of equals; optimistic there), or None."""
    tuned = [c for c in cells if c.get("role") == "finetune" and c.get("scores")]
    if not tuned:
        return None
    best = max(tuned, key=lambda c: float(c["scores"][CLEAN][metric]))
    return {"name": best["name"], "metric": metric, "value": float(best["scores"][CLEAN][metric])}
