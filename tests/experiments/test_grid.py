"""The study's grid: the cells its axes cross into, their names and folders, the fine-tunings of each
model, and the pre-training settings a cell changes (only its own). No training here."""

from pathlib import Path

import pytest

from tokenmask.experiments.grid import (
    Cell,
    Downstream,
    StudyGrid,
    augment_arm,
    augment_label,
    baseline_cells,
    cell_config,
    cross,
    point,
)
from tokenmask.recipes.config import pretrain_config
from tokenmask.settings import flatten


def names(cells: list[Cell]) -> list[str]:
    return [c.name for c in cells]


def test_the_default_grid_is_four_strategies_at_two_rates():
    cells = StudyGrid().cells(0)
    # strategy is the slowest axis, then rate: 4 x 2 = 8 cells
    assert names(cells) == [
        "token-0.15-bert-seed0", "token-0.3-bert-seed0",
        "whole_word-0.15-bert-seed0", "whole_word-0.3-bert-seed0",
        "span-0.15-bert-seed0", "span-0.3-bert-seed0",
        "pmi-0.15-bert-seed0", "pmi-0.3-bert-seed0",
    ]  # fmt: skip
    assert [c.folder for c in cells] == [f"cells/{c.name}" for c in cells]
    assert cells[1].coordinates == {
        "objective": "mlm", "strategy": "token", "rate": 0.3, "corruption": "bert", "seed": 0
    }  # fmt: skip
    assert all(c.after == () for c in cells)


def test_cross_keeps_the_first_axis_slowest():
    cells = cross([("rate", (0.1, 0.2)), ("seed", (0, 1))], lambda c: (f"{c['rate']}/{c['seed']}", "x"))
    assert names(cells) == ["0.1/0", "0.1/1", "0.2/0", "0.2/1"]


def test_seeds_count_up_from_the_first():
    grid = StudyGrid(strategies=("span",), rates=(0.3,), pretrain_seeds=3)
    assert grid.seed_list(4) == (4, 5, 6)
    assert names(grid.cells(4)) == ["span-0.3-bert-seed4", "span-0.3-bert-seed5", "span-0.3-bert-seed6"]


def test_rates_and_corruptions_are_spelled_in_the_names():
    grid = StudyGrid(strategies=("span",), rates=(0.3, 0.15), corruptions=("bert", "mask-only"))
    # rate before corruption
    assert names(grid.cells(0)) == [
        "span-0.3-bert-seed0", "span-0.3-mask-only-seed0", "span-0.15-bert-seed0", "span-0.15-mask-only-seed0",
    ]  # fmt: skip


def test_the_objective_is_named_only_when_it_is_not_the_masked_lm_and_may_grow():
    alone = StudyGrid(strategies=("token",), rates=(0.15,)).cells(0)
    assert alone[0].coordinates["objective"] == "mlm"
    # the same coordinates, so the same identity: a resumed study may add rtd and keep its masked-LM cells
    crossed = StudyGrid(strategies=("token",), rates=(0.15,), objectives=("mlm", "rtd")).cells(0)
    assert crossed[0] == alone[0] and crossed[1].name == "rtd-token-0.15-bert-seed0"
    both = StudyGrid(strategies=("token", "span"), rates=(0.15,), objectives=("mlm", "rtd")).cells(0)
    # the objective is the slowest axis
    assert names(both) == [
        "token-0.15-bert-seed0",
        "span-0.15-bert-seed0",
        "rtd-token-0.15-bert-seed0",
        "rtd-span-0.15-bert-seed0",
    ]
    assert [c.coordinates["objective"] for c in both] == ["mlm", "mlm", "rtd", "rtd"]
    alone = StudyGrid(strategies=("token",), rates=(0.15,), objectives=("rtd",)).cells(0)
    assert names(alone) == ["rtd-token-0.15-bert-seed0"]


def test_points_name_a_grid_point_for_every_seed():
    assert point({"strategy": None, "seed": 3}) == "baseline"
    assert point({"strategy": "span", "rate": 0.3, "corruption": "bert"}) == "span-0.3-bert"
    assert point({"objective": "rtd", "strategy": "pmi", "rate": 0.15, "corruption": "mask-only"}) == ("rtd-pmi-0.15-mask-only")
    assert point({"objective": "mlm", "strategy": "pmi", "rate": 0.15, "corruption": "bert"}) == "pmi-0.15-bert"


def test_strategies_none_pre_trains_nothing():
    grid = StudyGrid(strategies=("none",))
    assert grid.cells(0) == [] and StudyGrid().cells(0)


def test_baseline_cells_one_per_seed():
    cells = baseline_cells([0, 1])
    assert names(cells) == ["baseline-seed0", "baseline-seed1"]
    assert [c.folder for c in cells] == ["cells/baseline-seed0", "cells/baseline-seed1"]
    assert cells[1].coordinates == {"strategy": None, "seed": 1}


@pytest.mark.parametrize(
    ("axes", "named"),
    [
        ({"strategies": ()}, "strategies"),
        ({"strategies": ("bogus",)}, "strategies"),
        ({"strategies": ("token", "token")}, "strategies"),
        ({"strategies": ("none", "token")}, "--strategies"),
        ({"rates": ()}, "rates"),
        ({"rates": (0.0,)}, "rates"),
        ({"rates": (1.5,)}, "rates"),
        ({"rates": (0.15, 0.15)}, "rates"),
        ({"corruptions": ("x",)}, "corruptions"),
        ({"corruptions": ("bert", "bert")}, "corruptions"),
        ({"objectives": ("x",)}, "objectives"),
        ({"objectives": ("mlm", "mlm")}, "objectives"),
        ({"pretrain_seeds": 0}, "pretrain_seeds"),
    ],
)
def test_a_bad_grid_axis_is_refused_by_name(axes, named):
    with pytest.raises(ValueError, match=named):
        StudyGrid(**axes)


def test_the_refusal_names_the_value():
    with pytest.raises(ValueError, match="1.5"):
        StudyGrid(rates=(0.15, 1.5))
    with pytest.raises(ValueError, match="bogus"):
        StudyGrid(strategies=("token", "bogus"))


def test_to_dict_is_json_ready():
    assert StudyGrid(strategies=("span",), rates=(0.3,)).to_dict() == {
        "strategies": ["span"], "rates": [0.3], "corruptions": ["bert"], "pretrain_seeds": 1,
        "objectives": ["mlm"],
    }  # fmt: skip


@pytest.mark.parametrize(
    ("label", "arm"),
    [("0", (0.0, False)), ("0.1", (0.1, False)), ("0.10", (0.1, False)), ("adaptive-0.1", (0.1, True))],
)
def test_augment_arm(label, arm):
    assert augment_arm(label) == arm


@pytest.mark.parametrize("label", ["adaptive-0", "adaptive-1", "adaptive-", "1.5", "1", "-0.1", "x", "nan"])
def test_augment_arm_refuses(label):
    with pytest.raises(ValueError, match="--augment-rates"):
        augment_arm(label)


def test_augment_label_is_how_the_record_spells_it():
    assert [augment_label(v) for v in ("0", "0.0", "0.10", "adaptive-0.10")] == ["0", "0", "0.1", "adaptive-0.1"]


@pytest.mark.parametrize(
    ("axes", "named"),
    [
        ({"label_budgets": ()}, "label budgets"),
        ({"label_budgets": (0,)}, "label budgets"),
        ({"label_budgets": (100, 100)}, "label budgets"),
        ({"augment_rates": ("0.1", "0.10")}, "augmentation rates"),  # the same once spelled alike
        ({"augment_rates": ("x",)}, "--augment-rates"),
        ({"pretrain_fractions": (0.0,)}, "pre-training fractions"),
        ({"pretrain_fractions": (1.5,)}, "pre-training fractions"),
        ({"pretrain_fractions": (1.0, 1.0)}, "pre-training fractions"),
        ({"finetune": ("builtin", "more.csv")}, "--finetune"),
        ({"finetune_eval": ("held.csv",)}, "--finetune-eval"),
        ({"finetune_seeds": 0}, "finetune_seeds"),
        ({"robustness_sets": ("typo=x",)}, "--robustness-sets"),
        ({"robustness_sets": ("bogus=0.1",)}, "--robustness-sets"),
        ({"robustness_sets": ("typo=0.1", "typo=0.1")}, "--robustness-sets"),
    ],
)
def test_a_bad_fine_tuning_axis_is_refused_by_name(axes, named):
    with pytest.raises(ValueError, match=named):
        Downstream(**axes)


def test_downstream_plan():
    downstream = Downstream(
        finetune=("builtin",), label_budgets=(100, None), finetune_seeds=2, augment_rates=("0", "adaptive-0.10")
    )
    assert downstream.enabled and not Downstream().enabled
    assert downstream.to_dict(5) == {
        "label_budgets": ["100", "all"], "seeds": [5, 6], "augment_rates": ["0", "adaptive-0.1"], "pretrain_fractions": [1.0],
    }  # fmt: skip


def test_the_corrupted_held_out_sets():
    assert [c.name for c in Downstream().robustness()] == ["typo-0.1", "delete-0.2", "unk-0.2"]
    assert Downstream(robustness_sets=("none",)).robustness() == ()
    assert Downstream().robustness("tokens") == ()  # a deleted word would have to take its tag along


def test_each_model_is_followed_by_its_fine_tunings():
    sources = [*baseline_cells([0]), *StudyGrid(strategies=("token",), rates=(0.15,)).cells(0)]
    downstream = Downstream(
        finetune=("builtin",), label_budgets=(100, None), finetune_seeds=2, augment_rates=("0", "0.1"),
        pretrain_fractions=(0.5, 1.0),
    )  # fmt: skip
    cells = downstream.cells(sources, 0)
    # the baseline at fraction 0 only: 2 budgets x 2 seeds x 2 augmentations = 8; the token cell's x 2 fractions = 16
    assert len(cells) == 1 + 8 + 1 + 16
    assert cells[0].name == "baseline-seed0" and cells[9].name == "token-0.15-bert-seed0"
    base = "baseline-seed0/fraction-0"
    assert names(cells[1:5]) == [
        f"{base}/size-100/augment-0/tune-seed-0", f"{base}/size-100/augment-0.1/tune-seed-0",
        f"{base}/size-100/augment-0/tune-seed-1", f"{base}/size-100/augment-0.1/tune-seed-1",
    ]  # fmt: skip
    assert cells[5].name == f"{base}/size-all/augment-0/tune-seed-0"
    # budget slowest, then seed, augmentation, fraction
    token = "token-0.15-bert-seed0"
    assert names(cells[10:14]) == [
        f"{token}/fraction-0.5/size-100/augment-0/tune-seed-0", f"{token}/fraction-1/size-100/augment-0/tune-seed-0",
        f"{token}/fraction-0.5/size-100/augment-0.1/tune-seed-0", f"{token}/fraction-1/size-100/augment-0.1/tune-seed-0",
    ]  # fmt: skip
    assert cells[11].folder == f"cells/{token}/tune/fraction-1/size-100/augment-0/seed-0"
    assert cells[1].folder == "cells/baseline-seed0/tune/fraction-0/size-100/augment-0/seed-0"
    assert all(c.after == ("baseline-seed0",) for c in cells[1:9])
    assert all(c.after == (token,) for c in cells[10:])
    assert cells[0].after == () and cells[9].after == ()


def test_a_fine_tuning_carries_its_source_coordinates():
    sources = StudyGrid(strategies=("span",), rates=(0.3,), pretrain_seeds=2).cells(7)
    cells = Downstream(finetune=("builtin",), label_budgets=(300,), finetune_seeds=1).cells(sources, 2)
    assert names(cells) == [
        "span-0.3-bert-seed7", "span-0.3-bert-seed7/fraction-1/size-300/augment-0/tune-seed-2",
        "span-0.3-bert-seed8", "span-0.3-bert-seed8/fraction-1/size-300/augment-0/tune-seed-2",
    ]  # fmt: skip
    # the fine-tuning's own seed replaces the source's, which becomes pretrain_seed
    assert cells[3].coordinates == {
        "objective": "mlm", "strategy": "span", "rate": 0.3, "corruption": "bert", "role": "finetune",
        "point": "span-0.3-bert", "pretrain_seed": 8, "source": "span-0.3-bert-seed8",
        "source_folder": "cells/span-0.3-bert-seed8", "size": "300", "seed": 2, "augment": "0", "fraction": 1.0,
    }  # fmt: skip


def test_a_baseline_fine_tuning():
    cells = Downstream(finetune=("builtin",), finetune_seeds=1, pretrain_fractions=(0.5, 1.0)).cells(baseline_cells([3]), 0)
    assert names(cells) == ["baseline-seed3", "baseline-seed3/fraction-0/size-all/augment-0/tune-seed-0"]
    assert cells[1].coordinates == {
        "strategy": None, "role": "finetune", "point": "baseline", "pretrain_seed": 3, "source": "baseline-seed3",
        "source_folder": "cells/baseline-seed3", "size": "all", "seed": 0, "augment": "0", "fraction": 0.0,
    }  # fmt: skip


def test_fine_tunings_read_what_their_source_reads():
    terms = Cell("terms-0.15-bert-seed0", "cells/terms-0.15-bert-seed0",
                 {"strategy": "terms", "rate": 0.15, "corruption": "bert", "seed": 0, "terms": "abc123"})  # fmt: skip
    cells = Downstream(finetune=("builtin",), finetune_seeds=2).cells([terms], 0)
    assert [c.coordinates["terms"] for c in cells] == ["abc123"] * 3


BASE = pretrain_config({"lr": 0.001, "max_tokens": 5000, "span_geometric_p": 0.3, "batch_size": 4, "eval_blocks": 16})


def changed(cell) -> dict:
    """The settings ``cell`` has that ``BASE`` has not: {key: (base's, cell's)}."""
    base, mine = flatten(BASE), flatten(cell)
    return {k: (base[k], mine[k]) for k in base if base[k] != mine[k]}


def test_a_cell_changes_only_its_masking_seed_and_output():
    c = StudyGrid(strategies=("span",), rates=(0.3,), corruptions=("mask-only",)).cells(4)[0].coordinates
    cell = cell_config(BASE, c, Path("out/cells/x/pretrain"), resume=False, terms=None)
    assert changed(cell) == {
        "strategy": ("token", "span"),
        "mlm_probability": (0.15, 0.3),
        "mask_replace_prob": (0.8, 1.0),  # mask-only: every target [MASK]
        "random_replace_prob": (0.1, 0.0),
        "seed": (0, 4),
        "output": ("", "out/cells/x/pretrain"),
        "eval_masking": ("own", "common"),  # every cell scored on the same masks
    }


def test_a_resumed_cell_resumes():
    c = StudyGrid(strategies=("token",), rates=(0.15,)).cells(0)[0].coordinates
    assert changed(cell_config(BASE, c, Path("o"), resume=True, terms=None)) == {
        "resume": (False, True), "output": ("", "o"), "eval_masking": ("own", "common"),
    }  # fmt: skip


def test_a_terms_cell_masks_whole_words_with_the_terms_first():
    c = StudyGrid(strategies=("terms",), rates=(0.15,)).cells(0)[0].coordinates
    cell = cell_config(BASE, c, Path("o"), resume=False, terms="out/terms.txt")
    assert cell.masking.units.strategy == "whole_word" and cell.masking.units.mask_terms == "out/terms.txt"
    assert changed(cell) == {
        "strategy": ("token", "whole_word"), "mask_terms": (None, "out/terms.txt"), "output": ("", "o"),
        "eval_masking": ("own", "common"),
    }  # fmt: skip


def test_an_rtd_cell_changes_the_objective():
    c = StudyGrid(strategies=("token",), rates=(0.15,), objectives=("mlm", "rtd")).cells(0)
    mlm, rtd = (cell_config(BASE, x.coordinates, Path("o"), resume=False, terms=None) for x in c)
    assert mlm.objective == "mlm" and rtd.objective == "rtd"
    assert changed(rtd) == {"objective": ("mlm", "rtd"), "output": ("", "o"), "eval_masking": ("own", "common")}


def test_detection_settings_go_to_the_detector_cells():
    # the masked LM trains no detector: its cells keep the defaults, and only rtd cells take the base's weight
    base = pretrain_config({"rtd_weight": 10.0})
    mlm, rtd = (
        cell_config(base, c.coordinates, Path("o"), resume=False, terms=None)
        for c in StudyGrid(strategies=("token",), rates=(0.15,), objectives=("mlm", "rtd")).cells(0)
    )
    assert (mlm.objective, mlm.rtd_weight) == ("mlm", 50.0)
    assert (rtd.objective, rtd.rtd_weight) == ("rtd", 10.0)
