"""The study's bookkeeping and report, without training: plans, folders, summaries, report.html from a study.json."""

from __future__ import annotations

import json
import re

import pytest

from tokenmask.experiments.plan import Cell
from tokenmask.experiments.study import StudyConfig, StudyExperiment, study_config
from tokenmask.experiments.study_grid import DEFAULT_CELL_TOKENS, StudyGrid
from tokenmask.experiments.study_report import Spread, study_table, summarize, write_study_report
from tokenmask.experiments.sweep import check_folder, plan_differences
from tokenmask.masking.config import MaskingConfig
from tokenmask.recipes.config import PretrainConfig
from tokenmask.settings import flatten
from tokenmask.train.config import LoopConfig

GRID = StudyGrid(strategies=("token", "span"), rates=(0.15,), seeds=2)
GRID_SETTINGS = {"strategies": "token,span", "rates": "0.15", "seeds": 2}


def test_a_study_without_a_limit_gives_each_cell_the_default_token_budget():
    config = study_config({"output": "o", **GRID_SETTINGS})
    assert config.grid == GRID
    assert (config.base.loop.max_tokens, config.base.loop.max_time, config.base.loop.max_steps) == (
        DEFAULT_CELL_TOKENS,
        None,
        None,
    )
    given = study_config({"output": "o", "max_steps": 5})
    assert (given.base.loop.max_steps, given.base.loop.max_tokens) == (5, None)


def test_settings_the_grid_sets_per_cell_are_refused():
    with pytest.raises(ValueError, match="strategy is set per cell by the grid"):
        study_config({"output": "o", "strategy": "span"})
    with pytest.raises(ValueError, match=r"mlm_probability is set per cell by the grid: leave it at its default \(0.15\)"):
        StudyConfig(base=PretrainConfig(loop=LoopConfig(output="o"), masking=MaskingConfig().at_rate(0.3)), grid=GRID)
    with pytest.raises(ValueError, match="--output is required"):
        StudyConfig(base=PretrainConfig(), grid=GRID)


def test_the_cells_are_the_grid_then_one_baseline_per_seed_when_fine_tuning():
    config = StudyConfig(base=PretrainConfig(loop=LoopConfig(output="o", seed=4, max_steps=1)), grid=GRID, finetune=True)
    assert [c.name for c in config.cells()] == [
        "token-0.15-bert-seed4", "token-0.15-bert-seed5", "span-0.15-bert-seed4", "span-0.15-bert-seed5",
        "baseline-seed4", "baseline-seed5",
    ]  # fmt: skip
    assert config.cells()[-1].folder == "cells/baseline-seed5" and config.cells()[-1].coordinates["point"] == "baseline"


def test_plan_differences_name_the_sections_and_keys():
    plan = study_config({"output": "o", "max_steps": 5, **GRID_SETTINGS}).plan()
    other = study_config({"output": "elsewhere", "max_steps": 5, "lr": 1e-3, "resume": True, **GRID_SETTINGS, "rates": "0.3"})
    assert plan_differences(plan, plan) == ""
    where = study_config({"output": "x", "max_steps": 5, "resume": True, **GRID_SETTINGS})
    assert plan_differences(plan, where.plan()) == ""  # where, not what
    assert plan_differences(plan, other.plan()) == "grid (rates), settings (lr)"
    tuned = StudyConfig(base=other.base, grid=other.grid, finetune=True).plan()
    assert plan_differences(other.plan(), tuned) == "finetune (on now)"
    assert plan_differences({"rates": [0.1], "seeds": [0]}, {"rates": [0.2], "seeds": [0]}) == "rates"


def test_a_folder_with_a_study_is_refused_without_resume_and_with_another_plan(tmp_path):
    study = StudyExperiment(study_config({"output": str(tmp_path), "max_steps": 5, **GRID_SETTINGS}))
    check_folder(tmp_path, study, resume=False)  # nothing there yet
    (tmp_path / "study.json").write_text(json.dumps({"plan": study.plan(), "cells": []}))
    with pytest.raises(ValueError, match="already holds a study: pass --resume to continue it"):
        check_folder(tmp_path, study, resume=False)
    check_folder(tmp_path, study, resume=True)
    other = StudyExperiment(study_config({"output": str(tmp_path), "max_steps": 6, **GRID_SETTINGS}))
    with pytest.raises(ValueError, match=r"--resume: .* holds a study of another plan \(settings \(max_steps\)\)"):
        check_folder(tmp_path, other, resume=True)
    (tmp_path / "study.json").unlink()
    (tmp_path / "config.yaml").write_text("lr: 1")
    with pytest.raises(ValueError, match="holds a single run or another experiment, not a study"):
        check_folder(tmp_path, study, resume=True)


def test_the_study_settings_replay_it_and_name_no_setting_a_cell_sets():
    config = study_config({"output": "o", "max_steps": 5, "lr": 1e-3, **GRID_SETTINGS, "finetune": True, "jobs": 2})
    settings = StudyExperiment(config).settings()
    assert not {"strategy", "mlm_probability", "mlm_probability_end", "eval_masking", "overwrite", "resume"} & settings.keys()
    assert (settings["strategies"], settings["rates"], settings["seeds"], settings["jobs"]) == (["token", "span"], [0.15], 2, 2)
    assert study_config(settings) == config
    assert flatten(study_config(settings)) == {**settings, "resume": False}
    resumed = study_config({"output": "o", "max_steps": 5, **GRID_SETTINGS, "resume": True})
    assert "resume" not in StudyExperiment(resumed).settings()  # a replay of a resumed study does not resume


def test_spread_by_hand():
    spread = Spread.of([0.10, 0.14])
    assert spread is not None and spread.mean == pytest.approx(0.12)
    assert spread.std == pytest.approx(0.0282843, rel=1e-5)  # sqrt((0.02^2 + 0.02^2) / (2 - 1))
    assert str(spread) == "0.1200 ± 0.0283" and str(Spread.of([0.5])) == "0.5000" and Spread.of([]) is None


def finished(cell: Cell, accuracy: float, *, own: float | None = None, tuned: float | None = None) -> dict:
    result = {**cell.describe(), "minutes": 1.5}
    if cell.coordinates["strategy"] is not None:
        result.update(
            steps=10, tokens=4096, common={"loss": 5.0 - accuracy, "perplexity": 99.0, "accuracy": accuracy, "targets": 100}
        )
        result["own"] = None if own is None else {"loss": 5.0, "perplexity": 99.0, "accuracy": own, "targets": 90}
        result["curve"] = [
            {"step": 0, "tokens": 0, "loss": 10.0, "accuracy": 0.0},
            {"step": 10, "tokens": 4096, "loss": 5.0, "accuracy": accuracy},
        ]
    if tuned is not None:
        result["finetune"] = {"steps": 3, "metric": "macro_f1", "accuracy": tuned, "macro_f1": tuned, "loss": 0.6}
    return result


@pytest.fixture
def study_json(tmp_path):
    """A study.json as a study of token and span at 15%, two seeds, with fine-tuning, writes it; one cell pending."""
    config = StudyConfig(base=PretrainConfig(loop=LoopConfig(output=str(tmp_path), max_steps=10)), grid=GRID, finetune=True)
    t0, t1, s0, s1, b0, b1 = config.cells()
    cells = [
        finished(t0, 0.10, tuned=0.70), finished(t1, 0.14, tuned=0.72), finished(s0, 0.20, own=0.25, tuned=0.74),
        {**s1.describe(), "status": "pending"}, finished(b0, 0.0, tuned=0.60), finished(b1, 0.0, tuned=0.62),
    ]  # fmt: skip
    study = {"version": 1, "complete": False, "plan": config.plan(), "cells": cells,
             "evaluation": {"masking": "token-level 80/10/10", "mlm_probability": 0.15, "blocks": 128}}  # fmt: skip
    (tmp_path / "study.json").write_text(json.dumps(study))
    return tmp_path


def test_the_summary_is_per_grid_point_over_its_finished_seeds(study_json):
    study = json.loads((study_json / "study.json").read_text())
    by_point = {s.point: s for s in summarize(study)}
    assert list(by_point) == ["token-0.15-bert", "span-0.15-bert", "baseline"]
    assert by_point["token-0.15-bert"].accuracy.values == (0.10, 0.14) and by_point["token-0.15-bert"].own_accuracy is None
    assert by_point["span-0.15-bert"].accuracy.values == (0.20,) and by_point["span-0.15-bert"].own_accuracy.mean == 0.25
    assert by_point["baseline"].accuracy is None and by_point["baseline"].finetune.values == (0.60, 0.62)
    lines = study_table(study).splitlines()
    assert re.split(r"\s{2,}", lines[0]) == [
        "cell (strategy-rate-corruption)", "seeds", "fixed-mask accuracy", "fixed-mask loss", "own-mask accuracy", "fine-tuned accuracy"
    ]  # fmt: skip
    assert re.split(r"\s{2,}", lines[1]) == ["token-0.15-bert", "2", "0.1200 ± 0.0283", "4.8800 ± 0.0283", "-", "0.7100 ± 0.0141"]
    assert re.split(r"\s{2,}", lines[2]) == ["span-0.15-bert", "1", "0.2000", "4.8000", "0.2500", "0.7400"]
    assert re.split(r"\s{2,}", lines[3]) == ["baseline", "2", "-", "-", "-", "0.6100 ± 0.0141"]
    assert lines[-1] == "5 of 6 cells finished"


def test_the_report_is_one_page_with_the_tables_and_both_plots_embedded(study_json):
    page = write_study_report(study_json).read_text()
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert page.count('<img src="data:image/png;base64,') == 2
    assert "http" not in page and "<script" not in page and 'src="' + "file" not in page
    assert page.count("<table>") == 2
    assert "<td>token-0.15-bert</td><td>2</td><td>0.1200 ± 0.0283</td>" in page
    assert "<td>span-0.15-bert-seed1</td><td>pending</td>" in page
    assert "Incomplete: 5 of 6 cells finished." in page
    assert (study_json / "curves.png").read_bytes().startswith(b"\x89PNG") and (study_json / "final.png").exists()


def test_a_folder_without_a_study_has_no_report(tmp_path):
    with pytest.raises(FileNotFoundError):
        write_study_report(tmp_path)
    (tmp_path / "study.json").write_text("[]")
    with pytest.raises(ValueError, match="is not a study file"):
        write_study_report(tmp_path)
