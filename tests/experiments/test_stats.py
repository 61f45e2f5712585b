"""A study's numbers from hand-made fine-tuning records: Student's t, paired intervals and their
verdicts, the rows of each comparison, the best cell. Every number is worked by hand in a comment.

The records are the grid's own cells (:mod:`tokenmask.experiments.grid`) with the fields the
runner adds (``scores``, ``pretrain_tokens``, ``status``), so they have the runner's shape.
"""

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

from tokenmask.experiments.grid import Cell, Downstream, StudyGrid, baseline_cells
from tokenmask.experiments.stats import Paired, best_cell, size_order, summarize, t_quantile_975

METRICS = ("accuracy", "macro_f1")


def study_cells(grid: StudyGrid, downstream: Downstream, *, init: bool) -> list[Cell]:
    """The cells as a study lists them: one baseline (``init``) or one per pre-training seed, then the grid's, each followed by its fine-tunings."""
    seeds = grid.seed_list(0)
    return downstream.cells([*baseline_cells(seeds[:1] if init else seeds), *grid.cells(0)], 0)


def result(cell: Cell, f1: float, *, sets: Sequence[str] = ("clean", "typo-0.1")) -> dict[str, Any]:
    """A finished fine-tuning's record: macro-F1 ``f1`` and accuracy ``f1 + 0.1`` on the clean set,
    both 0.1 lower on each corrupted set (so every set's differences are the clean set's)."""
    c = cell.coordinates
    scores = {name: {"accuracy": f1 + 0.1 - 0.1 * (name != "clean"), "macro_f1": f1 - 0.1 * (name != "clean")} for name in sets}
    return {"name": cell.name, "folder": cell.folder, **c, "pretrain_tokens": 0 if c["strategy"] is None else 1000 * c["fraction"],
            "examples": 100, "steps": 10, "scores": scores, "minutes": 0.1, "status": "finished"}  # fmt: skip


def records(cells: Sequence[Cell], f1: Callable[[Mapping[str, Any]], float | None], **options: Any) -> list[dict[str, Any]]:
    """Every cell's record: the sources finished, each fine-tuning finished with ``f1(coordinates)``,
    or pending where that is None."""
    listed = []
    for cell in cells:
        c = cell.coordinates
        if c.get("role") != "finetune":
            role = "baseline" if c["strategy"] is None else "pretrain"
            listed.append({"name": cell.name, "folder": cell.folder, "role": role, **c, "status": "finished"})
        elif (value := f1(c)) is None:
            listed.append({"name": cell.name, **c, "status": "pending"})
        else:
            listed.append(result(cell, value, **options))
    return listed


def by_seeds(table: Mapping[tuple[str, int, int], float]) -> Callable[[Mapping[str, Any]], float | None]:
    """macro-F1 by (point, pre-training seed, fine-tuning seed); a missing one is pending."""
    return lambda c: table.get((c["point"], c["pretrain_seed"], c["seed"]))


def row(rows: Sequence[Mapping[str, Any]], point: str, **where: Any) -> Mapping[str, Any]:
    """The one row of ``point`` (clean set, macro-F1, 100 labels, fraction 1, no augmentation unless ``where`` says)."""
    want = {"point": point, "set": "clean", "metric": "macro_f1", "size": "100", "fraction": 1.0, "augment": "0", **where}
    found = [r for r in rows if all(r[k] == v for k, v in want.items())]
    assert len(found) == 1, found
    return found[0]


# The three-model study of most tests: token and span at 0.15, one pre-training seed, fine-tuning seeds 0, 1, 2.
TOKEN, SPAN = "token-0.15-bert", "span-0.15-bert"
THREE = {
    **{("baseline", 0, s): v for s, v in enumerate((0.60, 0.62, 0.64))},
    **{(TOKEN, 0, s): v for s, v in enumerate((0.62, 0.65, 0.68))},
    **{(SPAN, 0, s): v for s, v in enumerate((0.61, 0.62, 0.645))},
}


def three_models(table=THREE, *, init: bool = True, **options: Any) -> list[dict[str, Any]]:
    grid = StudyGrid(strategies=("token", "span"), rates=(0.15,))
    return records(
        study_cells(grid, Downstream(finetune=("builtin",), label_budgets=(100,)), init=init), by_seeds(table), **options
    )


@pytest.mark.parametrize(("df", "t"), [(1, 12.706), (2, 4.303), (4, 2.776), (30, 2.042)])
def test_t_quantiles_from_the_table(df, t):
    assert t_quantile_975(df) == t


def test_t_quantiles_beyond_the_table():
    # tables: t(0.975; 40) = 2.021, t(0.975; 100) = 1.984; the expansion is within 1e-3 of both
    assert t_quantile_975(40) == pytest.approx(2.021, abs=1e-3)
    assert t_quantile_975(100) == pytest.approx(1.984, abs=1e-3)
    assert 2.042 > t_quantile_975(31) > t_quantile_975(100) > 1.96  # falls towards the normal's 1.96


def test_t_needs_a_degree_of_freedom():
    with pytest.raises(ValueError, match="degrees of freedom"):
        t_quantile_975(0)


def test_a_paired_interval_by_hand():
    # mean 0.03; sd sqrt((0.01² + 0 + 0.01²) / 2) = 0.01; half-width t(2) sd / sqrt(3) = 4.303 x 0.01 / 1.7321 = 0.02484
    paired = Paired.of([0.02, 0.03, 0.04])
    assert (paired.n, paired.mean, paired.sd) == (3, pytest.approx(0.03), pytest.approx(0.01))
    assert paired.low == pytest.approx(0.03 - 0.02484, abs=1e-5) and paired.high == pytest.approx(0.03 + 0.02484, abs=1e-5)
    assert paired.verdict == "better"  # [0.0052, 0.0548] excludes 0
    assert paired.to_dict()["half_width"] == pytest.approx(0.02484, abs=1e-5)


def test_an_interval_below_zero_is_worse():
    paired = Paired.of([-0.02, -0.03, -0.04])  # [-0.0548, -0.0052]
    assert paired.verdict == "worse" and paired.high == pytest.approx(-0.0052, abs=1e-4)


def test_a_narrow_interval_holding_zero_is_no_measurable_difference():
    # mean 0.005, sd 0.005, half-width 4.303 x 0.005 / 1.7321 = 0.0124 <= 0.015: [-0.0074, 0.0174]
    paired = Paired.of([0.01, 0.0, 0.005])
    assert paired.low < 0 < paired.high and paired.to_dict()["half_width"] == pytest.approx(0.0124, abs=1e-4)
    assert paired.verdict == "no measurable difference"


def test_a_wide_interval_holding_zero_is_too_wide_to_tell():
    # mean 0.005, sd 0.05, half-width 4.303 x 0.05 / 1.7321 = 0.1242 > 0.015: [-0.119, 0.129]
    paired = Paired.of([0.055, -0.045, 0.005])
    assert paired.low < 0 < paired.high and paired.verdict == "too wide to tell"


def test_two_equal_differences_are_a_zero_wide_interval():
    paired = Paired.of([0.25, 0.25])  # sd 0: [0.25, 0.25]
    assert paired.sd == 0.0 and paired.low == paired.high == 0.25 and paired.verdict == "better"


def test_one_seed_gives_no_interval():
    paired = Paired.of([0.05])
    assert (paired.n, paired.mean, paired.sd, paired.low, paired.high) == (1, 0.05, 0.0, None, None)
    assert paired.verdict == "no interval"
    assert paired.to_dict() == {"n": 1, "mean": 0.05, "sd": 0.0, "low": None, "high": None, "half_width": None,
                                "verdict": "no interval"}  # fmt: skip


def test_label_budgets_smallest_first_all_last():
    assert sorted(["all", "300", "100", "20"], key=size_order) == ["20", "100", "300", "all"]  # numbers, not text


def test_each_point_against_the_baseline_at_the_same_seeds():
    summary = summarize(three_models(), metrics=METRICS)
    assert (summary["metrics"], summary["primary"], summary["sizes"], summary["sets"]) == (
        ["accuracy", "macro_f1"],
        "macro_f1",
        ["100"],
        ["clean", "typo-0.1"],
    )
    assert summary["points"][TOKEN] == {"objective": "mlm", "strategy": "token", "rate": 0.15,
                                        "corruption": "bert"}  # fmt: skip
    # token - baseline, seed by seed: 0.02, 0.03, 0.04 -> mean 0.03, sd 0.01, [0.0052, 0.0548]
    token = row(summary["against_baseline"], TOKEN)
    assert token["values"] == [0.62, 0.65, 0.68] and token["runs"] == [[0, 0], [0, 1], [0, 2]]
    assert token["mean"] == pytest.approx(0.65) and token["sd"] == pytest.approx(0.03)
    assert token["pretrain_tokens"] == 1000 and token["against"] == {"point": "baseline", "fraction": 0.0, "augment": "0"}
    paired = token["paired"]
    assert (paired["n"], paired["mean"], paired["sd"]) == (3, pytest.approx(0.03), pytest.approx(0.01))
    assert (paired["low"], paired["high"]) == (pytest.approx(0.00516, abs=1e-5), pytest.approx(0.05484, abs=1e-5))
    assert paired["verdict"] == "better"
    # span - baseline: 0.01, 0.0, 0.005 -> mean 0.005, sd 0.005, half-width 0.0124: narrow and holding 0
    span = row(summary["against_baseline"], SPAN)
    assert span["paired"]["mean"] == pytest.approx(0.005) and span["paired"]["verdict"] == "no measurable difference"
    # every set and metric has its row, with the same differences here
    assert row(summary["against_baseline"], TOKEN, set="typo-0.1")["paired"]["mean"] == pytest.approx(0.03)
    assert row(summary["against_baseline"], TOKEN, metric="accuracy")["mean"] == pytest.approx(0.75)


def test_rows_come_baseline_first_then_the_grid_by_set_and_metric():
    rows = summarize(three_models(), metrics=METRICS)["against_baseline"]
    # 3 groups x 2 sets x 2 metrics
    assert [(r["point"], r["set"], r["metric"]) for r in rows[:5]] == [
        ("baseline", "clean", "accuracy"), ("baseline", "clean", "macro_f1"), ("baseline", "typo-0.1", "accuracy"),
        ("baseline", "typo-0.1", "macro_f1"), (TOKEN, "clean", "accuracy"),
    ]  # fmt: skip
    assert len(rows) == 12 and rows[-1]["point"] == SPAN


def test_the_baselines_own_row_has_nothing_to_compare():
    baseline = row(summarize(three_models(), metrics=METRICS)["against_baseline"], "baseline", fraction=0.0)
    assert baseline["against"] is None and baseline["paired"] is None
    assert baseline["values"] == [0.60, 0.62, 0.64] and baseline["pretrain_tokens"] == 0


def test_masking_rows_pair_a_strategy_with_token_masking():
    summary = summarize(three_models(), metrics=METRICS)
    assert {r["point"] for r in summary["masking"]} == {SPAN}  # token has no row of its own, nor the baseline
    span = row(summary["masking"], SPAN)
    assert span["against"] == {"point": TOKEN, "fraction": 1.0, "augment": "0"}
    # span - token: -0.01, -0.03, -0.035 -> mean -0.025; deviations 0.015, -0.005, -0.01,
    # sd sqrt(3.5e-4 / 2) = 0.013229; half-width 4.303 x 0.013229 / 1.7321 = 0.03287 -> [-0.0579, 0.0079]
    paired = span["paired"]
    assert paired["mean"] == pytest.approx(-0.025) and paired["sd"] == pytest.approx(0.013229, abs=1e-6)
    assert paired["low"] == pytest.approx(-0.05787, abs=1e-5) and paired["high"] == pytest.approx(0.00787, abs=1e-5)
    assert paired["verdict"] == "too wide to tell"
    assert summary["augmentation"] == [] and summary["objective"] == []


def test_a_cell_pending_on_one_side_is_left_out_of_the_pairs():
    table = {k: v for k, v in THREE.items() if k != ("baseline", 0, 2)}  # the baseline's third run not yet finished
    token = row(summarize(three_models(table), metrics=METRICS)["against_baseline"], TOKEN)
    # 0.02, 0.03 -> mean 0.025, sd 0.00707, half-width 12.706 x 0.00707 / 1.4142 = 0.0635: too wide
    assert token["values"] == [0.62, 0.65, 0.68] and token["paired"]["n"] == 2
    assert token["paired"]["mean"] == pytest.approx(0.025) and token["paired"]["verdict"] == "too wide to tell"


def test_without_a_finished_baseline_a_point_has_no_pair():
    table = {k: v for k, v in THREE.items() if k[0] != "baseline"}
    rows = summarize(three_models(table), metrics=METRICS)["against_baseline"]
    token = row(rows, TOKEN)
    assert token["against"] is None and token["paired"] is None and token["values"] == [0.62, 0.65, 0.68]
    assert not [r for r in rows if r["point"] == "baseline"]  # no values, no row


# Two pre-training seeds of token masking at 0.15, fine-tuning seeds 0 and 1.
TWO_SEEDS = {(TOKEN, 0, 0): 0.70, (TOKEN, 1, 0): 0.74, (TOKEN, 0, 1): 0.72, (TOKEN, 1, 1): 0.76}


def two_pretrain_seeds(table, *, init: bool) -> dict[str, Any]:
    grid = StudyGrid(strategies=("token",), rates=(0.15,), pretrain_seeds=2)
    cells = study_cells(grid, Downstream(finetune=("builtin",), label_budgets=(100,), finetune_seeds=2), init=init)
    return summarize(records(cells, by_seeds(table)), metrics=METRICS)


def test_against_one_starting_model_the_runs_of_a_fine_tuning_seed_are_one_pair():
    # --init: one baseline, runs 0.60 (seed 0) and 0.70 (seed 1). Token's runs of fine-tuning seed 0
    # average (0.70 + 0.74) / 2 = 0.72, of seed 1 (0.72 + 0.76) / 2 = 0.74: differences 0.12, 0.04,
    # n = 2 (two baseline runs), mean 0.08, sd 0.08 / sqrt(2) = 0.05657, half-width 12.706 x 0.05657 / sqrt(2) = 0.5082
    summary = two_pretrain_seeds({**TWO_SEEDS, ("baseline", 0, 0): 0.60, ("baseline", 0, 1): 0.70}, init=True)
    token = row(summary["against_baseline"], TOKEN)
    assert token["runs"] == [[0, 0], [0, 1], [1, 0], [1, 1]] and len(token["values"]) == 4
    paired = token["paired"]
    assert paired["n"] == 2 and paired["mean"] == pytest.approx(0.08) and paired["sd"] == pytest.approx(0.08 / math.sqrt(2))
    assert paired["high"] - paired["mean"] == pytest.approx(0.5082, abs=1e-4) and paired["verdict"] == "too wide to tell"


def test_against_a_baseline_per_pre_training_seed_the_runs_pair_on_both_seeds():
    # A model built from scratch: baseline-seed0 and baseline-seed1, each fine-tuned with seeds 0 and 1.
    # Differences (0,0) 0.70 - 0.60 = 0.10, (0,1) 0.72 - 0.70 = 0.02, (1,0) 0.74 - 0.62 = 0.12, (1,1) 0.76 - 0.68 = 0.08:
    # n = 4, mean 0.08, deviations 0.02, -0.06, 0.04, 0 -> sd sqrt(56e-4 / 3) = 0.043205,
    # half-width t(3) sd / 2 = 3.182 x 0.043205 / 2 = 0.06874 -> [0.0113, 0.1487]
    baselines = {("baseline", 0, 0): 0.60, ("baseline", 0, 1): 0.70, ("baseline", 1, 0): 0.62, ("baseline", 1, 1): 0.68}
    paired = row(two_pretrain_seeds({**TWO_SEEDS, **baselines}, init=False)["against_baseline"], TOKEN)["paired"]
    assert paired["n"] == 4 and paired["mean"] == pytest.approx(0.08) and paired["sd"] == pytest.approx(0.043205, abs=1e-6)
    assert paired["low"] == pytest.approx(0.01126, abs=1e-5) and paired["verdict"] == "better"


def test_a_pending_baseline_of_another_pre_training_seed_still_pairs_on_both_seeds():
    # baseline-seed1's fine-tunings are pending: they still say there is a baseline per seed, so token
    # pairs on both seeds, with baseline-seed0 only: (0,0) 0.10, (0,1) 0.02 -> n = 2, mean 0.06.
    # (Paired on the fine-tuning seed alone it would be 0.12, 0.04 -> mean 0.08.)
    summary = two_pretrain_seeds({**TWO_SEEDS, ("baseline", 0, 0): 0.60, ("baseline", 0, 1): 0.70}, init=False)
    paired = row(summary["against_baseline"], TOKEN)["paired"]
    assert paired["n"] == 2 and paired["mean"] == pytest.approx(0.06)


def test_augmentation_rows_pair_with_no_augmentation_of_the_same_model_and_fraction():
    grid = StudyGrid(strategies=("token",), rates=(0.15,))
    downstream = Downstream(
        finetune=("builtin",), label_budgets=(100,), augment_rates=("0", "0.1"), pretrain_fractions=(0.5, 1.0)
    )
    table = {
        ("baseline", "0", 0.0): (0.60, 0.62, 0.64), ("baseline", "0.1", 0.0): (0.61, 0.63, 0.66),
        (TOKEN, "0", 0.5): (0.61, 0.63, 0.66), (TOKEN, "0.1", 0.5): (0.60, 0.63, 0.65),
        (TOKEN, "0", 1.0): (0.62, 0.65, 0.68), (TOKEN, "0.1", 1.0): (0.64, 0.66, 0.70),
    }  # fmt: skip
    cells = records(study_cells(grid, downstream, init=True), lambda c: table[c["point"], c["augment"], c["fraction"]][c["seed"]])
    summary = summarize(cells, metrics=METRICS)
    rows = summary["augmentation"]
    assert [(r["point"], r["fraction"], r["augment"], r["set"]) for r in rows if r["metric"] == "macro_f1"] == [
        ("baseline", 0.0, "0.1", "clean"), ("baseline", 0.0, "0.1", "typo-0.1"),
        (TOKEN, 0.5, "0.1", "clean"), (TOKEN, 0.5, "0.1", "typo-0.1"),
        (TOKEN, 1.0, "0.1", "clean"), (TOKEN, 1.0, "0.1", "typo-0.1"),
    ]  # fmt: skip
    # token at fraction 1: 0.02, 0.01, 0.02 -> mean 0.01667, sd 0.005774, half-width 4.303 x 0.005774 / 1.7321 = 0.01434
    augmented = row(rows, TOKEN, augment="0.1")
    assert augmented["against"] == {"point": TOKEN, "fraction": 1.0, "augment": "0"}
    assert augmented["paired"]["mean"] == pytest.approx(0.016667, abs=1e-6)
    assert augmented["paired"]["low"] == pytest.approx(0.00232, abs=1e-5) and augmented["paired"]["verdict"] == "better"
    # at fraction 0.5: -0.01, 0, -0.01 -> mean -0.00667, sd 0.005774: [-0.0210, 0.0077], narrow enough
    half = row(rows, TOKEN, augment="0.1", fraction=0.5)
    assert half["against"]["fraction"] == 0.5 and half["paired"]["verdict"] == "no measurable difference"
    # against the baseline, augmented runs pair with the augmented baseline: 0.03, 0.03, 0.04 -> mean 0.03333
    against = row(summary["against_baseline"], TOKEN, augment="0.1")
    assert against["against"] == {"point": "baseline", "fraction": 0.0, "augment": "0.1"}
    assert against["paired"]["mean"] == pytest.approx(0.033333, abs=1e-6)
    assert against["pretrain_tokens"] == 1000 and row(summary["against_baseline"], TOKEN, fraction=0.5)["pretrain_tokens"] == 500


def test_masking_rows_pair_at_the_same_corruption():
    grid = StudyGrid(strategies=("token", "span"), rates=(0.15,), corruptions=("bert", "mask-only"))
    cells = records(study_cells(grid, Downstream(finetune=("builtin",), label_budgets=(100,)), init=True), lambda c: 0.5)
    rows = summarize(cells, metrics=METRICS)["masking"]
    assert {(r["point"], r["against"]["point"]) for r in rows} == {
        ("span-0.15-bert", "token-0.15-bert"),
        ("span-0.15-mask-only", "token-0.15-mask-only"),
    }


def test_objective_rows_pair_detection_with_the_masked_lm_of_the_same_masking():
    grid = StudyGrid(strategies=("token", "span"), rates=(0.15,), objectives=("mlm", "rtd"))
    # rtd-span beats span by 0.01, 0.02, 0.03: mean 0.02, sd 0.01, half-width 0.02484 -> [-0.0048, 0.0448]
    table = {"span-0.15-bert": (0.60, 0.60, 0.60), "rtd-span-0.15-bert": (0.61, 0.62, 0.63)}
    cells = records(study_cells(grid, Downstream(finetune=("builtin",), label_budgets=(100,)), init=True),
                    lambda c: table.get(c["point"], (0.5, 0.5, 0.5))[c["seed"]])  # fmt: skip
    summary = summarize(cells, metrics=METRICS)
    assert summary["points"]["rtd-span-0.15-bert"]["objective"] == "rtd"
    assert summary["points"]["span-0.15-bert"]["objective"] == "mlm"
    assert {(r["point"], r["against"]["point"]) for r in summary["objective"]} == {
        ("rtd-token-0.15-bert", "token-0.15-bert"),
        ("rtd-span-0.15-bert", "span-0.15-bert"),
    }
    # a detector's masking is compared with the token-masked detector's
    assert {(r["point"], r["against"]["point"]) for r in summary["masking"]} == {
        ("span-0.15-bert", "token-0.15-bert"),
        ("rtd-span-0.15-bert", "rtd-token-0.15-bert"),
    }
    paired = row(summary["objective"], "rtd-span-0.15-bert")["paired"]
    assert paired["mean"] == pytest.approx(0.02) and paired["verdict"] == "too wide to tell"


def test_sizes_smallest_first_and_sets_clean_first():
    grid = StudyGrid(strategies=("token",), rates=(0.15,))
    downstream = Downstream(finetune=("builtin",), label_budgets=(None, 300, 20), finetune_seeds=1)
    cells = records(study_cells(grid, downstream, init=True), lambda c: 0.5, sets=("unk-0.2", "delete-0.2", "clean"))
    summary = summarize(cells, metrics=METRICS)
    assert summary["sizes"] == ["20", "300", "all"]
    assert summary["sets"] == ["clean", "delete-0.2", "unk-0.2"]
    assert [r["size"] for r in summary["against_baseline"]][::12] == ["20", "300", "all"]  # 2 groups x 3 sets x 2 metrics each
    # one seed: a difference, no interval
    assert row(summary["against_baseline"], TOKEN, size="20")["paired"]["verdict"] == "no interval"


def test_nothing_finished_gives_no_rows():
    summary = summarize(three_models({}), metrics=METRICS)
    assert summary["sizes"] == [] and summary["sets"] == [] and summary["against_baseline"] == []
    assert set(summary["points"]) == {"baseline", TOKEN, SPAN}  # the plan's points, from the pending cells


def test_the_best_cell_has_the_highest_clean_primary_metric():
    cells = three_models({**THREE, (SPAN, 0, 1): 0.68})  # span's second run ties token's third (0.68)
    best = best_cell(cells, "macro_f1")
    # the first of equals in the record's order: token's cells come before span's
    assert best == {
        "name": "token-0.15-bert-seed0/fraction-1/size-100/augment-0/tune-seed-2",
        "metric": "macro_f1",
        "value": 0.68,
    }
    assert best_cell(cells, "accuracy")["value"] == pytest.approx(0.78)


def test_no_best_cell_before_a_fine_tuning_finishes():
    assert best_cell(three_models({}), "macro_f1") is None
