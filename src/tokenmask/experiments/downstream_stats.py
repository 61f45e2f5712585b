"""The answer on the user's own task: a study's fine-tuned scores, paired comparisons, and the verdict in words.

Pure Python over the fine-tuning cells of ``study.json`` (``"role": "finetune"``; no torch, no
model). :func:`summarize_downstream` compares every fine-tuned (point, fraction, augmentation)
seed by seed with what it should beat, using :class:`~tokenmask.experiments.compare_stats.Paired`
(mean difference and 95% t interval): the checkpoint fine-tuned directly (the baseline), the
same model fine-tuned without augmentation, token masking at the same rate. :func:`verdict`
says what those numbers show, and nothing they do not.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

from tokenmask.experiments.compare_stats import CLEAN, Paired, t_quantile_975

FINETUNE = "finetune"
"""The role of a fine-tuning cell in ``study.json`` (source cells are ``pretrain`` or ``baseline``)."""
NARROW = 0.015
"""An interval is *narrow* when its half-width is at most 1.5 points of a 0–1 metric: one that
holds 0 and is narrow shows no difference worth having; a wider one that holds 0 cannot tell."""
BETTER, WORSE, NULL, WIDE, ONE_SEED = "better", "worse", "no measurable difference", "too wide to tell", "one seed"
"""What a paired difference shows (:func:`judge`)."""

_STRATEGY_WORDS = {"token": "token masking", "whole_word": "whole-word masking", "span": "span masking",
                   "ngram": "n-gram masking", "pmi": "PMI masking", "terms": "term masking", "given": "given-span masking"}  # fmt: skip
_METRIC_WORDS = {"accuracy": "accuracy", "macro_f1": "macro-F1", "span_f1": "span-F1"}
_DIRECT = "the checkpoint fine-tuned directly"
Group = tuple[str, float, float]
"""What a row is about: (point, pre-training fraction, augmentation rate)."""
Runs = dict[tuple[int, int], Mapping[str, Any]]
"""A group's finished cells by (pre-training seed, fine-tuning seed)."""


def judge(paired: Paired) -> str:
    """What a difference shows: :data:`BETTER` / :data:`WORSE` (the interval excludes 0), :data:`NULL`
    (it holds 0 and is :data:`NARROW`), :data:`WIDE` (it holds 0 and is wider), :data:`ONE_SEED`.

    ``judge(Paired.of([0.02, 0.03, 0.04]))  ->  "better"`` (interval [0.0052, 0.0548]).
    """
    if paired.low is None or paired.high is None:
        return ONE_SEED
    if not paired.within_noise:
        return BETTER if paired.mean > 0 else WORSE
    return NULL if (paired.high - paired.low) / 2 <= NARROW else WIDE


def size_order(size: str) -> tuple[int, float]:
    """Label budgets from smallest to all: ``sorted(["all", "300", "100"], key=size_order) -> ["100", "300", "all"]``."""
    return (0, float(size)) if size.isdigit() else (1, 0.0)


def summarize_downstream(cells: Sequence[Mapping[str, Any]], *, metrics: Sequence[str], primary: str) -> dict[str, Any]:
    """The study's downstream numbers, JSON-ready, from its finished fine-tuning cells (other roles
    and pending cells are left out).

    Keys: ``metrics``, ``primary``, ``narrow`` (:data:`NARROW`), ``sizes`` (smallest first),
    ``sets`` (clean first), ``points`` (point -> its ``objective`` (None but where the grid crosses
    objectives), ``strategy``, ``rate``, ``rate_end``,
    ``corruption``; all None for the baseline), and five lists of rows:

    - ``against_baseline``: per (size, set, metric), one row per (point, fraction, augment);
      paired with the baseline cell of the same size, augmentation rate and fine-tuning seed
      (and pre-training seed, where the baseline differs per pre-training seed): what continued
      pre-training alone changed; the baseline's own rows have no ``against``.
    - ``augmentation``: each augment > 0 against the same (point, fraction) at augment 0.
    - ``masking``: each strategy's point against the ``token`` point of the same objective, rate,
      rate end and corruption, at the same fraction and augment.
    - ``objective``: each replaced-token-detection point against the masked-LM point of the same
      masking, at the same fraction and augment.
    - ``curve``: per (size, pre-trained point, metric) on the clean set at the lowest
      augmentation rate (``augment``; 0 unless the study has none), the ``fractions`` from 0
      (the baseline) up, each with ``pretrain_tokens``, ``n``, ``mean``, ``sd`` and ``paired``
      (against the baseline).

    A row: ``size, set, metric, point, fraction, augment, pretrain_tokens`` (mean over runs),
    ``runs`` (``[pretrain_seed, seed]`` pairs), ``values``, ``mean``, ``sd``, ``against``
    (``{"point", "fraction", "augment"}`` compared with, or None) and ``paired`` (``n, mean, sd,
    low, high, within_noise, half_width, narrow, verdict``; None with no shared run). With
    differences 0.02, 0.03, 0.04: mean 0.03, sd 0.01, half-width 4.303 × 0.01 / √3 = 0.0248.

    Pass every cell of the record, pending ones too: whether the baseline differs per
    pre-training seed is read from all its cells, so a partial record never pairs pre-training
    seed 1 with the baseline of seed 0 while seed 1's baseline is still running.

    Raises:
        ValueError: ``primary`` not among ``metrics``.
    """
    if primary not in metrics:
        raise ValueError(f"the primary metric {primary!r} is not among the metrics {list(metrics)}")
    tuning = [cell for cell in cells if cell.get("role") == FINETUNE]
    points = {c["point"]: {k: c.get(k) for k in ("objective", "strategy", "rate", "rate_end", "corruption")} for c in tuning}
    order = {point: index for index, point in enumerate(points)}
    finished = [cell for cell in tuning if cell.get("status") != "pending" and cell.get("scores")]
    by_size: dict[str, dict[Group, Runs]] = {}
    for cell in finished:
        runs = by_size.setdefault(str(cell["size"]), {}).setdefault(_group(cell), {})
        runs[int(cell["pretrain_seed"]), int(cell["seed"])] = cell
    sizes = sorted(by_size, key=size_order)
    sets = sorted(dict.fromkeys(name for cell in finished for name in cell["scores"]), key=lambda name: name != CLEAN)
    # pending cells count here: a partial record must not pair pre-training seed 1 with the baseline of seed 0
    baselines = {cell.get("pretrain_seed") for cell in tuning if points[cell["point"]]["strategy"] is None}
    baseline_key: Callable[[tuple[int, int]], Hashable] = _same_runs if len(baselines) > 1 else _fine_tuning_seed
    against_baseline, augmentation, masking, objective = [], [], [], []
    for size in sizes:
        groups = by_size[size]
        ordered = sorted(groups, key=lambda g: (points[g[0]]["strategy"] is not None, order[g[0]], g[1], g[2]))  # baseline first

        def base(group: Group, groups: Mapping[Group, Runs] = groups) -> Group | None:
            """The baseline fine-tuned at the same augmentation rate: what continued pre-training alone changed."""
            if points[group[0]]["strategy"] is None:
                return None
            return next((g for g in groups if points[g[0]]["strategy"] is None and g[2] == group[2]), None)

        for name in sets:
            for metric in metrics:
                row = _rows_maker(size, name, metric, groups)
                for group in ordered:
                    against_baseline.append(row(group, base(group), baseline_key))
                    if group[2] > 0.0 and (group[0], group[1], 0.0) in groups:
                        augmentation.append(row(group, (group[0], group[1], 0.0), _same_runs))
                    token = _token_point(points, group[0])
                    if token is not None and (token, group[1], group[2]) in groups:
                        masking.append(row(group, (token, group[1], group[2]), _same_runs))
                    masked_lm = _masked_lm_point(points, group[0])
                    if masked_lm is not None and (masked_lm, group[1], group[2]) in groups:
                        objective.append(row(group, (masked_lm, group[1], group[2]), _same_runs))
    against_baseline, augmentation, masking, objective = (
        [r for r in rows if r["values"]] for rows in (against_baseline, augmentation, masking, objective)
    )
    summary = {"metrics": list(metrics), "primary": primary, "narrow": NARROW, "sizes": sizes, "sets": sets, "points": points}
    return summary | {"against_baseline": against_baseline, "augmentation": augmentation, "masking": masking,
                      "objective": objective, "curve": _curve(against_baseline, points, metrics)}  # fmt: skip


def _group(cell: Mapping[str, Any]) -> Group:
    return (str(cell["point"]), float(cell.get("fraction") or 0.0), float(cell.get("augment") or 0.0))


def _same_runs(key: tuple[int, int]) -> Hashable:
    """Pair on (pre-training seed, fine-tuning seed)."""
    return key


def _fine_tuning_seed(key: tuple[int, int]) -> Hashable:
    """Pair on the fine-tuning seed alone (one baseline for every pre-training seed)."""
    return key[1]


def _token_point(points: Mapping[str, Mapping[str, Any]], point: str) -> str | None:
    """The ``token`` point of the same objective, rate, rate end and corruption as ``point`` (None
    for token itself or the baseline)."""
    own = points[point]
    if own["strategy"] in (None, "token"):
        return None
    same = ("objective", "rate", "rate_end", "corruption")
    return next((p for p, c in points.items() if c["strategy"] == "token" and all(c.get(k) == own.get(k) for k in same)), None)


def _masked_lm_point(points: Mapping[str, Mapping[str, Any]], point: str) -> str | None:
    """For a replaced-token-detection point, the masked-LM point of the same masking (None otherwise)."""
    own = points[point]
    if own.get("objective") != "rtd":
        return None
    same = ("strategy", "rate", "rate_end", "corruption")
    return next((p for p, c in points.items() if c.get("objective") == "mlm" and all(c[k] == own[k] for k in same)), None)


def _rows_maker(
    size: str, name: str, metric: str, groups: Mapping[Group, Runs]
) -> Callable[[Group, Group | None, Callable[[tuple[int, int]], Hashable]], dict[str, Any]]:
    """A row builder for one (size, set, metric): ``row(group, reference, pair_on)`` pairs the runs
    of ``group`` with those of ``reference`` whose ``pair_on(key)`` is the same."""

    def score(cell: Mapping[str, Any]) -> float | None:
        value = (cell["scores"].get(name) or {}).get(metric)
        return None if value is None else float(value)

    def row(group: Group, reference: Group | None, pair_on: Callable[[tuple[int, int]], Hashable]) -> dict[str, Any]:
        runs = {key: score(cell) for key, cell in sorted(groups[group].items())}
        values = {key: value for key, value in runs.items() if value is not None}
        paired = None
        if reference is not None:
            mine, others = _by_pair(values, pair_on), _by_pair({k: score(c) for k, c in groups[reference].items()}, pair_on)
            differences = [value - others[key] for key, value in mine.items() if key in others]
            paired = _paired(Paired.of(differences)) if differences else None
        tokens = [float(cell.get("pretrain_tokens") or 0) for cell in groups[group].values()]
        return {
            "size": size, "set": name, "metric": metric, "point": group[0], "fraction": group[1], "augment": group[2],
            "pretrain_tokens": statistics.fmean(tokens), "runs": [list(key) for key in values],
            "values": list(values.values()), **_spread(list(values.values())),
            "against": None if reference is None else dict(zip(("point", "fraction", "augment"), reference)), "paired": paired,
        }  # fmt: skip

    return row


def _by_pair(
    values: Mapping[tuple[int, int], float | None], pair_on: Callable[[tuple[int, int]], Hashable]
) -> dict[Hashable, float]:
    """Runs by what they pair on, averaged where several share it: with one baseline run per
    fine-tuning seed (``--init``), a cell's runs of that seed over its pre-training seeds are one
    pair, so ``n`` counts independent baseline runs, not the same one again.

    ``{(0, 0): 0.70, (1, 0): 0.74, (0, 1): 0.60}`` paired on the fine-tuning seed -> ``{0: 0.72, 1: 0.60}``.
    """
    grouped: dict[Hashable, list[float]] = {}
    for key, value in values.items():
        if value is not None:
            grouped.setdefault(pair_on(key), []).append(value)
    return {key: statistics.fmean(found) for key, found in grouped.items()}


def _spread(values: Sequence[float]) -> dict[str, float | None]:
    """``{"mean": 0.7, "sd": 0.01}`` (sd 0 for one value; both None for none)."""
    if not values:
        return {"mean": None, "sd": None}
    return {"mean": statistics.fmean(values), "sd": statistics.stdev(values) if len(values) > 1 else 0.0}


def _paired(paired: Paired) -> dict[str, Any]:
    half = None if paired.low is None or paired.high is None else (paired.high - paired.low) / 2
    narrow = None if half is None else half <= NARROW
    return asdict(paired) | {"within_noise": paired.within_noise, "half_width": half, "narrow": narrow, "verdict": judge(paired)}


def _curve(
    rows: Sequence[Mapping[str, Any]], points: Mapping[str, Mapping[str, Any]], metrics: Sequence[str]
) -> list[dict[str, Any]]:
    """Per (size, pre-trained point, metric): its clean rows at the lowest augmentation rate (0
    unless the study has none) by fraction, the baseline's at 0."""
    lowest = min((r["augment"] for r in rows), default=0.0)
    clean = [r for r in rows if r["set"] == CLEAN and r["augment"] == lowest]
    curves = []
    for size in dict.fromkeys(r["size"] for r in clean):
        base = {r["metric"]: r for r in clean if r["size"] == size and points[r["point"]]["strategy"] is None}
        for point in dict.fromkeys(r["point"] for r in clean if r["size"] == size and points[r["point"]]["strategy"]):
            for metric in metrics:
                steps = sorted((r for r in clean if (r["size"], r["point"], r["metric"]) == (size, point, metric)),
                               key=lambda r: r["fraction"])  # fmt: skip
                steps = ([base[metric]] if metric in base else []) + steps
                fractions = [{key: r[key] for key in ("fraction", "pretrain_tokens", "mean", "sd", "paired")} | {"n": len(r["values"])}
                             for r in steps]  # fmt: skip
                curves.append({"size": size, "point": point, "metric": metric, "augment": lowest, "fractions": fractions})
    return curves


# ---- the verdict in words -----------------------------------------------------------------


def verdict(summary: Mapping[str, Any]) -> list[str]:
    """What the numbers show, in sentences, on the clean set and the primary metric: one per label
    budget (smallest first: the continued pre-trainings against the baseline, at the lowest
    augmentation rate, 0 unless the study has none), then one on masking against token masking,
    one on augmentation, one on the curve (each where the study has it). Differences are in
    points (100 × the difference, one decimal).

    Of several cells, a sentence names the one that shows most (the measurable gain with the
    highest lower bound, else the measurable loss, else the largest mean) and says it was chosen
    among K after the fact: with K comparisons at 95%, one in 20 can exclude 0 by chance.

    ``"At 300 labels, continued pre-training with whole-word masking at 0.15 for 1.0M tokens raised
    macro-F1 by 3.1 points [1.2, 5.0] over the checkpoint fine-tuned directly (3 seeds)."``
    """
    primary = summary["primary"]
    mine = [r for r in summary["against_baseline"] if r["set"] == CLEAN and r["metric"] == primary]
    sentences = []
    for size in summary["sizes"]:
        here = [r for r in mine if r["size"] == size and summary["points"][r["point"]]["strategy"]]
        lowest = min((r["augment"] for r in here), default=0.0)
        tuned = [r for r in here if r["augment"] == lowest]
        paired = [r for r in tuned if r["paired"]]
        if paired:
            sentences.append(_budget_sentence(paired, summary["points"], primary, augment=lowest))
        elif tuned:
            sentences.append(f"{_at(size)}, no continued pre-training run has a finished baseline run to pair with yet.")
    later = (_masking_sentence(summary), _objective_sentence(summary), _augmentation_sentence(summary), _curve_sentence(summary))
    sentences += [s for s in later if s]
    return sentences


def describe_point(coordinates: Mapping[str, Any]) -> str:
    """A grid point in words: ``whole-word masking at 0.15``, ``span masking at 0.3 falling to 0.15 (mask-only)``,
    ``replaced-token detection on token masking at 0.15``."""
    strategy = coordinates.get("strategy")
    if strategy is None:
        return "the checkpoint itself"
    words = f"{_STRATEGY_WORDS.get(strategy, strategy.replace('_', ' ') + ' masking')} at {coordinates['rate']:g}"
    if coordinates.get("objective") == "rtd":
        words = f"replaced-token detection on {words}"
    end = coordinates.get("rate_end")
    if end is not None:
        words += f" {'falling' if end < coordinates['rate'] else 'rising'} to {end:g}"
    corruption = coordinates.get("corruption")
    return words + (f" ({corruption})" if corruption not in (None, "bert") else "")


def metric_words(metric: str) -> str:
    """``metric_words("macro_f1") -> "macro-F1"``, ``metric_words("span_f1") -> "span-F1"``."""
    return _METRIC_WORDS.get(metric, metric)


def in_points(difference: float, *, sign: bool = True) -> str:
    """A 0–1 difference in points, one decimal, a true minus: ``in_points(-0.0062) -> "−0.6"``,
    ``in_points(0.031) -> "+3.1"``, ``in_points(0.031, sign=False) -> "3.1"``, ``in_points(-0.0001) -> "0.0"``."""
    if round(100 * difference, 1) == 0:
        return "0.0"
    return (f"{100 * difference:+.1f}" if sign else f"{100 * difference:.1f}").replace("-", "−")


def interval(paired: Mapping[str, Any], *, unit: str = " points") -> str:
    """A paired difference (a ``paired`` of :func:`summarize_downstream`) in points: ``"+0.4 points [−0.6, 1.4]"``,
    ``"+2.0 points (1 seed: no interval)"``; with ``unit=""`` (a table's cell) ``"+0.4 [−0.6, 1.4]"``."""
    mean = in_points(paired["mean"]) + unit
    if paired["low"] is None:
        return f"{mean} ({paired['n']} seed: no interval)"
    return f"{mean} [{in_points(paired['low'], sign=False)}, {in_points(paired['high'], sign=False)}]"


def tokens(count: float) -> str:
    """``tokens(1_000_000) -> "1.0M"``, ``tokens(250_000) -> "250k"``, ``tokens(900) -> "900"``."""
    if count >= 1e9:
        return f"{count / 1e9:.1f}B"
    if count >= 1e6:
        return f"{count / 1e6:.1f}M"
    return f"{count / 1e3:.0f}k" if count >= 1e3 else f"{count:.0f}"


def _at(size: str) -> str:
    return "With all labels" if size == "all" else f"At {size} labels"


def _with(size: str) -> str:
    return "with all labels" if size == "all" else f"with {size} labels"


def _runs(row: Mapping[str, Any]) -> str:
    """``3 seeds``; ``6 runs over 2 pre-training seeds``."""
    n, sources = row["paired"]["n"], len({ps for ps, _ in row["runs"]})
    return f"{n} runs over {sources} pre-training seeds" if sources > 1 else f"{n} seed{'s' * (n != 1)}"


def _budget_sentence(rows: Sequence[Mapping[str, Any]], points_: Mapping[str, Any], metric: str, *, augment: float) -> str:
    """One label budget's continued pre-trainings against the baseline (``rows``: each paired)."""
    name, count = metric_words(metric), len(rows)
    by_verdict = {word: [r for r in rows if r["paired"]["verdict"] == word] for word in (BETTER, WORSE, NULL, WIDE, ONE_SEED)}
    at = _at(rows[0]["size"]) + (f" (fine-tuned with [MASK] augmentation at {augment:g})" if augment else "")

    def what(row: Mapping[str, Any]) -> str:
        return f"{describe_point(points_[row['point']])} for {tokens(row['pretrain_tokens'])} tokens"

    chosen = (f"; picked as the best of {count} after seeing them, {_counts(rows)}: at 95% each, one comparison in 20 "
              "can exclude 0 by chance")  # fmt: skip
    if by_verdict[BETTER]:
        row = max(by_verdict[BETTER], key=lambda r: r["paired"]["low"])
        paired = row["paired"]
        low, high = in_points(paired["low"], sign=False), in_points(paired["high"], sign=False)
        return (f"{at}, continued pre-training with {what(row)} raised {name} by {in_points(paired['mean'], sign=False)} "
                f"points [{low}, {high}] over {_DIRECT} ({_runs(row)}{chosen if count > 1 else ''}).")  # fmt: skip
    if by_verdict[WORSE]:
        row = min(by_verdict[WORSE], key=lambda r: r["paired"]["high"])
        paired = row["paired"]
        low, high = in_points(-paired["high"], sign=False), in_points(-paired["low"], sign=False)
        none = "no continued pre-training helped" + (f" ({_counts(rows)})" if count > 1 else "")
        return (f"{at}, {none}: {what(row)} lowered {name} by {in_points(-paired['mean'], sign=False)} points "
                f"[{low}, {high}] against {_DIRECT} ({_runs(row)}).")  # fmt: skip
    row = max(rows, key=lambda r: r["paired"]["mean"])
    paired = row["paired"]
    if len(by_verdict[NULL]) == count:
        which = f"none of the {count} continued pre-trainings" if count > 1 else f"continued pre-training with {what(row)}"
        largest = f": the largest, {what(row)}, {interval(paired)}" if count > 1 else f": {interval(paired)}"
        made = "made a measurable difference" if count > 1 else "made no measurable difference"
        return f"{at}, {which} {made} to {name} over {_DIRECT}{largest} ({_runs(row)})."
    if count == 1 and by_verdict[WIDE]:
        return (f"{at}, continued pre-training with {what(row)} cannot be told apart from {_DIRECT} on {name}: "
                f"{interval(paired)} ({_runs(row)}), an interval too wide to tell (±{in_points(paired['half_width'], sign=False)} "
                f"points, more than ±{in_points(NARROW, sign=False)}){_more_seeds([row])}.")  # fmt: skip
    if by_verdict[ONE_SEED]:
        return (f"{at}, the largest change from continued pre-training ({what(row)}) was {in_points(paired['mean'])} points "
                f"of {name} over {_DIRECT} on 1 seed: no interval, so it may be noise; more seeds would tell.")  # fmt: skip
    widest = max(by_verdict[WIDE], key=lambda r: r["paired"]["half_width"])
    return (f"{at}, no continued pre-training is measurably better or worse than {_DIRECT} on {name}, but "
            f"{len(by_verdict[WIDE])} of {count} intervals {'are' if len(by_verdict[WIDE]) != 1 else 'is'} "
            f"too wide to tell (the largest mean, {what(row)}: {interval(paired)}; the widest ±"
            f"{in_points(widest['paired']['half_width'], sign=False)} points, more than ±{in_points(NARROW, sign=False)})"
            f"{_more_seeds(by_verdict[WIDE])}.")  # fmt: skip


def seeds_for_narrow(sd: float, *, most: int = 1000) -> int | None:
    """The fewest seeds whose paired 95% interval is at most ±:data:`NARROW` wide, if the
    differences keep the standard deviation ``sd`` (None: more than ``most``).

    ``seeds_for_narrow(0.02)`` -> 10: t(0.975, 9) x 0.02 / √10 = 2.262 x 0.00632 = 0.0143 ≤ 0.015,
    where 9 seeds give 2.306 x 0.02 / 3 = 0.0154.
    """
    for n in range(2, most + 1):
        if t_quantile_975(n - 1) * sd / math.sqrt(n) <= NARROW:
            return n
    return None


def _more_seeds(rows: Sequence[Mapping[str, Any]]) -> str:
    """``"; at the spread seen, about 12 seeds (continue with --resume --finetune-seeds 12) would bring every
    interval within ±1.5 points"``, from the widest-spread of ``rows``."""
    needed = [_seeds_needed(r) for r in rows]
    one = "it" if len(rows) == 1 else "every interval"
    if any(n is None for n in needed):
        return f"; at the spread seen, over a thousand seeds would bring {one} within ±{in_points(NARROW, sign=False)} points"
    most = max(n for n in needed if n is not None)
    return (
        f"; at the spread seen, about {most} seeds (continue with --resume --finetune-seeds {most}) would bring {one} "
        f"within ±{in_points(NARROW, sign=False)} points"
    )


def _seeds_needed(row: Mapping[str, Any]) -> int | None:
    """The fine-tuning seeds that would narrow ``row``'s interval: :func:`seeds_for_narrow` counts
    pairs, and without ``--init`` each fine-tuning seed gives one pair per pre-training seed."""
    pairs = seeds_for_narrow(row["paired"]["sd"])
    seeds = len({finetune_seed for _, finetune_seed in row["runs"]}) or 1
    return None if pairs is None else max(2, math.ceil(pairs * seeds / max(row["paired"]["n"], 1)))


def _counts(rows: Sequence[Mapping[str, Any]]) -> str:
    """``"1 better, 2 no measurable difference"``: the verdicts of ``rows``, in a fixed order."""
    found = [(sum(r["paired"]["verdict"] == v for r in rows), v) for v in (BETTER, WORSE, NULL, WIDE, ONE_SEED)]
    return ", ".join(f"{n} {v}" for n, v in found if n)


def _tally(rows: Sequence[Mapping[str, Any]], name: Callable[[Mapping[str, Any]], str]) -> str:
    """``4 comparisons: 1 better, 3 no measurable difference; the largest measurable: X, +1.2 points [0.3, 2.1]``."""
    judged = [r for r in rows if r["paired"]]
    text = f"{len(judged)} comparison{'s' * (len(judged) != 1)}: {_counts(judged)}"
    measurable = [r for r in judged if r["paired"]["verdict"] in (BETTER, WORSE)]
    if measurable:
        largest = max(measurable, key=lambda r: abs(r["paired"]["mean"]))
        text += f"; the largest measurable: {name(largest)}, {interval(largest['paired'])}"
    return text


def _masking_sentence(summary: Mapping[str, Any]) -> str | None:
    return _comparison_sentence(summary, "masking", "token masking at the same rate")


def _objective_sentence(summary: Mapping[str, Any]) -> str | None:
    """Replaced-token detection against the masked LM trained with the same masking."""
    return _comparison_sentence(summary, "objective", "the masked LM with the same masking")


def _comparison_sentence(summary: Mapping[str, Any], kind: str, against: str) -> str | None:
    """The tally of the ``kind`` rows (clean set, primary metric, the lowest augmentation rate, the
    largest pre-training share)."""
    primary, points_ = summary["primary"], summary["points"]
    rows = [r for r in summary.get(kind, ()) if r["set"] == CLEAN and r["metric"] == primary and r["paired"]]
    if not rows:
        return None
    fraction, lowest = max(r["fraction"] for r in rows), min(r["augment"] for r in rows)
    budget = "full pre-training" if fraction == 1.0 else f"{fraction:g} of the pre-training budget"
    rows = [r for r in rows if r["fraction"] == fraction and r["augment"] == lowest]
    tally = _tally(rows, lambda r: f"{describe_point(points_[r['point']])} {_with(r['size'])}")
    return f"Against {against} ({metric_words(primary)}, clean set, {budget}, {_augmentation_words(lowest)}), {tally}."


def _augmentation_words(rate: float) -> str:
    """``"no augmentation"`` at 0, ``"[MASK] augmentation at 0.1"`` above."""
    return "no augmentation" if rate == 0.0 else f"[MASK] augmentation at {rate:g}"


def _augmentation_sentence(summary: Mapping[str, Any]) -> str | None:
    primary, points_ = summary["primary"], summary["points"]
    rows = [r for r in summary["augmentation"] if r["metric"] == primary and r["paired"]]
    clean = [r for r in rows if r["set"] == CLEAN]
    if not clean:
        return None

    def name(r: Mapping[str, Any]) -> str:
        on = f" on {r['set']}" if r["set"] != CLEAN else ""
        return f"augmentation at {r['augment']:g} after {describe_point(points_[r['point']])} {_with(r['size'])}{on}"

    text = f"[MASK] augmentation while fine-tuning, against none ({metric_words(primary)}, clean set), {_tally(clean, name)}."
    smallest = summary["sizes"][0]
    corrupted = [r for r in rows if r["set"] != CLEAN and r["size"] == smallest]
    if corrupted:
        text += f" On the corrupted sets {_with(smallest)}, {_tally(corrupted, name)}."
    return text


def _curve_sentence(summary: Mapping[str, Any]) -> str | None:
    primary, points_ = summary["primary"], summary["points"]
    curves = [c for c in summary["curve"] if c["metric"] == primary and sum(f["fraction"] > 0 for f in c["fractions"]) > 1]
    if not curves:
        return None
    parts = []
    for size in dict.fromkeys(c["size"] for c in curves):
        gains = [(f["pretrain_tokens"], f, c["point"]) for c in curves if c["size"] == size for f in c["fractions"]
                 if f["fraction"] > 0 and f["paired"] and f["paired"]["verdict"] == BETTER]  # fmt: skip
        if not gains:
            parts.append(f"{_with(size)} no checkpoint on it is measurably better than {_DIRECT}")
            continue
        count, first, point = min(gains, key=lambda g: g[0])
        compared = sum(1 for c in curves if c["size"] == size for f in c["fractions"] if f["fraction"] > 0 and f["paired"])
        parts.append(f"{_with(size)} a measurable gain first appears after {tokens(count)} tokens "
                     f"({describe_point(points_[point])}: {interval(first['paired'])}; "
                     f"{len(gains)} of {compared} checkpoints measurably better)")  # fmt: skip
    rate = _augmentation_words(curves[0]["augment"])
    return f"Along the pre-training curve ({metric_words(primary)}, clean set, {rate}): " + "; ".join(parts) + "."
