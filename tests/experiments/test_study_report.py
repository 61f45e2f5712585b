"""The study's page and terminal table from a study.json of pre-training, baseline and fine-tuning cells (no training)."""

from __future__ import annotations

import json
import re

import pytest
from test_downstream_stats import tune  # the suite imports test modules by basename (unique names)

from tokenmask.experiments.downstream_report import downstream
from tokenmask.experiments.study_report import study_table, write_study_report

PLAN = {
    "grid": {"strategies": ["token", "whole_word"], "rates": [0.15], "corruptions": ["bert"], "rate_ends": [None], "seeds": 1},
    "settings": {"preset": "tiny", "max_steps": 10},
    "finetune": {"max_steps": 200, "lr": 5e-5},
}
EVALUATION = {"masking": "token-level 80/10/10", "mlm_probability": 0.15, "blocks": 128}
GAIN = {("token-0.15-bert", 0.5): 0.0, ("token-0.15-bert", 1.0): 0.01, ("whole_word-0.15-bert", 0.5): 0.01}
"""macro-F1 above the baseline, every seed; whole-word masking at the full budget gains 0.03, 0.04, 0.05 over seeds 0, 1, 2."""


def source(point, strategy, accuracy, seed=0):
    """A finished source cell: pre-training (fixed-mask ``accuracy``) or, without a strategy, the baseline."""
    cell = {"name": f"{point}-seed{seed}", "role": "pretrain" if strategy else "baseline", "point": point, "strategy": strategy,
            "rate": 0.15 if strategy else None, "rate_end": None, "corruption": "bert" if strategy else None, "seed": seed,
            "minutes": 1.5, "status": "finished"}  # fmt: skip
    if strategy:
        cell |= {"steps": 10, "tokens": 4096, "own": None, "curve": [{"step": 0, "tokens": 0, "loss": 10.0, "accuracy": 0.0},
                 {"step": 10, "tokens": 4096, "loss": 5.0, "accuracy": accuracy}],
                 "common": {"loss": 5.0 - accuracy, "perplexity": 99.0, "accuracy": accuracy, "targets": 100}}  # fmt: skip
    return cell


def fine_tuning_cells(*, pending: bool = False) -> list[dict]:
    """Sizes 100 and all x fine-tuning seeds 0-2; the two points at fractions 0.5 and 1; at 100 labels also augment 0.1."""
    cells = []
    for size, level in (("100", 0.60), ("all", 0.70)):
        for seed in (0, 1, 2):
            base = level + 0.01 * seed
            cells.append(tune("baseline", seed, base, size=size, typo=base - 0.1, status="pending" if pending else "finished"))
            for point in ("token-0.15-bert", "whole_word-0.15-bert"):
                for fraction in (0.5, 1.0):
                    value = base + GAIN.get((point, fraction), 0.03 + 0.01 * seed)
                    for augment in (0.0, 0.1) if size == "100" else (0.0,):
                        shifted = value + augment * 0.05 * (seed - 1)  # augmentation: -0.005, 0, +0.005 over seeds
                        cells.append(tune(point, seed, shifted, size=size, augment=augment, fraction=fraction, typo=shifted - 0.1 + augment,
                                          status="pending" if pending else "finished"))  # fmt: skip
    return cells


def write_study(folder, cells, **extra):
    study = {"version": 1, "complete": False, "plan": PLAN, "evaluation": EVALUATION, "cells": cells, **extra}
    (folder / "study.json").write_text(json.dumps(study), encoding="utf-8")
    return folder


@pytest.fixture
def downstream_study(tmp_path):
    """A study.json of token and whole-word masking at 15% (one pre-training seed, a baseline), fine-tuned at two
    budgets, three seeds, two fractions, with and without augmentation; one cell still pending; a best model."""
    cells = [
        source("token-0.15-bert", "token", 0.10),
        source("whole_word-0.15-bert", "whole_word", 0.12),
        source("baseline", None, 0),
    ]
    tuning = fine_tuning_cells()
    kept = (
        "name",
        "role",
        "point",
        "strategy",
        "rate",
        "rate_end",
        "corruption",
        "pretrain_seed",
        "fraction",
        "size",
        "augment",
        "seed",
    )
    tuning[-1] = {key: tuning[-1][key] for key in kept} | {"status": "pending"}  # a pending cell: its coordinates
    best = {"name": tuning[3]["name"], "folder": "best-model", "metric": "macro_f1", "value": 0.7412,
            "how": "the highest held-out macro_f1 (0.7412) of the fine-tuned models"}  # fmt: skip
    downstream_ = {"metrics": ["accuracy", "macro_f1"], "primary": "macro_f1"}
    return write_study(tmp_path, cells + tuning, best_model=best, downstream=downstream_)


def test_the_summary_is_computed_from_the_cells(downstream_study):
    summary = downstream(json.loads((downstream_study / "study.json").read_text()))
    assert summary["sizes"] == ["100", "all"] and summary["sets"] == ["clean", "typo-0.1"] and summary["primary"] == "macro_f1"
    best = next(r for r in summary["against_baseline"] if (r["size"], r["point"], r["fraction"], r["augment"], r["set"], r["metric"])
                == ("100", "whole_word-0.15-bert", 1.0, 0.0, "clean", "macro_f1"))  # fmt: skip
    # differences 0.03, 0.04, 0.05: mean 0.04, half-width 4.303 × 0.01 / √3 = 0.0248
    assert best["paired"]["mean"] == pytest.approx(0.04) and best["paired"]["half_width"] == pytest.approx(0.024843, abs=1e-6)


def test_the_page_opens_with_the_verdict_then_the_tables_behind_it(downstream_study):
    page = write_study_report(downstream_study).read_text(encoding="utf-8")
    first = re.search(r"</h1>\s*<p>(.*?)</p>", page).group(1)
    assert first == (
        "At 100 labels, continued pre-training with whole-word masking at 0.15 for 1.0M tokens raised macro-F1 by 4.0 points "
        "[1.5, 6.5] over the checkpoint fine-tuned directly (3 seeds; picked as the best of 4 after seeing them, 3 better, "
        "1 no measurable difference: at 95% each, one comparison in 20 can exclude 0 by chance)."
    )
    # with all labels the third seed of whole-word masking is pending: two seeds, t(1) = 12.706, an interval too wide;
    # the measurable gain of token masking is named instead of whole-word's larger mean
    assert (
        "With all labels, continued pre-training with token masking at 0.15 for 1.0M tokens raised macro-F1 by 1.0 points "
        "[1.0, 1.0] over the checkpoint fine-tuned directly (3 seeds; picked as the best of 4 after seeing them, 2 better, "
        "1 no measurable difference, 1 too wide to tell"
    ) in page
    assert "Against token masking at the same rate (macro-F1, clean set, full pre-training, no augmentation)" in page
    # augmentation differs by -0.005, 0, +0.005: half-width 4.303 × 0.005 / √3 = 0.0124, narrow: no measurable difference
    assert (
        "[MASK] augmentation while fine-tuning, against none (macro-F1, clean set), 4 comparisons: 4 no measurable difference"
        in page
    )
    assert (
        "Along the pre-training curve (macro-F1, clean set, no augmentation): with 100 labels a measurable gain first appears after 500k tokens"
        in page
    )
    order = [page.index(text) for text in ("raised macro-F1", "Incomplete", "100 labels: clean set", "all labels: clean set",
             "Robustness", "typo-0.1: against the checkpoint", "[MASK] augmentation while fine-tuning</h2>", "Masking against token masking</h2>",
             "against pre-training tokens", "Best model:", "<h2>Pre-training</h2>", "<h2>Summary</h2>", "<h2>Cells</h2>")]  # fmt: skip
    assert order == sorted(order)
    row = "<td>whole_word-0.15-bert</td><td>1</td><td>0</td><td>1.0M</td><td>3</td>"
    assert (
        row + "<td>0.7000 ± 0.0200</td><td>+4.0 [1.5, 6.5]</td><td>0.6500 ± 0.0200</td><td>+4.0 [1.5, 6.5]</td><td>better</td>"
        in page
    )
    assert "<td>baseline</td><td>0</td><td>0</td><td>0</td><td>3</td><td>0.6600 ± 0.0100</td><td>-</td>" in page
    # on the corrupted set too, every metric against the baseline; none fine-tuned with augmentation to pair with
    corrupted = page[page.index("typo-0.1: against the checkpoint") : page.index("[MASK] augmentation while fine-tuning</h2>")]
    assert (
        "<td>100</td>" + row + "<td>0.6000 ± 0.0200</td><td>+4.0 [1.5, 6.5]</td><td>0.5500 ± 0.0200</td><td>+4.0 [1.5, 6.5]</td>"
        "<td>better</td>" in corrupted
    )
    assert (
        "<td>100</td><td>token-0.15-bert</td><td>0.5</td><td>0.1</td><td>500k</td><td>3</td><td>0.6600 ± 0.0150</td><td>-</td>"
        "<td>0.6100 ± 0.0150</td><td>-</td><td>no baseline at this rate</td>" in corrupted
    )
    assert (
        "<td>100</td><td>typo-0.1</td><td>accuracy</td><td>whole_word-0.15-bert</td><td>1</td><td>0</td>"
        "<td>token-0.15-bert at augment 0</td><td>0.6000 ± 0.0200</td><td>+3.0 [0.5, 5.5]</td><td>better</td>" in page
    )  # masking against token masking, on the corrupted set and in accuracy as well
    assert (
        "Best model: tune/token-0.15-bert-seed0/fraction-1/size-100/augment-0/seed-0 (macro-F1 0.7412), saved in best-model/. The highest held-out macro_f1 (0.7412) of the fine-tuned models.</p>"
        in page
    )
    assert "<td>tune/whole_word-0.15-bert-seed0/fraction-1/size-all/augment-0/seed-2</td><td>pending</td>" in page
    assert page.count('<img src="data:image/png;base64,') == 3 and "<script" not in page and "http" not in page
    assert (downstream_study / "downstream.png").read_bytes().startswith(b"\x89PNG")
    assert "<td>token-0.15-bert</td><td>1</td><td>0.1000</td>" in page  # the pre-training summary still there


def test_the_terminal_table_ends_with_the_compact_table_and_the_verdict(downstream_study):
    text = study_table(json.loads((downstream_study / "study.json").read_text()))
    lines = text.splitlines()
    assert re.split(r"\s{2,}", lines[1]) == ["token-0.15-bert", "1", "0.1000", "4.9000", "-"]
    assert "fine-tuned, clean set, against the checkpoint fine-tuned directly (macro-F1):" in lines
    row = next(line for line in lines if line.startswith("100") and "whole_word-0.15-bert  1 " in line)
    assert re.split(r"\s{2,}", row) == [
        "100",
        "whole_word-0.15-bert",
        "1",
        "0",
        "1.0M",
        "0.6500 ± 0.0200",
        "+4.0 [1.5, 6.5]",
        "better",
    ]
    words = " ".join(lines)  # the verdict is wrapped at 100 characters, after the table
    assert words.index("fine-tuned, clean set") < words.index(
        "At 100 labels, continued pre-training with whole-word masking at 0.15"
    )


def test_a_record_with_every_fine_tuning_cell_pending_still_has_a_page(tmp_path):
    cells = [source("token-0.15-bert", "token", 0.10), source("whole_word-0.15-bert", "whole_word", 0.12)]
    page = write_study_report(write_study(tmp_path, cells + fine_tuning_cells(pending=True))).read_text(encoding="utf-8")
    assert re.search(r"</h1>\s*<p>No fine-tuning cell has finished yet.</p>", page)
    assert page.count('<img src="data:image/png;base64,') == 2  # no downstream plot without a finished cell
    assert "pending" in page and "Incomplete: 2 of 44 cells finished." in page


@pytest.fixture
def pretraining_study(tmp_path):
    """A study.json of pre-training alone: token masking at two seeds, whole-word masking's second seed pending."""
    cells = [source("token-0.15-bert", "token", 0.10), source("token-0.15-bert", "token", 0.14, seed=1),
             source("whole_word-0.15-bert", "whole_word", 0.12),
             {**source("whole_word-0.15-bert", "whole_word", 0.0, seed=1), "status": "pending"}]  # fmt: skip
    return write_study(tmp_path, cells)


def test_a_study_without_fine_tuning_has_no_downstream_sections(pretraining_study):
    study = pretraining_study
    page = write_study_report(study).read_text(encoding="utf-8")
    assert page.count("<table>") == 2 and page.count("<img") == 2 and "Pre-training</h2>" not in page
    assert "<td>token-0.15-bert</td><td>2</td><td>0.1200 ± 0.0283</td>" in page and "Incomplete: 3 of 4 cells finished." in page
    assert downstream(json.loads((study / "study.json").read_text())) is None
