"""The answer on the user's task, from a study's ``study.json`` alone: the tables, the plot and the best model's line.

:func:`downstream` recomputes :func:`~tokenmask.experiments.downstream_stats.summarize_downstream`
from the record's cells (so a partial or older record reads right); :func:`downstream_parts` lays
out what stands behind the verdict on the page (against the baseline per label budget, on the
corrupted sets, augmentation, masking against token masking, the curve over pre-training tokens);
:func:`compact_rows` is the terminal's table. :mod:`tokenmask.experiments.study_report` puts them
on the page, first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tokenmask.experiments.compare_stats import CLEAN
from tokenmask.experiments.downstream_stats import FINETUNE, interval, metric_words, summarize_downstream, tokens
from tokenmask.experiments.report import Figure, Heading, Paragraph, Part, Table
from tokenmask.plots import pyplot, save_png

DOWNSTREAM_PLOT = "downstream.png"
_PRIMARY_ORDER = ("span_f1", "macro_f1", "accuracy")
"""Which metric the verdict speaks of when the record does not say: the first of these the cells have."""


def role(cell: Mapping[str, Any]) -> str:
    """``pretrain``, ``baseline`` (the model the cells start from) or ``finetune``; a record
    written before roles tells the first two apart by the strategy."""
    return str(cell.get("role") or ("pretrain" if cell.get("strategy") is not None else "baseline"))


def downstream(study: Mapping[str, Any]) -> dict[str, Any] | None:
    """The study's :func:`~tokenmask.experiments.downstream_stats.summarize_downstream`, computed
    afresh from its cells (so a partial or older record reads right), with the metrics and the
    primary metric its ``downstream`` names (or, where it names none, those the cells were scored
    by, the primary the first of span-F1, macro-F1, accuracy); None without fine-tuning cells."""
    tuning = [cell for cell in study["cells"] if role(cell) == FINETUNE]
    if not tuning:
        return None
    stored = study.get("downstream") or {}
    scored = dict.fromkeys(metric for cell in tuning for metric in (cell.get("scores") or {}).get(CLEAN, {}))
    metrics = list(stored.get("metrics") or scored or ("accuracy", "macro_f1"))
    primary = stored.get("primary") or next((m for m in _PRIMARY_ORDER if m in metrics), metrics[0])
    return summarize_downstream(study["cells"], metrics=metrics, primary=primary)


def _spread_text(row: Mapping[str, Any] | None) -> str:
    if row is None:
        return "-"
    return f"{row['mean']:.4f} ± {row['sd']:.4f}" if len(row["values"]) > 1 else f"{row['mean']:.4f}"


def _delta(row: Mapping[str, Any] | None) -> str:
    return interval(row["paired"], unit="") if row and row["paired"] else "-"


def _judged(row: Mapping[str, Any] | None) -> str:
    """The verdict word: better, worse, no measurable difference, too wide to tell, one seed;
    ``reference`` for the baseline, ``no baseline at this rate`` for a continued model fine-tuned
    at an augmentation rate the baseline was not, ``no pair yet`` where no seed pairs so far."""
    if row is None:
        return "-"
    if row["paired"]:
        return str(row["paired"]["verdict"])
    if row["against"] is None:
        return "reference" if row["fraction"] == 0.0 else "no baseline at this rate"
    return "no pair yet"


def _where(row: Mapping[str, Any]) -> list[str]:
    """A row's point, fraction and augmentation rate as table cells."""
    return [row["point"], f"{row['fraction']:g}", f"{row['augment']:g}"]


def baseline_tables(summary: Mapping[str, Any]) -> list[Table]:
    """Per label budget, the clean set: each (point, fraction, augment) with its pre-training
    tokens, every metric's mean ± sd and paired difference to the baseline, and the verdict word
    on the primary metric."""
    tables = []
    for size in summary["sizes"]:
        caption = f"{size} labels" if size != "all" else "all labels"
        tables.append(Table([*_baseline_columns(summary), "verdict"], _baseline_lines(summary, CLEAN, size),
                            caption=f"{caption}: clean set, against the checkpoint fine-tuned directly"))  # fmt: skip
    return tables


def robustness_tables(summary: Mapping[str, Any]) -> list[Table]:
    """Per corrupted set, every label budget: the columns of :func:`baseline_tables`, against the
    baseline scored on the same corrupted set."""
    columns = ["labels", *_baseline_columns(summary), "verdict"]
    return [
        Table(columns, [[size, *line] for size in summary["sizes"] for line in _baseline_lines(summary, kind, size)],
              caption=f"{kind}: against the checkpoint fine-tuned directly, scored on the same set")
        for kind in summary["sets"] if kind != CLEAN
    ]  # fmt: skip


def _baseline_columns(summary: Mapping[str, Any]) -> list[str]:
    columns = ["point", "fraction", "augment", "pre-training tokens", "runs"]
    for metric in summary["metrics"]:
        columns += [f"{metric_words(metric)} mean ± sd", f"Δ {metric_words(metric)} (points, 95% CI)"]
    return columns


def _baseline_lines(summary: Mapping[str, Any], set_name: str, size: str) -> list[list[str]]:
    """One line per (point, fraction, augment) of ``size`` on ``set_name``: the columns of :func:`_baseline_columns`
    and the verdict word on the primary metric."""
    metrics, primary = summary["metrics"], summary["primary"]
    rows = {(r["point"], r["fraction"], r["augment"], r["metric"]): r
            for r in summary["against_baseline"] if r["set"] == set_name and r["size"] == size}  # fmt: skip
    lines = []
    for point, fraction, augment in dict.fromkeys(k[:3] for k in rows):
        found = {m: rows.get((point, fraction, augment, m)) for m in metrics}
        first = next(row for row in found.values() if row is not None)
        line = [*_where(first), tokens(first["pretrain_tokens"]), str(len(first["values"]))]
        for metric in metrics:
            line += [_spread_text(found[metric]), _delta(found[metric])]
        lines.append([*line, _judged(found[primary])])
    return lines


def comparison_table(rows: Sequence[Mapping[str, Any]], *, against: str, caption: str) -> Table:
    """Rows of every metric against what each is compared with (``against`` names that column):
    the clean set first, then each corrupted one, each by label budget in the summary's order."""
    ordered = sorted(rows, key=lambda r: (r["set"] != CLEAN, r["set"]))
    lines = [[r["size"], r["set"], metric_words(r["metric"]), *_where(r), _against(r["against"]), _spread_text(r), _delta(r),
              _judged(r)] for r in ordered]  # fmt: skip
    columns = ["labels", "set", "metric", "point", "fraction", "augment", against, "mean ± sd", "Δ (points, 95% CI)", "verdict"]
    return Table(columns, lines, caption=caption)


def _against(reference: Mapping[str, Any] | None) -> str:
    return "-" if reference is None else f"{reference['point']} at augment {reference['augment']:g}"


def compact_rows(summary: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The terminal's downstream table: the clean primary metric against the baseline, every label budget."""
    rows = [r for r in summary["against_baseline"] if r["set"] == CLEAN and r["metric"] == summary["primary"]]
    lines = [[r["size"], *_where(r), tokens(r["pretrain_tokens"]), _spread_text(r), _delta(r), _judged(r)] for r in rows]
    return ["labels", "point", "fraction", "augment", "tokens", "mean ± sd", "Δ points [95% CI]", "verdict"], lines


def tuning_rows(study: Mapping[str, Any], metrics: Sequence[str]) -> tuple[list[str], list[list[str]]]:
    """Every fine-tuning cell: its training examples, steps, minutes and clean scores (``pending`` while it waits)."""
    columns = ["cell", "examples", "steps", "minutes", *(metric_words(m) for m in metrics)]
    rows = []
    for cell in (c for c in study["cells"] if role(c) == FINETUNE):
        if cell.get("status") == "pending" or not cell.get("scores"):
            rows.append([cell["name"], *["pending"] * (len(columns) - 1)])
            continue
        clean = cell["scores"].get(CLEAN, {})
        rows.append([cell["name"], str(cell.get("examples", "-")), str(cell.get("steps", "-")),
                     f"{cell['minutes']:.1f}" if "minutes" in cell else "-",
                     *(f"{clean[m]:.4f}" if m in clean else "-" for m in metrics)])  # fmt: skip
    return columns, rows


def plot_downstream(summary: Mapping[str, Any], path: Path) -> Path:
    """The clean primary metric against pre-training tokens: one line per (point, label budget),
    the checkpoint fine-tuned directly at 0, error bars the sd over runs."""
    plt = pyplot()
    figure, axes = plt.subplots(figsize=(8, 5))
    curves = [c for c in summary["curve"] if c["metric"] == summary["primary"]]
    points = list(dict.fromkeys(c["point"] for c in curves))
    markers, styles = "osD^v", ["-", "--", ":", "-."]
    for curve in curves:
        steps, p, s = curve["fractions"], points.index(curve["point"]), summary["sizes"].index(curve["size"])
        axes.errorbar([f["pretrain_tokens"] for f in steps], [f["mean"] for f in steps], yerr=[f["sd"] for f in steps],
                      fmt=markers[s % len(markers)], linestyle=styles[s % len(styles)], color=f"C{p % 10}", capsize=3,
                      label=f"{curve['point']}, {curve['size']} labels")  # fmt: skip
    axes.set(
        xlabel="pre-training tokens (0: the checkpoint fine-tuned directly)", ylabel=f"clean {metric_words(summary['primary'])}"
    )
    axes.set_title("the task's metric against continued pre-training (mean ± sd over runs)")
    axes.grid(alpha=0.3)
    if curves:
        axes.legend(fontsize=7, ncol=2)
    figure.tight_layout()
    return save_png(figure, path)


def downstream_parts(summary: Mapping[str, Any], folder: Path) -> list[Part]:
    """The tables behind the verdict: against the baseline per label budget, on the corrupted
    sets, augmentation, masking against token masking, replaced-token detection against the
    masked LM (every metric, every set); the plot (written into ``folder``)."""
    primary = summary["primary"]
    parts: list[Part] = [Heading("Against the checkpoint fine-tuned directly"), *baseline_tables(summary)]
    if len(summary["sets"]) > 1:
        parts += [Heading("Robustness: corrupted validation sets"), *robustness_tables(summary)]
    comparisons = (
        ("augmentation", "[MASK] augmentation while fine-tuning", "against the same model fine-tuned without augmentation"),
        ("masking", "Masking against token masking", "against token masking at the same rate"),
        ("objective", "Replaced-token detection against the masked LM", "against the masked LM with the same masking"),
    )
    for kind, heading, caption in comparisons:
        if summary.get(kind):
            parts += [Heading(heading), comparison_table(summary[kind], against="against", caption=caption)]
    if any(c["metric"] == primary for c in summary["curve"]):
        figure = plot_downstream(summary, folder / DOWNSTREAM_PLOT)
        parts.append(Figure(figure, caption=f"clean {metric_words(primary)} against pre-training tokens, mean ± sd over runs"))
    return parts


def best_model_parts(study: Mapping[str, Any]) -> list[Part]:
    """``Best model: NAME (macro-F1 0.7412), saved in best-model/. How it was chosen.``"""
    best = study.get("best_model")
    if not best:
        return []
    how = str(best.get("how") or "").strip()
    how = how[:1].upper() + how[1:] + ("" if not how or how.endswith(".") else ".")
    return [Paragraph(f"Best model: {best['name']} ({metric_words(best['metric'])} {best['value']:.4f}), saved in "
                      f"{best['folder']}/. {how}".rstrip())]  # fmt: skip
