"""What a study found, from its ``study.json`` alone: the terminal table, the plots and one self-contained ``report.html``.

The page opens with the answer on the user's task, a table per label budget with a verdict column,
then the other comparisons and the pre-training. Everything is inside the file (the style, each plot
as a ``data:`` URI, no script), so it opens offline and can be mailed.
"""

from __future__ import annotations

import base64
import html
import json
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tokenmask.experiments.runner import RECORD
from tokenmask.experiments.stats import CLEAN, COMPARISONS, size_order
from tokenmask.files import write_text
from tokenmask.plots import pyplot, save_png

REPORT_FILE, CURVES_PLOT, DOWNSTREAM_PLOT = "report.html", "curves.png", "downstream.png"
_STYLE = """body { font: 15px/1.45 system-ui, sans-serif; max-width: 72rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
h2 { font-size: 1.25rem; margin-top: 2rem; border-bottom: 1px solid #ddd; } p.note { color: #555; }
table { border-collapse: collapse; margin: 0.8rem 0; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.6rem; text-align: right; } th { background: #f3f3f3; }
td:first-child, th:first-child { text-align: left; } caption { text-align: left; font-weight: 600; } img { max-width: 100%; }"""
_WORDS = {"accuracy": "accuracy", "macro_f1": "macro-F1", "span_f1": "span-F1", "exact_match": "exact match", "f1": "F1",
          "recall@1": "Recall@1", "mrr@10": "MRR@10", "ndcg@10": "nDCG@10"}  # fmt: skip
_TITLES = {
    "augmentation": "[MASK] augmentation against none",
    "masking": "each strategy against token masking at the same rate",
    "objective": "replaced-token detection against the masked LM with the same masking",
}


def spread(values: Sequence[float]) -> str:
    """``"0.7000 ± 0.0100"`` over seeds, ``"0.7000"`` for one, ``"-"`` for none."""
    sd = f" ± {statistics.stdev(values):.4f}" if len(values) > 1 else ""
    return f"{statistics.fmean(values):.4f}{sd}" if values else "-"


def delta(row: Mapping[str, Any]) -> str:
    """A paired difference in points of the metric: ``"+1.2 [+0.3, +2.1]"``, ``"+1.2 (1 seed)"``, ``"-"``."""
    p = row.get("paired")
    interval = "(1 seed)" if not p or p["low"] is None else f"[{p['low'] * 100:+.1f}, {p['high'] * 100:+.1f}]"
    return f"{p['mean'] * 100:+.1f} {interval}" if p else "-"


def verdict(row: Mapping[str, Any]) -> str:
    """The verdict column: the paired verdict, ``reference`` for the baseline's own row, ``no pair`` without shared seeds."""
    if row.get("paired"):
        return str(row["paired"]["verdict"])
    return "reference" if row["against"] is None and row["fraction"] == 0.0 else "no pair"


def headline_rows(summary: Mapping[str, Any], size: str, metric: str | None = None) -> list[Mapping[str, Any]]:
    """A label budget's rows on the clean set: each model against the starting model at the same augmentation,
    and the starting model at an augmentation against itself without (what ``--strategies none`` asks)."""
    augmented = {(r["size"], r["set"], r["metric"], r["point"], r["fraction"], r["augment"]): r for r in summary["augmentation"]}
    rows = [r for r in summary["against_baseline"] if r["size"] == size and r["set"] == CLEAN]
    rows = [augmented.get((r["size"], r["set"], r["metric"], r["point"], r["fraction"], r["augment"]), r) for r in rows]
    return [r for r in rows if metric in (None, r["metric"])]


def budget_table(summary: Mapping[str, Any], size: str) -> tuple[list[str], list[list[str]]]:
    """One label budget: a line per (point, fraction, augmentation) with every metric's mean ± sd, and the
    primary metric's paired difference and verdict against what :func:`headline_rows` pairs it with."""
    metrics, primary = summary["metrics"], summary["primary"]
    columns = ["point", "fraction", "augment", "pre-training tokens", "runs", *(f"{_WORDS[m]} mean ± sd" for m in metrics)]
    columns += ["against", f"Δ {_WORDS[primary]} (points, 95% CI)", "verdict"]
    rows, lines = headline_rows(summary, size), []
    for where in dict.fromkeys((r["point"], r["fraction"], r["augment"]) for r in rows):
        found = {r["metric"]: r for r in rows if (r["point"], r["fraction"], r["augment"]) == where}
        main, spreads = found[primary], [spread(found[m]["values"]) if m in found else "-" for m in metrics]
        numbers = [f"{main['pretrain_tokens']:,.0f}", str(len(main["values"])), *spreads]
        lines.append([where[0], f"{where[1]:g}", where[2], *numbers, against(main), delta(main), verdict(main)])
    return columns, lines


def comparison_table(rows: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """Rows of one comparison (primary metric): the clean set first, then the corrupted ones."""
    columns = ["labels", "set", "point", "fraction", "augment", "against", "mean ± sd", "Δ (points, 95% CI)", "verdict"]
    ordered = sorted(rows, key=lambda r: (r["set"] != CLEAN, r["set"], size_order(r["size"])))
    return columns, [[r["size"], r["set"], r["point"], f"{r['fraction']:g}", r["augment"], against(r), spread(r["values"]),
                      delta(r), verdict(r)] for r in ordered]  # fmt: skip


def against(row: Mapping[str, Any]) -> str:
    """What a row is compared with: ``"baseline / 0 / 0"`` (point / fraction / augmentation), ``"-"`` for nothing."""
    return " / ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in (row["against"] or {}).values()) or "-"


def budget_line(summary: Mapping[str, Any], size: str) -> str:
    """The one sentence per label budget: ``"100 labels: 1 better, 2 no measurable difference (macro-F1, clean set)."``"""
    judged = [r["paired"]["verdict"] for r in headline_rows(summary, size, summary["primary"]) if r["paired"]]
    counts = ", ".join(f"{n} {word}" for word, n in Counter(judged).items()) or "no pair yet"
    return f"{size} labels: {counts} ({_WORDS[summary['primary']]}, clean set)."


def pretraining_table(study: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Each pre-trained grid point over its finished seeds: fixed-mask accuracy and loss, and on its own masks."""
    points: dict[str, list[Mapping[str, Any]]] = {}
    for cell in (c for c in study["cells"] if c.get("role", "pretrain") == "pretrain" and c.get("strategy")):
        points.setdefault(cell["name"].rsplit("-seed", 1)[0], []).extend([cell] if cell.get("status") == "finished" else [])
    columns = ["point", "seeds", "fixed-mask accuracy", "fixed-mask loss", "own-mask accuracy"]
    return columns, [[p, str(len(cells)), spread([c["common"]["accuracy"] for c in cells]),
                      spread([c["common"]["loss"] for c in cells]),
                      spread([c["own"]["accuracy"] for c in cells if c.get("own")])] for p, cells in points.items()]  # fmt: skip


def study_table(study: Mapping[str, Any]) -> str:
    """The terminal's summary: the pre-training table, then each label budget's against the baseline."""
    lines = _aligned(*pretraining_table(study)) if study["plan"]["grid"]["strategies"] != ["none"] else []
    summary = study.get("downstream") or {"sizes": ()}
    for size in summary["sizes"]:
        lines += ["", budget_line(summary, size), *_aligned(*budget_table(summary, size))]
    finished = sum(c.get("status") == "finished" for c in study["cells"])
    return "\n".join([*lines, f"{finished} of {len(study['cells'])} cells finished"])


def _aligned(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max([len(c), *(len(r[i]) for r in rows)]) for i, c in enumerate(columns)]
    return ["  ".join(text.ljust(width) for text, width in zip(line, widths)).rstrip() for line in [columns, *rows]]


def plot_curves(study: Mapping[str, Any], path: Path) -> Path:
    """Fixed-mask accuracy against training tokens, one line per pre-training cell."""
    lines = {c["name"]: [(p["tokens"], p["accuracy"], 0.0) for p in c["curve"]] for c in study["cells"] if c.get("curve")}
    return _plot([("every cell on the same masks", lines)], "training tokens", "fixed-mask accuracy (80/10/10)", path)


def plot_downstream(summary: Mapping[str, Any], path: Path) -> Path:
    """The primary metric (mean ± sd) against pre-training tokens, clean set, first augmentation: a panel per label budget."""
    panels = []
    for size in summary["sizes"]:
        rows = [r for r in summary["against_baseline"] if (r["size"], r["set"], r["metric"]) == (size, CLEAN, summary["primary"])]
        rows = [r for r in rows if r["augment"] == min(a["augment"] for a in rows)]  # "0" before "0.1" before "adaptive-…"
        start = [(r["pretrain_tokens"], r["mean"], r["sd"]) for r in rows if r["fraction"] == 0.0]  # the baseline, at 0
        points = {r["point"]: list(start) for r in rows}
        for r in sorted((r for r in rows if r["fraction"] > 0), key=lambda r: r["fraction"]):
            points[r["point"]].append((r["pretrain_tokens"], r["mean"], r["sd"]))
        panels.append((f"{size} labels", points))
    return _plot(panels, "pre-training tokens", _WORDS[summary["primary"]], path)


def _plot(panels: Sequence[tuple[str, Mapping[str, list[tuple[float, float, float]]]]], x: str, y: str, path: Path) -> Path:
    """A panel per (title, {label: [(x, y, error)]}), a line per label."""
    plt = pyplot()
    figure, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels) + 2, 4.5), squeeze=False)
    for (title, lines), panel in zip(panels, axes[0]):
        for label, points in lines.items():
            panel.errorbar([p[0] for p in points], [p[1] for p in points], yerr=[p[2] for p in points], marker="o",
                           markersize=3, capsize=3, label=label)  # fmt: skip
        panel.set(xlabel=x, ylabel=y, title=title)
        panel.grid(alpha=0.3)
        if lines:
            panel.legend(fontsize=7)
    figure.tight_layout()
    return save_png(figure, path)


def study_page(study: Mapping[str, Any], folder: Path) -> str:
    """The report as HTML: the answer on the task first, then the other comparisons, the pre-training and the settings."""
    parts, summary = [], study.get("downstream")
    finished = sum(c.get("status") == "finished" for c in study["cells"])
    if not study.get("complete"):
        parts.append(_note(f"Incomplete: {finished} of {len(study['cells'])} cells finished."))
    if summary and summary["sizes"]:
        parts.append("<h2>On your task, against the starting model</h2>")
        for size in summary["sizes"]:
            parts += [f"<p>{html.escape(budget_line(summary, size))}</p>", _table(*budget_table(summary, size))]
        if study.get("best"):
            best = study["best"]
            parts.append(_note(f"Best held-out {_WORDS[best['metric']]}: {best['value']:.4f}, cell {best['name']} "
                               "(chosen on that set, so optimistic there)."))  # fmt: skip
        parts.append(_figure(plot_downstream(summary, folder / DOWNSTREAM_PLOT)))
        corrupted = [r for r in summary["against_baseline"] if r["set"] != CLEAN and r["metric"] == summary["primary"]]
        if corrupted:
            parts += ["<h2>On the corrupted held-out sets, against the starting model</h2>", _table(*comparison_table(corrupted))]
        for kind in COMPARISONS[1:]:
            rows = [r for r in summary[kind] if r["metric"] == summary["primary"]]
            if rows:
                parts += [f"<h2>{html.escape(_TITLES[kind])}</h2>", _table(*comparison_table(rows))]
    if study["plan"]["grid"]["strategies"] != ["none"]:
        evaluation = study.get("evaluation", {})
        parts += ["<h2>Pre-training</h2>", _note(f"Every cell scored on the same fixed masks: {evaluation.get('masking')} at "
                  f"{evaluation.get('mlm_probability')} on {evaluation.get('blocks')} validation blocks."),
                  _table(*pretraining_table(study)), _figure(plot_curves(study, folder / CURVES_PLOT))]  # fmt: skip
    parts += ["<h2>Plan</h2>", f"<pre>{html.escape(json.dumps(study['plan'], indent=1))}</pre>"]
    body = "\n".join(parts)
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>Study</title>\n<style>{_STYLE}</style>\n'
            f"</head>\n<body>\n<h1>Which masking pays: a study</h1>\n{body}\n</body>\n</html>\n")  # fmt: skip


def _note(text: str) -> str:
    return f'<p class="note">{html.escape(text)}</p>'


def _table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "\n".join("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>" for row in rows)
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>"


def _figure(png: Path) -> str:
    source = "data:image/png;base64," + base64.b64encode(png.read_bytes()).decode("ascii")
    return f'<figure><img src="{source}" alt="{html.escape(png.name)}"></figure>'


def write_study_report(folder: str | Path) -> Path:
    """Write ``folder/report.html`` (and its plots) from ``folder/study.json`` alone; returns the page's path."""
    folder = Path(folder)
    return write_text(folder / REPORT_FILE, study_page(json.loads((folder / RECORD).read_text(encoding="utf-8")), folder))
