"""The study's bookkeeping and report, without training: plans, folders, summaries, report.html from a study.json."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from tokenmask.experiments.downstream import DownstreamPlan
from tokenmask.experiments.plan import cell_digest, shared_part
from tokenmask.experiments.study import StudyConfig, StudyExperiment, study_config
from tokenmask.experiments.study_grid import DEFAULT_CELL_TOKENS, StudyGrid, terms_fingerprint
from tokenmask.experiments.study_report import Spread, write_study_report
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


BUILTIN = DownstreamPlan(finetune=("builtin",))


def test_with_fine_tuning_each_model_is_followed_by_its_fine_tunings_the_baseline_first():
    downstream = DownstreamPlan(finetune=("builtin",), label_budgets=(100, None), finetune_seeds=2, pretrain_fractions=(0.5, 1.0))
    config = StudyConfig(
        base=PretrainConfig(loop=LoopConfig(output="o", seed=4, max_steps=8)), grid=StudyGrid(("token",), (0.15,), seeds=2),
        downstream=downstream,
    )  # fmt: skip
    cells = config.cells()
    sources = [c.name for c in cells if c.coordinates.get("role") != "finetune"]
    assert sources == ["baseline-seed4", "baseline-seed5", "token-0.15-bert-seed4", "token-0.15-bert-seed5"]
    assert len(cells) == 4 + 2 * (2 * 2 * 1) + 2 * (2 * 2 * 1 * 2)  # baselines at share 0; cells at 0.5 and 1
    tuned = cells[cells.index(next(c for c in cells if c.name == "token-0.15-bert-seed5")) + 1]
    assert tuned.name == "token-0.15-bert-seed5/fraction-0.5/size-100/augment-0/tune-seed-4"
    assert tuned.folder == "cells/token-0.15-bert-seed5/tune/fraction-0.5/size-100/augment-0/seed-4"
    assert tuned.after == ("token-0.15-bert-seed5",)
    assert {k: tuned.coordinates[k] for k in ("role", "point", "pretrain_seed", "seed", "fraction", "size", "augment")} == {
        "role": "finetune", "point": "token-0.15-bert", "pretrain_seed": 5, "seed": 4, "fraction": 0.5, "size": "100",
        "augment": 0.0,
    }  # fmt: skip
    assert {c.coordinates["fraction"] for c in cells if c.coordinates.get("source") == "baseline-seed4"} == {0.0}
    assert config.snapshots == (0.5,)  # the share 1 is the cell's final model


def test_the_terms_cells_and_their_fine_tunings_alone_hold_the_terms_in_their_identity(tmp_path):
    terms = tmp_path / "terms.txt"
    terms.write_text("thou\nthee\n")
    config = StudyConfig(
        base=PretrainConfig(loop=LoopConfig(output="o", max_steps=8), init="minilm"), grid=StudyGrid(("token", "terms"), (0.15,)),
        downstream=BUILTIN, terms_file=str(terms),
    )  # fmt: skip
    held = {c.name.split("/")[0]: dict(c.inputs) for c in config.cells()}
    assert held == {
        "baseline-seed0": {},
        "token-0.15-bert-seed0": {},
        "terms-0.15-bert-seed0": {"terms": terms_fingerprint(str(terms))},
    }
    tunings = {c.name for c in config.cells() if c.coordinates.get("source") == "terms-0.15-bert-seed0"}
    assert tunings and {c.name for c in config.cells() if c.inputs} == {"terms-0.15-bert-seed0", *tunings}


def test_from_a_checkpoint_there_is_one_baseline_whatever_the_seeds():
    config = StudyConfig(
        base=PretrainConfig(loop=LoopConfig(output="o", max_steps=8), init="minilm"), grid=StudyGrid(("token",), (0.15,), seeds=2),
        downstream=BUILTIN,
    )  # fmt: skip
    assert [c.name for c in config.cells() if c.coordinates.get("role") != "finetune"] == [
        "baseline-seed0", "token-0.15-bert-seed0", "token-0.15-bert-seed1"
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"label_budgets": "100,0"}, r"label budgets must be whole numbers >= 1 or 'all'; got 0"),
        ({"label_budgets": "100,100"}, "label budgets: each value once"),
        ({"augment_rates": "0,1"}, r"augmentation rates must be in \[0, 1\); got 1.0"),
        ({"pretrain_fractions": "0,1"}, r"pre-training fractions must be in \(0, 1\]; got 0.0"),
        ({"finetune": "builtin,more.csv"}, "'builtin' stands alone"),
        ({"robustness_sets": ["typo=x"]}, "--robustness-sets: rates must be numbers"),
        ({"finetune": "", "finetune_eval": "e.csv"}, "--finetune-eval scores the fine-tuned models: give --finetune DATA too"),
        ({"pretrain_fractions": "0.5,1", "max_steps": None, "max_time": 3.0}, "give --max-tokens or --max-steps"),
        ({"pretrain_fractions": "0.5,1", "max_time": 3.0}, "and no --max-time"),
        ({"task": "tokens", "robustness_sets": ["typo=0.3"]}, "--robustness-sets corrupt the text of classification examples"),
        ({"strategies": "terms", "terms_file": "/nonexistent/terms.txt"}, "--terms-file /nonexistent/terms.txt: no such file"),
        ({"finetune_max_length": 4}, "finetune_max_length must be >= 8"),
        ({"max_length": 64, "finetune_max_length": 65}, "--finetune-max-length 65: .* positions for --max-length 64 tokens"),
    ],
)
def test_bad_downstream_settings_are_refused_naming_them(settings, message):
    given = {"output": "o", "max_steps": 5, "finetune": "builtin", **settings}
    with pytest.raises(ValueError, match=message):
        study_config({k: v for k, v in given.items() if v is not None})


def test_fine_tunings_cut_examples_at_their_own_length_or_the_block_length():
    blocks = study_config({"output": "o", "max_steps": 5, "max_length": 64, "finetune": "builtin"})
    assert blocks.downstream.finetune_config(blocks.base).max_length == 64  # none given: the pre-training block length
    longer = study_config({"output": "o", "max_steps": 5, "max_length": 64, "finetune": "builtin", "init": "minilm",
                           "finetune_max_length": 256})  # fmt: skip
    assert longer.downstream.finetune_config(longer.base).max_length == 256  # a checkpoint's positions are checked as it loads
    shorter = study_config({"output": "o", "max_steps": 5, "max_length": 64, "finetune": "builtin", "finetune_max_length": 32})
    assert shorter.downstream.finetune_config(shorter.base).max_length == 32
    same = study_config({"output": "o", "max_steps": 5, "max_length": 64, "finetune": "builtin", "finetune_max_length": 64})
    assert StudyExperiment(same).plan() == StudyExperiment(blocks).plan()  # a study recorded before the option resumes
    assert plan_differences(StudyExperiment(blocks).plan(), StudyExperiment(shorter).plan()) == "finetune (settings)"


def test_plan_differences_name_the_sections_and_keys():
    plan = study_config({"output": "o", "max_steps": 5, **GRID_SETTINGS}).plan()
    other = study_config({"output": "elsewhere", "max_steps": 5, "lr": 1e-3, "resume": True, **GRID_SETTINGS, "rates": "0.3"})
    assert plan_differences(plan, plan) == ""
    where = study_config({"output": "x", "max_steps": 5, "resume": True, **GRID_SETTINGS})
    assert plan_differences(plan, where.plan()) == ""  # where, not what
    assert plan_differences(plan, other.plan()) == "grid (rates), settings (lr)"
    tuned = StudyConfig(base=other.base, grid=other.grid, downstream=BUILTIN).plan()
    assert plan_differences(other.plan(), tuned) == "finetune (on now)"
    more = StudyConfig(base=other.base, grid=other.grid, downstream=replace(BUILTIN, finetune_seeds=5)).plan()
    assert plan_differences(tuned, more) == "finetune (seeds)"
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
    grown = StudyExperiment(study_config({"output": str(tmp_path), "max_steps": 5, **GRID_SETTINGS, "rates": "0.15,0.3"}))
    assert check_folder(tmp_path, grown, resume=True)["plan"] == study.plan()  # another rate: an axis grows
    (tmp_path / "study.json").unlink()
    (tmp_path / "config.yaml").write_text("lr: 1")
    with pytest.raises(ValueError, match="holds a single run or another experiment, not a study"):
        check_folder(tmp_path, study, resume=True)


def test_a_resumed_study_may_add_fine_tuning_seeds_and_budgets_but_not_fractions(tmp_path):
    base = study_config({"output": str(tmp_path), "max_steps": 5, **GRID_SETTINGS})
    tuned = StudyExperiment(StudyConfig(base=base.base, grid=base.grid, downstream=replace(BUILTIN, label_budgets=(100,))))
    (tmp_path / "study.json").write_text(json.dumps({"plan": tuned.plan(), "cells": []}))
    more = replace(BUILTIN, label_budgets=(100, 300), finetune_seeds=5, augment_rates=(0.0, 0.1))
    grown = StudyExperiment(StudyConfig(base=base.base, grid=base.grid, downstream=more))
    assert check_folder(tmp_path, grown, resume=True)["plan"] == tuned.plan()
    kept = {cell.name: cell_digest(shared_part(tuned), cell) for cell in tuned.cells()}
    assert all(cell_digest(shared_part(grown), cell) == kept[cell.name] for cell in grown.cells() if cell.name in kept)
    assert len(kept) < len(grown.cells()) and set(kept) <= {cell.name for cell in grown.cells()}
    curve = replace(BUILTIN, label_budgets=(100,), pretrain_fractions=(0.5, 1.0))
    with pytest.raises(ValueError, match=r"another plan \(finetune \(pretrain_fractions\)\)"):
        check_folder(tmp_path, StudyExperiment(StudyConfig(base=base.base, grid=base.grid, downstream=curve)), resume=True)
    lr = replace(BUILTIN, label_budgets=(100,), finetune_lr=1e-3)
    with pytest.raises(ValueError, match=r"another plan \(finetune \(settings\)\)"):
        check_folder(tmp_path, StudyExperiment(StudyConfig(base=base.base, grid=base.grid, downstream=lr)), resume=True)


def test_the_study_settings_replay_it_and_name_no_setting_a_cell_sets():
    config = study_config(
        {"output": "o", "max_steps": 5, "lr": 1e-3, **GRID_SETTINGS, "finetune": "train.csv", "label_budgets": "100,all",
         "finetune_seeds": 3, "augment_rates": "0,0.1", "task": "classify", "text_column": "review", "jobs": 2}
    )  # fmt: skip
    settings = StudyExperiment(config).settings()
    assert not {"strategy", "mlm_probability", "mlm_probability_end", "eval_masking", "overwrite", "resume"} & settings.keys()
    assert (settings["strategies"], settings["rates"], settings["seeds"], settings["jobs"]) == (["token", "span"], [0.15], 2, 2)
    assert (settings["finetune"], settings["label_budgets"], settings["text_column"]) == (["train.csv"], [100, None], "review")
    assert study_config(settings) == config
    assert flatten(study_config(settings)) == {**settings, "resume": False}
    resumed = study_config({"output": "o", "max_steps": 5, **GRID_SETTINGS, "resume": True})
    assert "resume" not in StudyExperiment(resumed).settings()  # a replay of a resumed study does not resume


def test_spread_by_hand():
    spread = Spread.of([0.10, 0.14])
    assert spread is not None and spread.mean == pytest.approx(0.12)
    assert spread.std == pytest.approx(0.0282843, rel=1e-5)  # sqrt((0.02^2 + 0.02^2) / (2 - 1))
    assert str(spread) == "0.1200 ± 0.0283" and str(Spread.of([0.5])) == "0.5000" and Spread.of([]) is None


def test_a_folder_without_a_study_has_no_report(tmp_path):
    with pytest.raises(FileNotFoundError):
        write_study_report(tmp_path)
    (tmp_path / "study.json").write_text("[]")
    with pytest.raises(ValueError, match="is not a study file"):
        write_study_report(tmp_path)


def test_a_terms_cell_masks_whole_words_with_the_terms_file_first():
    from tokenmask.experiments.study_grid import cell_config

    base = PretrainConfig(loop=LoopConfig(output="o", max_steps=5))
    (cell,) = StudyGrid(("terms",), (0.3,)).cells()
    config = cell_config(base, cell.coordinates, "o/cells/x", terms="o/terms.txt")
    assert (config.masking.units.strategy, config.masking.units.mask_terms) == ("whole_word", "o/terms.txt")
    assert config.masking.selection.mlm_probability == 0.3 and cell.name == "terms-0.3-bert-seed0"
    with pytest.raises(ValueError, match="the terms cells need a terms file"):
        cell_config(base, cell.coordinates, "o/cells/x")


def test_terms_settings_that_contradict_the_grid_are_refused(tmp_path):
    terms = tmp_path / "t.txt"
    terms.write_text("thou\n")
    with pytest.raises(ValueError, match="--mask-terms applies to every cell: give the terms cells' file with --terms-file"):
        study_config({"output": "o", "max_steps": 5, "strategies": "token,terms", "mask_terms": "t.txt"})
    with pytest.raises(ValueError, match="--terms-file is what the 'terms' cells mask first: add terms to --strategies"):
        study_config({"output": "o", "max_steps": 5, "strategies": "token", "terms_file": str(terms)})


def test_the_objective_axis_names_its_cells_and_sets_each_cells_objective():
    from tokenmask.experiments.study_grid import cell_config

    grid = StudyGrid(("token", "whole_word"), (0.15,), objectives=("mlm", "rtd"))
    names = [cell.name for cell in grid.cells()]
    assert names == [
        "token-0.15-bert-seed0",
        "whole_word-0.15-bert-seed0",
        "rtd-token-0.15-bert-seed0",
        "rtd-whole_word-0.15-bert-seed0",
    ]
    assert grid.describe() == "4 cells: 2 objectives x 2 strategies x 1 rate x 1 corruption x 1 seed"
    base = PretrainConfig(loop=LoopConfig(output="o", max_steps=5), preset="electra-tiny")
    objectives = [cell_config(base, cell.coordinates, "o/cells/x").objective for cell in grid.cells()]
    assert objectives == ["mlm", "mlm", "rtd", "rtd"]
    # a masked-LM grid has no objective axis: its cells keep the coordinates (and identities) they always had
    plain = StudyGrid(("token",), (0.15,))
    assert "objective" not in plain.cells()[0].coordinates and "objectives" not in plain.to_dict()
    assert grid.to_dict()["objectives"] == ["mlm", "rtd"]
    with pytest.raises(ValueError, match="objectives must be one of mlm, rtd; got 'electra'"):
        StudyGrid(objectives=("electra",))


def test_rtd_cells_need_a_modernbert_or_electra_preset_before_anything_runs():
    with pytest.raises(ValueError, match="--objectives rtd: .*choose --preset modernbert-tiny, .*electra-tiny.*not bert-tiny"):
        study_config({"output": "o", "objectives": "mlm,rtd", "preset": "bert-tiny"})
    assert study_config({"output": "o", "objectives": "mlm,rtd"}).grid.objectives == ("mlm", "rtd")  # the default preset
    assert study_config({"output": "o", "objectives": "mlm,rtd", "preset": "electra-tiny"}).grid.objectives == ("mlm", "rtd")
    with pytest.raises(ValueError, match="objective is set per cell by the grid"):
        study_config({"output": "o", "objective": "rtd", "preset": "electra-tiny"})


def test_settings_added_later_stay_out_of_the_plan_at_their_defaults():
    # a study recorded before replaced-token detection existed has none of its settings in its plan: it must still resume
    plan = study_config({"output": "o"}).plan()
    assert not {"rtd_weight", "generator_share", "objective"} & plan["settings"].keys() and "objectives" not in plan["grid"]
    changed = study_config({"output": "o", "rtd_weight": 10.0, "preset": "electra-tiny", "objectives": "rtd"}).plan()
    assert changed["settings"]["rtd_weight"] == 10.0 and changed["grid"]["objectives"] == ["rtd"]


def test_detection_settings_need_rtd_in_the_grid():
    with pytest.raises(ValueError, match="--rtd-weight is a setting of replaced-token detection: add rtd to --objectives"):
        study_config({"output": "o", "rtd_weight": 10.0})
    with pytest.raises(ValueError, match="--generator-share is a setting"):
        study_config({"output": "o", "generator_share": 0.5, "preset": "electra-tiny"})


def test_rtd_cells_from_init_need_an_electra_discriminator_before_any_cell_runs(tmp_path):
    from tokenmask.experiments.study import run_study

    config = study_config({"output": str(tmp_path / "s"), "init": "minilm", "objectives": "mlm,rtd", "estimate": False})
    with pytest.raises(ValueError, match="--objective rtd continues ELECTRA discriminators.*minilm is a bert"):
        run_study(config)
    assert not (tmp_path / "s").exists()
