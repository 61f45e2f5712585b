"""The study's report from hand-made records: the tables' numbers and verdict columns, the terminal
table, and the page (escaped, its plots embedded, incomplete studies said so). No training here.

A record is built as the runner builds it: the plan and cells of a real
:class:`~tokenmask.experiments.study.StudyRun`, each cell given a result of the runner's shape, and
``downstream`` from :func:`~tokenmask.experiments.stats.summarize` over them. The fine-tuning
numbers are test_stats's three-model study (macro-F1 by fine-tuning seed 0, 1, 2):

    baseline  0.60  0.62  0.64
    token     0.62  0.65  0.68   token - baseline 0.02, 0.03, 0.04:  +3.0 [+0.5, +5.5] points, better
    span      0.61  0.62  0.645  span - baseline 0.01, 0, 0.005:     +0.5 [-0.7, +1.7], no measurable difference
                                 span - token -0.01, -0.03, -0.035:  -2.5 [-5.8, +0.8], too wide to tell
"""

import base64
import json
import re
from collections.abc import Callable, Mapping
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from test_stats import THREE, by_seeds, result  # the suite imports test modules by basename (unique names)

from tokenmask.experiments.grid import Downstream, StudyGrid, point
from tokenmask.experiments.report import (
    budget_line,
    budget_table,
    comparison_table,
    delta,
    pretraining_table,
    spread,
    study_page,
    study_table,
    verdict,
    write_study_report,
)
from tokenmask.experiments.runner import FORMAT, RECORD
from tokenmask.experiments.stats import Paired
from tokenmask.experiments.study import StudyConfig, StudyRun

TOKEN, SPAN = "token-0.15-bert", "span-0.15-bert"
PNG = b"\x89PNG\r\n\x1a\n"
PRETRAINED = {
    (TOKEN, 0): (0.10, 3.0, None),
    (TOKEN, 1): (0.14, 3.2, None),
    (SPAN, 0): (0.16, 2.9, 0.20),
    (SPAN, 1): (0.18, 2.8, 0.22),
}
"""A pre-training cell's fixed-mask accuracy, loss, and accuracy on its own masks (None: the same masks), by (point, seed)."""


def pretrained(cell: Any) -> dict[str, Any]:
    """A finished pre-training cell's record, as the study writes it."""
    c = cell.coordinates
    accuracy, loss, own = PRETRAINED.get((point(c), c["seed"]), (0.1, 3.0, None))

    def scores(accuracy: float, loss: float) -> dict[str, float]:
        return {"loss": loss, "perplexity": 2.718**loss, "accuracy": accuracy, "targets": 300}

    curve = [
        {"step": 0, "tokens": 0, "loss": 7.0, "accuracy": 0.0},
        {"step": 50, "tokens": 1000, "loss": loss, "accuracy": accuracy},
    ]
    return {"name": cell.name, "folder": cell.folder, "role": "pretrain", **c, "steps": 50, "tokens": 1000,
            "common": scores(accuracy, loss), "own": None if own is None else scores(own, loss + 0.1), "curve": curve,
            "minutes": 1.0, "status": "finished"}  # fmt: skip


def study_record(
    grid: StudyGrid, downstream: Downstream | None = None, f1: Callable[[Mapping[str, Any]], float | None] | None = None,
    *, pretrain: bool = True,
) -> dict[str, Any]:  # fmt: skip
    """The record of a study of ``grid`` and ``downstream``, as ``study.json`` holds it: every source
    finished (its pre-training pending unless ``pretrain``), each fine-tuning with macro-F1 ``f1``
    (by default the three-model study's), pending where that is None."""
    f1 = f1 or by_seeds(THREE)
    run = StudyRun(StudyConfig(output="study", grid=grid, downstream=downstream or Downstream()))
    listed = []
    for cell in run.cells():
        c = cell.coordinates
        if c.get("role") == "finetune":
            value = f1(c)
            listed.append({"name": cell.name, **c, "status": "pending"} if value is None else result(cell, value))
        elif c["strategy"] is None:
            listed.append({"name": cell.name, "folder": cell.folder, "role": "baseline", **c, "status": "finished"})
        else:
            listed.append(pretrained(cell) if pretrain else {"name": cell.name, **c, "status": "pending"})
    complete = all(c["status"] == "finished" for c in listed)
    record = {"format": FORMAT, "complete": complete, "plan": run.plan(), **run.summary(listed), "cells": listed}
    return json.loads(json.dumps(record))  # as read back from study.json


GRID = StudyGrid(strategies=("token", "span"), rates=(0.15,))
TUNED = Downstream(finetune=("builtin",), label_budgets=(100,))


def full_study() -> dict[str, Any]:
    """Token and span masking, pre-trained and fine-tuned: every cell finished."""
    return study_record(GRID, TUNED)


class Page(HTMLParser):
    """What a reader sees of a page: its tables (rows of cell texts, the header first), paragraphs and image sources."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self.paragraphs: list[str] = []
        self.images: list[str] = []
        self.headings: list[str] = []
        self.text: list[str] = []
        self._open: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th", "p", "h2"):
            self._open = []
        elif tag == "img":
            self.images.append(str(dict(attrs)["src"]))

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th"):
            self.tables[-1][-1].append("".join(self._open or []))
        elif tag in ("p", "h2"):
            (self.paragraphs if tag == "p" else self.headings).append("".join(self._open or []))
        if tag in ("td", "th", "p", "h2"):
            self._open = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._open is not None:
            self._open.append(data)

    def table(self, column: str) -> list[dict[str, str]]:
        """The first table with ``column``, its rows by column."""
        found = next(t for t in self.tables if column in t[0])
        return [dict(zip(found[0], line)) for line in found[1:]]

    def pngs(self) -> list[bytes]:
        prefix = "data:image/png;base64,"
        assert all(src.startswith(prefix) for src in self.images)  # embedded, nothing fetched
        return [base64.b64decode(src.removeprefix(prefix)) for src in self.images]


def by_column(table: tuple[list[str], list[list[str]]]) -> list[dict[str, str]]:
    columns, lines = table
    assert all(len(line) == len(columns) for line in lines)
    return [dict(zip(columns, line)) for line in lines]


@pytest.fixture(scope="module")
def full_page(tmp_path_factory) -> Page:
    return Page(study_page(full_study(), tmp_path_factory.mktemp("page")))


def test_spread_over_seeds():
    # mean 0.12; sd sqrt((0.02² + 0.02²) / 1) = 0.0283
    assert spread([0.10, 0.14]) == "0.1200 ± 0.0283"
    assert (spread([0.7]), spread([])) == ("0.7000", "-")


def test_delta_in_points_of_the_metric():
    assert delta({"paired": Paired.of([0.02, 0.03, 0.04]).to_dict()}) == "+3.0 [+0.5, +5.5]"  # [0.0052, 0.0548]
    assert delta({"paired": Paired.of([-0.02, -0.03, -0.04]).to_dict()}) == "-3.0 [-5.5, -0.5]"
    assert delta({"paired": Paired.of([0.012]).to_dict()}) == "+1.2 (1 seed)"
    assert delta({"paired": None}) == "-"


def test_the_verdict_column():
    assert verdict({"paired": Paired.of([0.02, 0.03, 0.04]).to_dict(), "against": {}, "fraction": 1.0}) == "better"
    assert verdict({"paired": None, "against": None, "fraction": 0.0}) == "reference"  # the baseline's own row
    assert verdict({"paired": None, "against": None, "fraction": 1.0}) == "no pair"  # no finished baseline run yet


def test_the_budget_table_against_the_baseline():
    columns, lines = budget_table(full_study()["downstream"], "100")
    assert columns[-1] == "verdict" and columns[-2].startswith("Δ macro-F1")
    rows = by_column((columns, lines))
    assert [r["point"] for r in rows] == ["baseline", TOKEN, SPAN]
    assert [r["verdict"] for r in rows] == ["reference", "better", "no measurable difference"]
    assert [r[columns[-2]] for r in rows] == ["-", "+3.0 [+0.5, +5.5]", "+0.5 [-0.7, +1.7]"]
    baseline, token, _ = rows
    assert (baseline["fraction"], baseline["pre-training tokens"], baseline["runs"]) == ("0", "0", "3")
    assert (token["fraction"], token["augment"], token["pre-training tokens"], token["runs"]) == ("1", "0", "1,000", "3")
    # macro-F1 0.62, 0.65, 0.68 -> 0.65 ± 0.03; accuracy 0.1 higher, the same spread
    assert (token["macro-F1 mean ± sd"], token["accuracy mean ± sd"]) == ("0.6500 ± 0.0300", "0.7500 ± 0.0300")


def test_the_budget_line_counts_the_verdicts():
    # token better, span no measurable difference; the baseline's own row is not counted
    line = budget_line(full_study()["downstream"], "100")
    assert re.findall(r"(\d+) (better|worse|no measurable difference|too wide to tell|no interval)", line) == [
        ("1", "better"), ("1", "no measurable difference"),
    ]  # fmt: skip


def test_without_pre_training_the_headline_is_the_augmentation_against_none():
    # --strategies none: the starting model at augmentation 0.1 (macro-F1 0.63, 0.64, 0.65 by seed) against itself
    # without (0.60, 0.62, 0.64): differences 0.03, 0.02, 0.01 -> mean 0.02, sd 0.01, 4.303 x 0.01 / √3 = 0.0248
    table = {("baseline", 0, s): v for s, v in enumerate((0.60, 0.62, 0.64))}
    f1 = by_seeds(table)
    record = study_record(StudyGrid(strategies=("none",)), Downstream(finetune=("builtin",), label_budgets=(100,),
                          augment_rates=("0", "0.1")), lambda c: f1(c) if c["augment"] == "0" else f1(c) + 0.03 - 0.01 * c["seed"])  # fmt: skip
    columns, lines = budget_table(record["downstream"], "100")
    rows = by_column((columns, lines))
    assert [(r["augment"], r["against"], r[columns[-2]], r["verdict"]) for r in rows] == [
        ("0", "-", "-", "reference"), ("0.1", "baseline / 0 / 0", "+2.0 [-0.5, +4.5]", "too wide to tell"),
    ]  # fmt: skip
    counts = re.findall(
        r"(\d+) (better|worse|no measurable difference|too wide to tell|no interval)", budget_line(record["downstream"], "100")
    )
    assert counts == [("1", "too wide to tell")]


def test_the_comparison_table_clean_set_first():
    summary = full_study()["downstream"]
    rows = by_column(comparison_table([r for r in summary["masking"] if r["metric"] == "macro_f1"]))
    assert [(r["set"], r["point"], r["against"]) for r in rows] == [
        ("clean", SPAN, f"{TOKEN} / 1 / 0"), ("typo-0.1", SPAN, f"{TOKEN} / 1 / 0"),
    ]  # fmt: skip
    # span 0.61, 0.62, 0.645: mean 0.625, sd sqrt(6.5e-4 / 2) = 0.0180; span - token: mean -0.025, [-0.0579, 0.0079]
    assert (rows[0]["labels"], rows[0]["mean ± sd"], rows[0]["Δ (points, 95% CI)"], rows[0]["verdict"]) == (
        "100",
        "0.6250 ± 0.0180",
        "-2.5 [-5.8, +0.8]",
        "too wide to tell",
    )


def test_the_pretraining_table_over_seeds():
    record = study_record(StudyGrid(strategies=("token", "span"), rates=(0.15,), pretrain_seeds=2))
    rows = by_column(pretraining_table(record))
    assert [(r["point"], r["seeds"]) for r in rows] == [(TOKEN, "2"), (SPAN, "2")]
    # token: accuracy 0.10, 0.14 -> 0.12 ± 0.0283, loss 3.0, 3.2 -> 3.1 ± 0.1414, no own masks
    assert (rows[0]["fixed-mask accuracy"], rows[0]["fixed-mask loss"], rows[0]["own-mask accuracy"]) == (
        "0.1200 ± 0.0283",
        "3.1000 ± 0.1414",
        "-",
    )
    assert rows[1]["own-mask accuracy"] == "0.2100 ± 0.0141"  # 0.20, 0.22


def test_the_pretraining_table_counts_finished_seeds_only():
    record = study_record(GRID, pretrain=False)
    assert [r["seeds"] for r in by_column(pretraining_table(record))] == ["0", "0"]
    assert by_column(pretraining_table(record))[0]["fixed-mask accuracy"] == "-"


def table_lines(text: str, first: str | tuple[str, ...]) -> list[list[str]]:
    """The terminal table's lines that start with ``first``, split into their columns."""
    return [re.split(r"\s{2,}", line) for line in text.splitlines() if line.startswith(first)]


def test_the_terminal_table():
    text = study_table(full_study())
    pretraining, budget = table_lines(text, TOKEN)  # the pre-training table's line, then the budget table's
    assert pretraining == [TOKEN, "1", "0.1000", "3.0000", "-"]
    assert budget[-2:] == ["+3.0 [+0.5, +5.5]", "better"]
    assert table_lines(text, "baseline")[0][-1] == "reference"
    assert re.search(r"(\d+) of (\d+)", text.splitlines()[-1]).groups() == ("12", "12")  # 3 models, 3 fine-tunings each


def test_the_terminal_table_of_a_study_without_pre_training():
    text = study_table(study_record(StudyGrid(strategies=("none",)), TUNED))
    assert "fixed-mask accuracy" not in text
    assert [line[-1] for line in table_lines(text, "baseline")] == ["reference"]


def test_the_terminal_table_of_pre_training_only():
    text = study_table(study_record(GRID))
    assert [line[:3] for line in table_lines(text, ("token", "span"))] == [[TOKEN, "1", "0.1000"], [SPAN, "1", "0.1600"]]
    assert "verdict" not in text


def test_the_page_answers_on_the_task_with_verdicts(full_page):
    budget = full_page.table("verdict")  # the first table with verdicts: the budget's
    assert [(r["point"], r["verdict"]) for r in budget] == [("baseline", "reference"), (TOKEN, "better"),
                                                            (SPAN, "no measurable difference")]  # fmt: skip
    assert budget[1]["Δ macro-F1 (points, 95% CI)"] == "+3.0 [+0.5, +5.5]"
    # the budget, typo-0.1 against the baseline, masking, pre-training
    assert len(full_page.tables) == 4
    corrupted = [dict(zip(full_page.tables[1][0], line)) for line in full_page.tables[1][1:]]
    assert [(r["set"], r["point"], r["against"], r["verdict"]) for r in corrupted] == [
        ("typo-0.1", "baseline", "-", "reference"), ("typo-0.1", TOKEN, "baseline / 0 / 0", "better"),
        ("typo-0.1", SPAN, "baseline / 0 / 0", "no measurable difference"),
    ]  # fmt: skip
    masking = full_page.tables[2]
    assert [line[-2:] for line in masking[1:]] == [["-2.5 [-5.8, +0.8]", "too wide to tell"]] * 2  # clean, typo-0.1
    assert [line[:3] for line in full_page.tables[3][1:]] == [[TOKEN, "1", "0.1000"], [SPAN, "1", "0.1600"]]


def test_the_page_embeds_both_plots(full_page):
    pngs = full_page.pngs()
    assert len(pngs) == 2 and all(png.startswith(PNG) and len(png) > 1000 for png in pngs)  # downstream, curves


def test_the_page_names_the_best_cell(full_page):
    best = "token-0.15-bert-seed0/fraction-1/size-100/augment-0/tune-seed-2"  # 0.68
    assert any(best in p and "0.6800" in p for p in full_page.paragraphs)


def test_a_complete_study_is_not_called_incomplete(full_page):
    assert not any("Incomplete" in p for p in full_page.paragraphs)


def test_the_page_of_pre_training_only(tmp_path):
    page = Page(study_page(study_record(GRID), tmp_path))
    assert len(page.pngs()) == 1 and len(page.tables) == 1  # the curves, the pre-training table
    assert "verdict" not in page.tables[0][0]


def test_the_page_of_a_study_without_pre_training(tmp_path):
    page = Page(study_page(study_record(StudyGrid(strategies=("none",)), TUNED), tmp_path))
    assert len(page.pngs()) == 1  # the downstream plot, no curves
    assert len(page.tables) == 2  # the budget, typo-0.1 against the baseline
    assert [r["verdict"] for r in page.table("verdict")] == ["reference"]
    assert not (tmp_path / "curves.png").exists()


def test_an_incomplete_study_says_so(tmp_path):
    # the span model's three fine-tunings are pending: 9 of 12 cells finished
    record = study_record(GRID, TUNED, lambda c: None if c["point"] == SPAN else THREE[c["point"], 0, c["seed"]])
    page = Page(study_page(record, tmp_path))
    note = next(p for p in page.paragraphs if "Incomplete" in p)
    assert re.search(r"(\d+) of (\d+)", note).groups() == ("9", "12")
    assert [(r["point"], r["verdict"]) for r in page.table("verdict")] == [("baseline", "reference"), (TOKEN, "better")]
    assert len(page.pngs()) == 2


def test_pending_baseline_fine_tunings_leave_no_pair(tmp_path):
    record = study_record(GRID, TUNED, lambda c: None if c["point"] == "baseline" else THREE[c["point"], 0, c["seed"]])
    rows = Page(study_page(record, tmp_path)).table("verdict")
    assert [(r["point"], r["Δ macro-F1 (points, 95% CI)"], r["verdict"]) for r in rows] == [
        (TOKEN, "-", "no pair"), (SPAN, "-", "no pair"),
    ]  # fmt: skip


def test_every_fine_tuning_pending_still_gives_a_page(tmp_path):
    page = Page(study_page(study_record(GRID, TUNED, lambda c: None), tmp_path))
    assert any("Incomplete" in p for p in page.paragraphs)
    assert len(page.tables) == 1 and len(page.pngs()) == 1  # the pre-training's table and curves


def test_the_page_escapes_text(tmp_path):
    record = full_study()
    record["plan"]["pretrain"]["corpus"] = ["<script>alert(1)</script>&more.txt"]
    html = study_page(record, tmp_path)
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;&amp;more.txt" in html
    assert "<script>alert(1)</script>&more.txt" in "".join(Page(html).text)  # a reader sees it as written


def test_write_study_report_reads_the_record(tmp_path):
    (tmp_path / RECORD).write_text(json.dumps(full_study()), encoding="utf-8")
    path = write_study_report(tmp_path)
    assert path == tmp_path / "report.html"
    page = Page(path.read_text(encoding="utf-8"))
    assert [r["verdict"] for r in page.table("verdict")] == ["reference", "better", "no measurable difference"]
    assert len(page.pngs()) == 2
    assert (tmp_path / "curves.png").read_bytes().startswith(PNG) and (tmp_path / "downstream.png").read_bytes().startswith(PNG)


def test_write_study_report_needs_a_record(tmp_path: Path):
    with pytest.raises(FileNotFoundError):
        write_study_report(tmp_path)
