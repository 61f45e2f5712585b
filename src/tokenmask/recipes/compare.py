"""Does [MASK] augmentation help? The same fine-tuning at several augmentation rates and seeds.

One :func:`~tokenmask.recipes.finetune.finetune` run per (rate, seed) on data read once, each in
its own folder ``OUTPUT/rate-R/seed-S``; the final validation score of each run is gathered
per rate into a mean and a sample standard deviation, written to ``OUTPUT/compare.json`` and
plotted in ``OUTPUT/compare.png``. Seeds change the head's initialisation, the batch order,
the augmentation masks and dropout, so the spread shows how much of a difference is noise.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from tokenmask.recipes.classifier import load_classifier_tokenizer
from tokenmask.recipes.config import FinetuneConfig
from tokenmask.recipes.finetune import finetune
from tokenmask.recipes.finetune_data import load_finetune_data
from tokenmask.settings import flatten
from tokenmask.train.loop import QuietReporter, Reporter

COMPARE_FILE = "compare.json"
COMPARE_PLOT = "compare.png"


@dataclass(frozen=True)
class RateSummary:
    """One rate's final scores over its seeds: ``values`` in seed order, their mean and sample
    standard deviation (0 with a single seed)."""

    rate: float
    values: tuple[float, ...]
    mean: float
    std: float

    @classmethod
    def of(cls, rate: float, values: Sequence[float]) -> RateSummary:
        """``RateSummary.of(0.1, [0.80, 0.84])  ->  mean 0.82, std 0.0283`` (n - 1 in the denominator)."""
        values = tuple(float(v) for v in values)
        std = statistics.stdev(values) if len(values) > 1 else 0.0
        return cls(rate=float(rate), values=values, mean=statistics.fmean(values), std=std)


@dataclass(frozen=True)
class AugmentComparison:
    """The comparison's outcome: the metric compared and one summary per rate, in the order given."""

    metric: str
    summaries: tuple[RateSummary, ...]
    output: str

    def table(self) -> str:
        """One line per rate: ``rate 0.05: macro_f1 0.8123 ± 0.0101 over 3 seeds``."""
        return "\n".join(
            f"rate {s.rate:<5g}: {self.metric} {s.mean:.4f} ± {s.std:.4f} over {len(s.values)} seed{'s' if len(s.values) > 1 else ''}"
            for s in self.summaries
        )

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "rates": [asdict(s) for s in self.summaries]}


class _Relay:
    """Passes a run's progress and warnings on, not its set-up messages (said once for all runs)."""

    def __init__(self, reporter: Reporter) -> None:
        self.reporter = reporter

    def message(self, text: str) -> None:
        if text.startswith("warning"):
            self.reporter.message(text)

    def step(self, step: int, total: int | None, loss: float, tokens_per_s: float) -> None:
        self.reporter.step(step, total, loss, tokens_per_s)


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


def compare_augment(
    config: FinetuneConfig,
    *,
    rates: Sequence[float],
    seeds: int = 3,
    reporter: Reporter = QuietReporter(),
    command: str | None = None,
) -> AugmentComparison:
    """Fine-tune once per rate and seed (seeds ``config.loop.seed``, ``config.loop.seed + 1``, …) and
    compare the final validation ``config.metric`` per rate.

    Every run has ``config``'s settings but its own ``output`` folder, ``augment_rate`` and
    ``seed``; ``augment_adaptive`` applies to the runs that augment at all. ``command`` (the
    command line, as typed) goes into each run's model cards.

    Raises:
        ValueError: bad rates or seeds (:func:`check_rates`), and the errors of the runs.
    """
    check_rates(rates, seeds)
    output = Path(config.loop.output)
    tokenizer = load_classifier_tokenizer(config.model)
    data = load_finetune_data(config, tokenizer)
    reporter.message(data.describe())
    summaries = []
    for rate in rates:
        values = []
        for seed in range(config.loop.seed, config.loop.seed + seeds):
            run = replace(
                config.with_loop(output=str(output / f"rate-{rate:g}" / f"seed-{seed}"), seed=seed),
                augment_rate=rate,
                augment_adaptive=config.augment_adaptive and rate > 0,
            )
            result = finetune(run, _Relay(reporter), data=data, command=command)
            values.append(result.final.metrics()[config.metric])
            reporter.message(f"rate {rate:g}, seed {seed}: {config.metric} {values[-1]:.4f} after {result.steps} steps")
        summaries.append(RateSummary.of(rate, values))
    comparison = AugmentComparison(metric=config.metric, summaries=tuple(summaries), output=str(output))
    (output / COMPARE_FILE).write_text(
        json.dumps({**comparison.to_dict(), "config": flatten(config)}, indent=2), encoding="utf-8"
    )
    plot_comparison(comparison, output / COMPARE_PLOT)
    return comparison


def plot_comparison(comparison: AugmentComparison, path: Path) -> Path:
    """Save the metric against the augmentation rate: each run a dot, each rate's mean ± std a bar."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 4))
    for summary in comparison.summaries:
        axes.scatter([summary.rate] * len(summary.values), summary.values, color="tab:gray", alpha=0.6, s=14)
    rates = [s.rate for s in comparison.summaries]
    means = [s.mean for s in comparison.summaries]
    stds = [s.std for s in comparison.summaries]
    axes.errorbar(rates, means, yerr=stds, fmt="o-", capsize=4, color="tab:blue", label="mean ± std over seeds")
    axes.set(xlabel="augmentation rate ([MASK] share of training tokens)", ylabel=f"validation {comparison.metric}")
    axes.set_title("fine-tuning with [MASK] augmentation")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return Path(path)
