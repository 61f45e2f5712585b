"""What an augmentation comparison shows: tables, plots and ``report.html``, all from ``compare.json``.

:func:`write_compare_report` needs nothing but a folder holding ``compare.json`` (written by
:func:`tokenmask.experiments.compare.compare_augment`): no model, no data, no training. It draws
``compare.png`` (the metric against the training-set size, one line per arm) and, with
corrupted sets, ``robustness.png`` (clean against corrupted, per kind of corruption), and
writes ``report.html`` with :mod:`tokenmask.experiments.report`. The same tables print on the
terminal (:meth:`AugmentComparison.table`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenmask.experiments.compare_stats import BASELINE_ARM, CLEAN, Paired
from tokenmask.experiments.report import REPORT_FILE, Figure, Heading, Paragraph, Part, Table, write_report
from tokenmask.plots import pyplot, save_png

COMPARE_FILE = "compare.json"
COMPARE_PLOT = "compare.png"
ROBUSTNESS_PLOT = "robustness.png"
_TEXT_COLUMNS = ("set", "train size", "arm")
"""Columns aligned left in the terminal (the others hold numbers)."""


@dataclass(frozen=True)
class AugmentComparison:
    """A comparison as ``compare.json`` holds it: ``content`` is that file's dictionary."""

    output: str
    content: Mapping[str, Any]

    @property
    def metric(self) -> str:
        return str(self.content["metric"])

    @property
    def complete(self) -> bool:
        return bool(self.content.get("complete"))

    @property
    def finished(self) -> list[Mapping[str, Any]]:
        """The runs that finished (the record lists the pending ones too)."""
        return [cell for cell in self.content["cells"] if cell.get("status") != "pending"]

    def rows(self, *, sets: str = "clean", metric: str | None = None) -> list[Mapping[str, Any]]:
        """Summary rows of the clean set (``sets="clean"``) or of the corrupted ones (``"corrupted"``)."""
        wanted = metric or self.metric
        return [r for r in self.content["summary"] if r["metric"] == wanted and (r["set"] == CLEAN) == (sets == "clean")]

    def tables(self) -> list[Table]:
        """The clean table, the corrupted one (if any), and one line per run."""
        tables = [clean_table(self)]
        if self.rows(sets="corrupted"):
            tables.append(corrupted_table(self))
        tables.append(runs_table(self))
        return tables

    def table(self) -> str:
        """The tables as aligned plain text, for the terminal."""
        return "\n\n".join(text_table(t) for t in self.tables())


def _spread(row: Mapping[str, Any]) -> str:
    return f"{row['mean']:.4f} ± {row['sd']:.4f}"


def _paired(row: Mapping[str, Any]) -> str:
    """``"+0.0300 [-0.0971, +0.1571] noise"``; ``"baseline"`` for rate 0 itself."""
    paired = row.get("paired")
    if not paired:
        return "baseline" if row["arm"] == BASELINE_ARM else "no rate 0 to compare with"
    return Paired(**{k: paired[k] for k in ("n", "mean", "sd", "low", "high")}).describe()


def clean_table(comparison: AugmentComparison) -> Table:
    """Per (size, arm): every metric on the clean set, mean ± sd, and the paired difference to rate 0."""
    metrics = list(comparison.content["metrics"])
    by_metric = {m: comparison.rows(metric=m) for m in metrics}
    rows = []
    for row in by_metric[comparison.metric]:
        cells = [row["size"], row["arm"], len(row["seeds"])]
        cells += [_spread(next(r for r in by_metric[m] if r["size"] == row["size"] and r["arm"] == row["arm"])) for m in metrics]
        rows.append([*cells, _paired(row)])
    columns = ["train size", "arm", "seeds", *(f"{m} mean ± sd" for m in metrics), f"{comparison.metric} vs rate 0 (95% t)"]
    return Table(columns, rows, caption="clean validation set")


def corrupted_table(comparison: AugmentComparison) -> Table:
    """Per (set, size, arm): every metric on the corrupted set, the compared metric's drop from
    clean (absolute and relative), and the paired difference to rate 0 on the same set."""
    metrics = [m for m in comparison.content["metrics"] if m != comparison.metric]
    others = {m: {(r["set"], r["size"], r["arm"]): r for r in comparison.rows(sets="corrupted", metric=m)} for m in metrics}
    rows = [
        [r["set"], r["size"], r["arm"], *(_spread(others[m][r["set"], r["size"], r["arm"]]) for m in metrics), _spread(r),
         f"{r['drop']:+.4f}", "" if r["relative_drop"] is None else f"{r['relative_drop']:+.1%}", _paired(r)]
        for r in sorted(comparison.rows(sets="corrupted"), key=lambda r: r["set"])
    ]  # fmt: skip
    columns = ["set", "train size", "arm", *(f"{m} mean ± sd" for m in metrics), f"{comparison.metric} mean ± sd",
               "drop", "relative drop", "vs rate 0 (95% t)"]  # fmt: skip
    return Table(columns, rows, caption=f"corrupted validation sets (drop = clean − corrupted {comparison.metric})")


def runs_table(comparison: AugmentComparison) -> Table:
    """One line per finished run: its sample, length, warnings and clean metric."""
    metric = comparison.metric
    rows = [
        [c["size"], c["arm"], c["seed"], c["examples"], c["steps"], f"{c['seconds']:.0f}", c["divergence_warnings"],
         f"{c['scores'][CLEAN][metric]:.4f}"]
        for c in comparison.finished
    ]  # fmt: skip
    columns = ["train size", "arm", "seed", "examples", "steps", "seconds", "divergence warnings", f"clean {metric}"]
    return Table(columns, rows, caption="runs")


def text_table(table: Table) -> str:
    """``table`` as aligned plain text: caption, header, a rule, rows."""
    cells = [[str(c) for c in table.columns]] + [[str(c) for c in row] for row in table.rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(table.columns))]
    left = [name in _TEXT_COLUMNS for name in table.columns]
    lines = [
        "  ".join(c.ljust(w) if is_text else c.rjust(w) for c, w, is_text in zip(row, widths, left)).rstrip() for row in cells
    ]
    return "\n".join([table.caption, lines[0], "-" * len(lines[0]), *lines[1:]])


# ---- plots --------------------------------------------------------------------------------


def _examples_by_size(comparison: AugmentComparison) -> dict[str, float]:
    """The mean number of training examples of each size name (``"all"`` -> the full count)."""
    counts: dict[str, list[int]] = {}
    for cell in comparison.finished:
        counts.setdefault(str(cell["size"]), []).append(int(cell["examples"]))
    return {size: sum(n) / len(n) for size, n in counts.items()}


def plot_sizes(comparison: AugmentComparison, path: Path) -> Path:
    """The clean metric against the number of training examples: per arm, mean ± sd over seeds."""
    plt = pyplot()
    examples = _examples_by_size(comparison)
    figure, axes = plt.subplots(figsize=(6.5, 4))
    for arm in dict.fromkeys(r["arm"] for r in comparison.rows()):
        rows = sorted((r for r in comparison.rows() if r["arm"] == arm), key=lambda r: examples[r["size"]])
        x = [examples[r["size"]] for r in rows]
        axes.errorbar(x, [r["mean"] for r in rows], yerr=[r["sd"] for r in rows], fmt="o-", capsize=3, label=arm)
    if len(examples) > 1:
        axes.set_xscale("log")
    axes.set(xlabel="training examples", ylabel=f"clean validation {comparison.metric}")
    axes.set_title("[MASK] augmentation by training-set size (mean ± sd over seeds)")
    axes.grid(alpha=0.3)
    axes.legend(fontsize="small")
    figure.tight_layout()
    return save_png(figure, path)


def plot_robustness(comparison: AugmentComparison, path: Path) -> Path:
    """Clean against corrupted: one panel per (size, kind of corruption), the metric against the
    corruption rate (0 = clean), one line per arm."""
    plt = pyplot()
    corrupted = comparison.rows(sets="corrupted")
    kinds = list(dict.fromkeys(r["set"].rsplit("-", 1)[0] for r in corrupted))
    sizes = list(dict.fromkeys(r["size"] for r in comparison.rows()))
    figure, grid = plt.subplots(len(sizes), len(kinds), figsize=(4 * len(kinds), 3.2 * len(sizes)), squeeze=False, sharey="row")
    for row_index, size in enumerate(sizes):
        for column, kind in enumerate(kinds):
            axes = grid[row_index][column]
            for clean in (r for r in comparison.rows() if r["size"] == size):
                points = sorted(
                    (float(r["set"].rsplit("-", 1)[1]), r["mean"])
                    for r in corrupted
                    if r["size"] == size and r["arm"] == clean["arm"] and r["set"].rsplit("-", 1)[0] == kind
                )
                axes.plot([0.0] + [p[0] for p in points], [clean["mean"]] + [p[1] for p in points], "o-", label=clean["arm"])
            axes.set(title=f"{kind}, train size {size}", xlabel="share of words corrupted", ylabel=comparison.metric)
            axes.grid(alpha=0.3)
    grid[0][0].legend(fontsize="small")
    figure.tight_layout()
    return save_png(figure, path)


# ---- the page -----------------------------------------------------------------------------


def report_parts(comparison: AugmentComparison, output: Path) -> list[Part]:
    """The page: what was run, the tables, the plots (drawn into ``output``)."""
    content, tables = comparison.content, comparison.tables()
    plan = content["plan"]
    parts: list[Part] = [
        Paragraph(
            f"Fine-tuning of {content['config'].get('model')} at augmentation arms {', '.join(plan['arms'])}, "
            f"training-set sizes {', '.join(plan['train_sizes'])}, seeds {', '.join(map(str, plan['seeds']))}; "
            f"each run {content['budget']}."
        ),
        Paragraph(f"Test: {content['test']}.", note=True),
    ]
    if not comparison.complete:
        parts.append(Paragraph("Incomplete: some runs have not finished (run again with --resume).", note=True))
    parts += [Heading("Clean validation set"), tables[0], Figure(plot_sizes(comparison, output / COMPARE_PLOT),
              caption=f"clean {comparison.metric} against training examples, mean ± sd over seeds")]  # fmt: skip
    if len(tables) > 2:
        figure = plot_robustness(comparison, output / ROBUSTNESS_PLOT)
        parts += [Heading("Corrupted validation sets"), tables[1], Figure(figure, caption="clean (rate 0) and corrupted sets")]
    parts += [Heading("Runs"), tables[-1]]
    return parts


def write_compare_report(output: str | Path) -> AugmentComparison:
    """Read ``OUTPUT/compare.json``; write ``compare.png``, ``robustness.png`` (with corrupted sets)
    and ``report.html`` into ``OUTPUT``; return the comparison.

    Raises:
        FileNotFoundError: no ``compare.json`` in ``output``.
        ValueError: a ``compare.json`` with no finished run.
    """
    output = Path(output)
    comparison = AugmentComparison(str(output), json.loads((output / COMPARE_FILE).read_text(encoding="utf-8")))
    if not comparison.finished:
        raise ValueError(f"{output / COMPARE_FILE} holds no finished run yet")
    write_report(output / REPORT_FILE, "[MASK] augmentation in fine-tuning", report_parts(comparison, output))
    return comparison
