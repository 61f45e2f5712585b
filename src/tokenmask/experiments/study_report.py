"""What a study found, from its ``study.json`` alone: the terminal table, the plots, ``report.html``.

Nothing here trains or loads a model, so a report can be rebuilt (or tested) from the JSON:
:func:`write_study_report` ``(OUTPUT)`` reads ``OUTPUT/study.json`` and writes
``OUTPUT/curves.png`` (fixed-mask accuracy against training tokens, one line per cell),
``OUTPUT/final.png`` (the final scores by strategy and rate, mean and spread over seeds), with
fine-tuning cells ``OUTPUT/downstream.png`` (the task's metric against pre-training tokens), and
the self-contained ``OUTPUT/report.html`` (:mod:`tokenmask.experiments.report`). With fine-tuning
cells the page opens with the answer on the user's task: the verdict in words, then the tables
of :mod:`tokenmask.experiments.downstream_stats` behind it; the pre-training sections follow.
"""

from __future__ import annotations

import json
import statistics
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenmask.experiments.downstream_report import (
    best_model_parts,
    compact_rows,
    downstream,
    downstream_parts,
    role,
    tuning_rows,
)
from tokenmask.experiments.downstream_stats import FINETUNE, metric_words, verdict
from tokenmask.experiments.report import REPORT_FILE, Figure, Heading, Paragraph, Part, Table, write_report
from tokenmask.plots import pyplot, save_png

STUDY_FILE = "study.json"
CURVES_PLOT = "curves.png"
FINAL_PLOT = "final.png"


@dataclass(frozen=True)
class Spread:
    """Values over seeds: their mean and sample standard deviation (0 for one value).

    ``Spread.of([0.10, 0.14])  ->  mean 0.12, std 0.0283``; ``Spread.of([])  ->  None``.
    """

    values: tuple[float, ...]
    mean: float
    std: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread | None:
        if not values:
            return None
        values = tuple(float(v) for v in values)
        return cls(values, statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0)

    def __str__(self) -> str:
        return f"{self.mean:.4f} ± {self.std:.4f}" if len(self.values) > 1 else f"{self.mean:.4f}"


@dataclass(frozen=True)
class PointSummary:
    """One pre-trained grid point over its finished seeds: the common fixed-mask accuracy and
    loss, and the accuracy on its own masks (None where not measured)."""

    point: str
    cells: tuple[Mapping[str, Any], ...]
    accuracy: Spread | None
    loss: Spread | None
    own_accuracy: Spread | None


def summarize(study: Mapping[str, Any]) -> list[PointSummary]:
    """One summary per pre-trained grid point, in the study's order; pending cells are left out."""
    points: dict[str, list[Mapping[str, Any]]] = {}
    for cell in (c for c in study["cells"] if role(c) == "pretrain"):
        points.setdefault(cell["point"], [])
        if cell.get("status") != "pending":
            points[cell["point"]].append(cell)

    def spread(cells: Sequence[Mapping[str, Any]], *path: str) -> Spread | None:
        values = []
        for cell in cells:
            value: Any = cell
            for key in path:
                value = value.get(key) if isinstance(value, Mapping) else None
            if value is not None:
                values.append(value)
        return Spread.of(values)

    return [
        PointSummary(
            point=point,
            cells=tuple(cells),
            accuracy=spread(cells, "common", "accuracy"),
            loss=spread(cells, "common", "loss"),
            own_accuracy=spread(cells, "own", "accuracy"),
        )
        for point, cells in points.items()
    ]


def summary_rows(study: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The columns and rows of the pre-training summary table (mean ± std over seeds; ``-`` where not measured)."""
    columns = ["cell (strategy-rate-corruption)", "seeds", "fixed-mask accuracy", "fixed-mask loss", "own-mask accuracy"]
    rows = [
        [s.point, str(len(s.cells)), *(str(x) if x else "-" for x in (s.accuracy, s.loss, s.own_accuracy))]
        for s in summarize(study)
    ]
    return columns, rows


def study_table(study: Mapping[str, Any]) -> str:
    """The pre-training summary as aligned text for the terminal, a line saying how many cells
    finished; with fine-tuning cells, then the clean scores against the baseline and the verdict."""
    lines = _aligned(*summary_rows(study))
    finished = sum(cell.get("status") != "pending" for cell in study["cells"])
    lines.append(f"{finished} of {len(study['cells'])} cells finished")
    summary = downstream(study)
    if summary is not None and summary["sizes"]:
        lines += ["", f"fine-tuned, clean set, against the checkpoint fine-tuned directly ({metric_words(summary['primary'])}):"]
        lines += _aligned(*compact_rows(summary))
        for sentence in verdict(summary):
            lines += ["", textwrap.fill(sentence, 100)]
    return "\n".join(lines)


def _aligned(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max([len(c), *(len(r[i]) for r in rows)]) for i, c in enumerate(columns)]
    return ["  ".join(text.ljust(width) for text, width in zip(line, widths)).rstrip() for line in [columns, *rows]]


def cell_rows(study: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Every pre-training and baseline cell: its steps, tokens, minutes and final scores."""
    columns = ["cell", "steps", "tokens", "minutes", "fixed-mask loss", "fixed-mask accuracy", "own-mask accuracy"]
    rows = []
    for cell in (c for c in study["cells"] if role(c) != FINETUNE):
        if cell.get("status") == "pending":
            rows.append([cell["name"], *["pending"] * (len(columns) - 1)])
            continue
        common, own = cell.get("common") or {}, cell.get("own") or {}
        rows.append([
            cell["name"], f"{cell['steps']:,}" if "steps" in cell else "-", f"{cell['tokens']:,}" if "tokens" in cell else "-",
            f"{cell['minutes']:.1f}" if "minutes" in cell else "-",
            *(f"{d[k]:.4f}" if k in d else "-" for d, k in ((common, "loss"), (common, "accuracy"), (own, "accuracy"))),
        ])  # fmt: skip
    return columns, rows


def plot_curves(study: Mapping[str, Any], path: Path) -> Path:
    """Fixed-mask accuracy against training tokens: one line per finished cell, a colour per strategy,
    a line style per rate, triangles for replaced-token detection (its generator's accuracy)."""
    plt = pyplot()
    figure, axes = plt.subplots(figsize=(8, 5))
    strategies = list(dict.fromkeys(c["strategy"] for c in study["cells"] if c.get("strategy")))
    rates = list(dict.fromkeys(c["rate"] for c in study["cells"] if c.get("rate") is not None))
    styles = ["-", "--", ":", "-."]
    for cell in study["cells"]:
        if role(cell) != "pretrain" or not cell.get("curve"):
            continue
        tokens = [p["tokens"] for p in cell["curve"]]
        accuracy = [p["accuracy"] for p in cell["curve"]]
        colour = f"C{strategies.index(cell['strategy']) % 10}"
        style = styles[rates.index(cell["rate"]) % len(styles)]
        marker = "^" if cell.get("objective") == "rtd" else "o"  # a detector's curve is its generator's
        axes.plot(tokens, accuracy, style, color=colour, marker=marker, markersize=3, label=cell["name"])
    axes.set(xlabel="training tokens", ylabel="fixed-mask accuracy (token-level 80/10/10)")
    axes.set_title("learning curves, every cell on the same masks")
    axes.grid(alpha=0.3)
    if axes.lines:
        axes.legend(fontsize=7, ncol=2)
    figure.tight_layout()
    return save_png(figure, path)


def _series(summary: PointSummary) -> str:
    """A point without its strategy, the series it is plotted in: ``span-0.3-bert`` -> ``0.3-bert``,
    ``rtd-span-0.3-bert`` -> ``rtd-0.3-bert``."""
    return summary.point.replace(f"{summary.cells[0]['strategy']}-", "", 1)


def plot_final(study: Mapping[str, Any], path: Path) -> Path:
    """The final fixed-mask accuracy by strategy (x) and rate schedule and corruption (one series
    each): each seed a dot, the mean ± std a bar."""
    plt = pyplot()
    summaries = summarize(study)
    figure, axes = plt.subplots(figsize=(7, 4.5))
    strategies = list(dict.fromkeys(c["strategy"] for c in study["cells"] if role(c) == "pretrain"))
    named = [(s, str(s.cells[0]["strategy"]), _series(s)) for s in summaries]
    series = list(dict.fromkeys(name for _, _, name in named))
    width = 0.8 / max(1, len(series))
    labelled: set[str] = set()
    for s, strategy, name in named:
        if s.accuracy is None:
            continue
        number = series.index(name)
        x = strategies.index(strategy) + (number - (len(series) - 1) / 2) * width
        axes.bar(x, s.accuracy.mean, width * 0.9, yerr=s.accuracy.std, capsize=3, color=f"C{number % 10}", alpha=0.7,
                 label=None if name in labelled else name)  # fmt: skip
        labelled.add(name)
        axes.scatter([x] * len(s.accuracy.values), s.accuracy.values, color="black", s=10, zorder=3)
    axes.set_xticks(range(len(strategies)), strategies)
    axes.set(ylabel="fixed-mask accuracy", title="final fixed-mask accuracy (mean ± std over seeds)")
    axes.grid(alpha=0.3, axis="y")
    if labelled:
        axes.legend(fontsize=8)
    figure.tight_layout()
    return save_png(figure, path)


def study_parts(study: Mapping[str, Any], folder: Path) -> list[Part]:
    """The report's paragraphs, tables and figures (the plots are written into ``folder``): with
    fine-tuning cells the verdict and :func:`downstream_parts` first, then the pre-training."""
    plan, evaluation = study["plan"], study["evaluation"]
    grid = plan["grid"]
    settings = plan["settings"]
    budget = ", ".join(f"{k} {settings[k]}" for k in ("max_steps", "max_tokens", "max_time") if settings.get(k) is not None)
    finished = sum(cell.get("status") != "pending" for cell in study["cells"])
    summary_columns, summary_table = summary_rows(study)
    columns, rows = cell_rows(study)
    summary = downstream(study)
    parts: list[Part] = []
    if summary is not None:
        parts += [Paragraph(sentence) for sentence in verdict(summary) or ["No fine-tuning cell has finished yet."]]
    if not study.get("complete"):
        parts.append(Paragraph(f"Incomplete: {finished} of {len(study['cells'])} cells finished.", note=True))
    if summary is not None and summary["sizes"]:
        parts += [*downstream_parts(summary, folder), *best_model_parts(study), Heading("Pre-training")]
    parts += [
        Paragraph(
            (f"Objectives {', '.join(grid['objectives'])} x strategies " if grid.get("objectives") else "Strategies ")
            + f"{', '.join(grid['strategies'])} x rates {', '.join(f'{r:g}' for r in grid['rates'])} x corruption "
            f"{', '.join(grid['corruptions'])}"
            + (f" x rate ends {grid['rate_ends']}" if grid["rate_ends"] != [None] else "")
            + f", {grid['seeds']} seed(s) each; every cell {settings.get('preset')}, budget {budget}. Every cell is scored on "
            f"the same fixed masks: {evaluation['masking']} at {evaluation['mlm_probability']:g} on "
            f"{evaluation['blocks']} validation blocks, whatever it trained with; its own-masking score is beside it."
            + (
                " A replaced-token detection cell (rtd-…) is scored by its generator, a smaller model than the "
                "masked LM beside it: compare the objectives downstream."
                if grid.get("objectives")
                else ""
            )
        ),
        Heading("Summary"),
        Table(summary_columns, summary_table, caption="final scores, mean ± std over seeds"),
        Figure(plot_final(study, folder / FINAL_PLOT), caption="final scores by strategy; dots are seeds"),
        Figure(plot_curves(study, folder / CURVES_PLOT), caption="fixed-mask accuracy against training tokens"),
        Heading("Cells"),
        Table(columns, rows, caption="pre-training and baseline cells" if summary is not None else ""),
    ]
    if summary is not None:
        parts.append(Table(*tuning_rows(study, summary["metrics"]), caption="fine-tuning cells, clean set"))
    parts += [Heading("Settings"), Paragraph(", ".join(f"{k}: {v}" for k, v in settings.items()), note=True)]
    if plan.get("finetune"):
        parts.append(Paragraph(f"fine-tuning: {_described(plan['finetune'])}", note=True))
    return parts


def _described(settings: Any) -> str:
    """``{"seeds": [0, 1], "settings": {"lr": 5e-05}}`` -> ``"seeds: [0, 1], lr: 5e-05"`` (nested settings inline)."""
    if not isinstance(settings, Mapping):
        return str(settings)
    return ", ".join(_described(v) if isinstance(v, Mapping) else f"{k}: {v}" for k, v in settings.items())


def write_study_report(folder: str | Path) -> Path:
    """Write ``folder/report.html`` (and its plots) from ``folder/study.json``; returns the page's path.

    Raises:
        FileNotFoundError: no ``study.json`` in ``folder``.
        ValueError: a file that is not a study's.
    """
    folder = Path(folder)
    study = json.loads((folder / STUDY_FILE).read_text(encoding="utf-8"))
    if not isinstance(study, Mapping) or "cells" not in study or "plan" not in study:
        raise ValueError(f"{folder / STUDY_FILE} is not a study file")
    return write_report(folder / REPORT_FILE, "Which masking pays: a pre-training study", study_parts(study, folder))
