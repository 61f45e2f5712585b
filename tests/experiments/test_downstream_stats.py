"""The downstream numbers by hand: rows against the baseline, pairing rules, augmentation, masking, the curve; the verdict's words."""

from __future__ import annotations

import math

import pytest

from tokenmask.experiments.compare_stats import Paired, t_quantile_975
from tokenmask.experiments.downstream_stats import (
    NARROW,
    describe_point,
    in_points,
    interval,
    judge,
    seeds_for_narrow,
    size_order,
    summarize_downstream,
    tokens,
    verdict,
)

POINTS = {
    "baseline": (None, None, None, None),
    "token-0.15-bert": ("token", 0.15, None, "bert"),
    "whole_word-0.15-bert": ("whole_word", 0.15, None, "bert"),
    "span-0.3-bert": ("span", 0.3, None, "bert"),
}
FULL_TOKENS = 1_000_000


def tune(point, seed, clean, *, size="100", augment=0.0, fraction=None, pretrain_seed=0, typo=None, status="finished"):
    """A fine-tuning cell of the record, macro-F1 ``clean`` (accuracy 0.05 above), optionally on typo-0.1 too."""
    strategy, rate, rate_end, corruption = POINTS[point]
    fraction = (0.0 if strategy is None else 1.0) if fraction is None else fraction
    cell = {
        "name": f"tune/{point}-seed{pretrain_seed}/fraction-{fraction:g}/size-{size}/augment-{augment:g}/seed-{seed}",
        "role": "finetune", "point": point, "strategy": strategy, "rate": rate, "rate_end": rate_end, "corruption": corruption,
        "pretrain_seed": pretrain_seed, "fraction": fraction, "size": size, "augment": augment, "seed": seed,
    }  # fmt: skip
    if status == "pending":
        return {**cell, "status": "pending"}
    scores = {"clean": {"accuracy": clean + 0.05, "macro_f1": clean}}
    if typo is not None:
        scores["typo-0.1"] = {"accuracy": typo + 0.05, "macro_f1": typo}
    return cell | {"pretrain_tokens": round(fraction * FULL_TOKENS), "examples": 100, "steps": 200, "seconds": 30.0,
                   "scores": scores, "minutes": 0.5, "status": "finished", "plan": "3f2a9c"}  # fmt: skip


def rows(summary, kind="against_baseline", **where):
    return [r for r in summary[kind] if all(r[k] == v for k, v in where.items())]


def one(summary, kind="against_baseline", **where):
    (row,) = rows(summary, kind, **where)
    return row


def summarize(cells):
    return summarize_downstream(cells, metrics=("accuracy", "macro_f1"), primary="macro_f1")


def test_a_point_against_the_baseline_by_hand():
    cells = [tune("baseline", s, v) for s, v in enumerate((0.70, 0.72, 0.71))]
    cells += [tune("whole_word-0.15-bert", s, v) for s, v in enumerate((0.72, 0.75, 0.75))]
    cells += [{"name": "whole_word-0.15-bert-seed0", "role": "pretrain", "point": "whole_word-0.15-bert", "seed": 0}]  # a source
    summary = summarize(cells)
    assert summary["sizes"] == ["100"] and summary["sets"] == ["clean"] and summary["narrow"] == NARROW == 0.015
    base = one(summary, point="baseline", metric="macro_f1")
    assert base["values"] == [0.70, 0.72, 0.71] and base["mean"] == pytest.approx(0.71) and base["sd"] == pytest.approx(0.01)
    assert base["against"] is None and base["paired"] is None and base["pretrain_tokens"] == 0
    row = one(summary, point="whole_word-0.15-bert", metric="macro_f1")
    # values 0.72, 0.75, 0.75: mean 0.74, sd sqrt((0.02² + 0.01² + 0.01²) / 2) = sqrt(0.0003) = 0.017321
    assert row["mean"] == pytest.approx(0.74) and row["sd"] == pytest.approx(math.sqrt(0.0003))
    assert row["runs"] == [[0, 0], [0, 1], [0, 2]] and row["pretrain_tokens"] == FULL_TOKENS
    assert row["against"] == {"point": "baseline", "fraction": 0.0, "augment": 0.0}
    # differences 0.02, 0.03, 0.04: mean 0.03, sd 0.01, half-width 4.303 × 0.01 / √3 = 0.024843
    paired = row["paired"]
    assert (paired["n"], paired["mean"], paired["sd"]) == (3, pytest.approx(0.03), pytest.approx(0.01))
    assert paired["half_width"] == pytest.approx(0.024843, abs=1e-6)
    assert (paired["low"], paired["high"]) == (pytest.approx(0.005157, abs=1e-6), pytest.approx(0.054843, abs=1e-6))
    assert paired["within_noise"] is False and paired["narrow"] is False and paired["verdict"] == "better"
    accuracy = one(summary, point="whole_word-0.15-bert", metric="accuracy")  # the same differences, 0.05 higher
    assert accuracy["mean"] == pytest.approx(0.79) and accuracy["paired"]["mean"] == pytest.approx(0.03)


def test_the_baseline_pairs_on_what_it_shares():
    # the baseline of seed 2 has not finished: the point pairs on seeds 0 and 1, its own mean is over all three
    cells = [tune("baseline", 0, 0.70), tune("baseline", 1, 0.72), tune("baseline", 2, 0.0, status="pending")]
    cells += [tune("token-0.15-bert", s, v) for s, v in enumerate((0.72, 0.75, 0.80))]
    row = one(summarize(cells), point="token-0.15-bert", metric="macro_f1")
    assert row["values"] == [0.72, 0.75, 0.80] and row["paired"]["n"] == 2
    assert row["paired"]["mean"] == pytest.approx(0.025)  # (0.02 + 0.03) / 2
    # no baseline finished at a budget: the rows are there, nothing is paired
    lone = summarize([tune("token-0.15-bert", 0, 0.7, size="300"), tune("baseline", 0, 0.0, size="300", status="pending")])
    assert [r["paired"] for r in lone["against_baseline"]] == [None, None] and verdict(lone) == [
        "At 300 labels, no continued pre-training run has a finished baseline run to pair with yet."
    ]


def test_one_baseline_for_every_pre_training_seed_and_one_per_pre_training_seed():
    points = [tune("token-0.15-bert", s, v, pretrain_seed=p) for (p, s), v in
              {(0, 0): 0.72, (0, 1): 0.75, (1, 0): 0.74, (1, 1): 0.73}.items()]  # fmt: skip
    # --init: one baseline per fine-tuning seed (pretrain_seed = the first seed), shared by both pre-training seeds: a
    # fine-tuning seed's runs are averaged over the pre-training seeds first, so n counts the independent baseline runs,
    # 2: seed 0 (0.72 + 0.74) / 2 - 0.70 = 0.03, seed 1 (0.75 + 0.73) / 2 - 0.71 = 0.03
    shared = one(
        summarize([*points, tune("baseline", 0, 0.70), tune("baseline", 1, 0.71)]), point="token-0.15-bert", metric="macro_f1"
    )
    assert shared["paired"]["n"] == 2 and shared["paired"]["mean"] == pytest.approx(0.03) and shared["values"] == [
        0.72, 0.75, 0.74, 0.73
    ]  # fmt: skip
    # from scratch: a baseline per pre-training seed, each cell pairs with its own
    own = [
        tune("baseline", s, v, pretrain_seed=p) for (p, s), v in {(0, 0): 0.70, (0, 1): 0.71, (1, 0): 0.60, (1, 1): 0.61}.items()
    ]
    paired = one(summarize([*points, *own]), point="token-0.15-bert", metric="macro_f1")["paired"]
    assert paired["n"] == 4 and paired["mean"] == pytest.approx((0.02 + 0.04 + 0.14 + 0.12) / 4)
    # pre-training seed 1's baseline still pending: its cells do not pair with seed 0's
    partial = [*own[:2], tune("baseline", 0, 0.0, pretrain_seed=1, status="pending")]
    paired = one(summarize([*points, *partial]), point="token-0.15-bert", metric="macro_f1")["paired"]
    assert paired["n"] == 2 and paired["mean"] == pytest.approx(0.03)


def test_augmentation_and_masking_pair_on_both_seeds():
    cells = [tune("baseline", s, 0.70) for s in (0, 1)]
    cells += [tune("token-0.15-bert", s, v) for s, v in enumerate((0.72, 0.74))]
    cells += [tune("whole_word-0.15-bert", s, v) for s, v in enumerate((0.75, 0.76))]
    cells += [tune("whole_word-0.15-bert", s, v, augment=0.1) for s, v in enumerate((0.76, 0.78))]
    cells += [tune("span-0.3-bert", s, 0.7) for s in (0, 1)]  # no token point at 0.3: no masking row
    summary = summarize(cells)
    augmented = one(summary, "augmentation", metric="macro_f1")
    assert (augmented["point"], augmented["augment"]) == ("whole_word-0.15-bert", 0.1)
    assert augmented["against"] == {"point": "whole_word-0.15-bert", "fraction": 1.0, "augment": 0.0}
    assert augmented["paired"]["mean"] == pytest.approx(0.015)  # (0.01 + 0.02) / 2
    masked = one(summary, "masking", metric="macro_f1")
    assert masked["point"] == "whole_word-0.15-bert" and masked["against"]["point"] == "token-0.15-bert"
    assert masked["paired"]["mean"] == pytest.approx(0.025)  # (0.03 + 0.02) / 2
    # the augmented cell against the baseline fine-tuned at the same rate, so the difference is continued pre-training's
    # alone: none here, so no pair; with one, (0.76 - 0.71 + 0.78 - 0.72) / 2
    assert one(summary, point="whole_word-0.15-bert", augment=0.1, metric="macro_f1")["paired"] is None
    augmented_baseline = [tune("baseline", s, v, augment=0.1) for s, v in enumerate((0.71, 0.72))]
    row = one(summarize([*cells, *augmented_baseline]), point="whole_word-0.15-bert", augment=0.1, metric="macro_f1")
    assert row["against"] == {"point": "baseline", "fraction": 0.0, "augment": 0.1}
    assert row["paired"]["mean"] == pytest.approx(0.055)


def test_the_curve_runs_from_the_baseline_through_the_fractions():
    cells = [tune("baseline", s, 0.70) for s in (0, 1)]
    for fraction, gain in ((1.0, 0.04), (0.5, 0.02)):
        cells += [tune("token-0.15-bert", s, 0.70 + gain + 0.01 * s, fraction=fraction) for s in (0, 1)]
    summary = summarize(cells)
    curve = next(c for c in summary["curve"] if c["metric"] == "macro_f1")
    assert (curve["size"], curve["point"]) == ("100", "token-0.15-bert")
    assert [(f["fraction"], f["pretrain_tokens"], f["n"]) for f in curve["fractions"]] == [
        (0.0, 0, 2),
        (0.5, 500_000, 2),
        (1.0, FULL_TOKENS, 2),
    ]
    assert [f["mean"] for f in curve["fractions"]] == pytest.approx([0.70, 0.725, 0.745])
    assert curve["fractions"][0]["paired"] is None and curve["fractions"][2]["paired"]["mean"] == pytest.approx(0.045)


def test_corrupted_sets_sizes_roles_and_pending_cells():
    cells = [tune("baseline", s, 0.70, size=size, typo=0.60) for s in (0, 1) for size in ("all", "100", "1000")]
    cells += [tune("token-0.15-bert", s, 0.72, typo=0.65 + 0.01 * s) for s in (0, 1)]
    cells += [
        tune("token-0.15-bert", 2, 0.0, status="pending"),
        {"name": "baseline-seed0", "role": "baseline", "point": "baseline"},
    ]
    summary = summarize(cells)
    assert summary["sizes"] == ["100", "1000", "all"] and summary["sets"] == ["clean", "typo-0.1"]
    typo = one(summary, point="token-0.15-bert", set="typo-0.1", metric="macro_f1")
    assert typo["paired"]["mean"] == pytest.approx(0.055) and typo["runs"] == [[0, 0], [0, 1]]
    assert sorted(["all", "20", "3", "100"], key=size_order) == ["3", "20", "100", "all"]
    with pytest.raises(ValueError, match="span_f1"):
        summarize_downstream(cells, metrics=("accuracy",), primary="span_f1")


def test_judge_and_words():
    assert judge(Paired.of([0.02, 0.03, 0.04])) == "better" and judge(Paired.of([-0.05, -0.04, -0.06])) == "worse"
    # differences 0.00, 0.01, -0.01: sd 0.01, half-width 0.0248 > 0.015: too wide; 0.001 apart: 0.0025, narrow
    assert judge(Paired.of([0.0, 0.01, -0.01])) == "too wide to tell"
    assert judge(Paired.of([0.0, 0.001, -0.001])) == "no measurable difference" and judge(Paired.of([0.02])) == "one seed"
    assert in_points(-0.0062) == "−0.6" and in_points(0.031) == "+3.1" and in_points(0.031, sign=False) == "3.1"
    assert in_points(-0.0001) == "0.0" and tokens(1_000_000) == "1.0M" and tokens(250_000) == "250k" and tokens(0) == "0"
    assert interval({"n": 3, "mean": 0.004, "low": -0.006, "high": 0.014}) == "+0.4 points [−0.6, 1.4]"
    assert interval({"n": 1, "mean": 0.02, "low": None, "high": None}, unit="") == "+2.0 (1 seed: no interval)"
    assert (
        describe_point({"strategy": "whole_word", "rate": 0.15, "rate_end": None, "corruption": "bert"})
        == "whole-word masking at 0.15"
    )
    assert describe_point({"strategy": "terms", "rate": 0.15, "corruption": "bert"}) == "term masking at 0.15"
    assert describe_point({"strategy": "span", "rate": 0.3, "rate_end": 0.15, "corruption": "mask-only"}) == (
        "span masking at 0.3 falling to 0.15 (mask-only)"
    )


# ---- the verdict on hand-built summaries ----------------------------------------------------


def paired(mean, low=None, high=None, n=3):
    if low is None:
        return {
            "n": n,
            "mean": mean,
            "sd": 0.0,
            "low": None,
            "high": None,
            "half_width": None,
            "narrow": None,
            "verdict": "one seed",
        }
    half = (high - low) / 2
    word = (
        ("better" if mean > 0 else "worse")
        if not low <= 0 <= high
        else ("no measurable difference" if half <= NARROW else "too wide to tell")
    )
    return {
        "n": n,
        "mean": mean,
        "sd": half * math.sqrt(n) / t_quantile_975(n - 1),  # the spread that gives this interval
        "low": low,
        "high": high,
        "half_width": half,
        "narrow": half <= NARROW,
        "verdict": word,
    }


def row(point, difference, *, size="300", tokens_=1_000_000, augment=0.0, set_="clean", against="baseline"):
    runs = [[0, s] for s in range(difference["n"])]
    return {"size": size, "set": set_, "metric": "macro_f1", "point": point, "fraction": 1.0, "augment": augment,
            "pretrain_tokens": tokens_, "runs": runs, "values": [0.7] * len(runs), "mean": 0.7, "sd": 0.0,
            "against": {"point": against, "fraction": 0.0, "augment": 0.0}, "paired": difference}  # fmt: skip


def hand_summary(*rows_, sizes=("300",), **lists):
    coordinates = {point: dict(zip(("strategy", "rate", "rate_end", "corruption"), value)) for point, value in POINTS.items()}
    return {"metrics": ["accuracy", "macro_f1"], "primary": "macro_f1", "narrow": NARROW, "sizes": list(sizes),
            "sets": ["clean"], "points": coordinates, "against_baseline": list(rows_), "augmentation": [], "masking": [],
            "curve": []} | lists  # fmt: skip


def test_a_clear_gain_names_the_best_cell_and_its_interval():
    summary = hand_summary(
        row("whole_word-0.15-bert", paired(0.031, 0.012, 0.050)), row("token-0.15-bert", paired(0.01, 0.002, 0.018))
    )
    assert verdict(summary) == [
        "At 300 labels, continued pre-training with whole-word masking at 0.15 for 1.0M tokens raised macro-F1 by "
        "3.1 points [1.2, 5.0] over the checkpoint fine-tuned directly (3 seeds; picked as the best of 2 after seeing them, "
        "2 better: at 95% each, one comparison in 20 can exclude 0 by chance)."
    ]
    (alone,) = verdict(hand_summary(row("whole_word-0.15-bert", paired(0.031, 0.012, 0.050))))
    assert alone.endswith("over the checkpoint fine-tuned directly (3 seeds).")


def test_a_measurable_gain_is_named_before_a_larger_mean_that_cannot_tell():
    wide, measurable = paired(0.047, -0.105, 0.198), paired(0.03, 0.02, 0.04)
    (sentence,) = verdict(hand_summary(row("whole_word-0.15-bert", wide), row("token-0.15-bert", measurable)))
    assert sentence.startswith("At 300 labels, continued pre-training with token masking at 0.15 for 1.0M tokens raised")
    assert "1 better, 1 too wide to tell" in sentence


def test_a_clear_loss_says_it_lowered():
    summary = hand_summary(row("span-0.3-bert", paired(-0.020, -0.031, -0.009), size="100", tokens_=500_000), sizes=("100",))
    assert verdict(summary) == [
        "At 100 labels, no continued pre-training helped: span masking at 0.3 for 500k tokens lowered macro-F1 "
        "by 2.0 points [0.9, 3.1] against the checkpoint fine-tuned directly (3 seeds)."
    ]


def test_a_narrow_null_is_no_measurable_difference():
    (sentence,) = verdict(hand_summary(row("token-0.15-bert", paired(0.004, -0.006, 0.014))))
    assert sentence == (
        "At 300 labels, continued pre-training with token masking at 0.15 for 1.0M tokens made no measurable difference "
        "to macro-F1 over the checkpoint fine-tuned directly: +0.4 points [−0.6, 1.4] (3 seeds)."
    )
    narrow = paired(0.001, -0.009, 0.011)
    (both,) = verdict(hand_summary(row("token-0.15-bert", paired(0.004, -0.006, 0.014)), row("whole_word-0.15-bert", narrow)))
    assert both.startswith("At 300 labels, none of the 2 continued pre-trainings made a measurable difference to macro-F1")
    assert "the largest, token masking at 0.15 for 1.0M tokens, +0.4 points [−0.6, 1.4] (3 seeds)." in both
    (mixed,) = verdict(
        hand_summary(row("token-0.15-bert", paired(0.004, -0.006, 0.014)), row("span-0.3-bert", paired(0.0, -0.05, 0.05)))
    )
    assert "no measurable difference" not in mixed.split(",")[1] and "1 of 2 intervals is too wide to tell" in mixed


def test_a_wide_null_does_not_claim_no_difference():
    (sentence,) = verdict(hand_summary(row("token-0.15-bert", paired(0.02, -0.04, 0.08))))
    assert sentence == (
        "At 300 labels, continued pre-training with token masking at 0.15 for 1.0M tokens cannot be told apart from "
        "the checkpoint fine-tuned directly on macro-F1: +2.0 points [−4.0, 8.0] (3 seeds), an interval too wide to tell "
        "(±6.0 points, more than ±1.5); at the spread seen, about 13 seeds (continue with --resume --finetune-seeds 13) "
        "would bring it within ±1.5 points."
    )
    assert "no measurable difference" not in sentence


def test_the_seeds_for_a_narrow_interval_follow_the_t_interval():
    # sd 0.02: 9 seeds give 2.306 x 0.02 / 3 = 0.0154 > 0.015; 10 give 2.262 x 0.02 / 3.162 = 0.0143
    assert seeds_for_narrow(0.02) == 10
    # the wide null above: half-width 0.06 from 3 seeds is sd 0.06 x 1.732 / 4.303 = 0.02415;
    # 12 seeds give 2.201 x 0.02415 / 3.464 = 0.0153, 13 give 2.179 x 0.02415 / 3.606 = 0.0146
    assert seeds_for_narrow(0.06 * math.sqrt(3) / 4.303) == 13
    assert seeds_for_narrow(0.0) == 2 and seeds_for_narrow(0.3) is None  # 0.3 needs about 1,540


def test_without_init_each_fine_tuning_seed_adds_a_pair_per_pre_training_seed():
    # 6 pairs over 2 pre-training seeds x 3 fine-tuning seeds, half-width 0.06: sd 0.06 x 2.449 / 2.571 = 0.0572,
    # which needs 59 pairs (58 give 2.002 x 0.0572 / 7.62 = 0.01503, 59 give 2.002 x 0.0572 / 7.68 = 0.01490):
    # 30 fine-tuning seeds, each giving 2 pairs
    wide = paired(0.02, -0.04, 0.08, n=6)
    two_sources = {**row("token-0.15-bert", wide), "runs": [[p, s] for p in (0, 1) for s in range(3)]}
    (sentence,) = verdict(hand_summary(two_sources))
    assert "6 runs over 2 pre-training seeds" in sentence and "--finetune-seeds 30)" in sentence
    assert seeds_for_narrow(wide["sd"]) == 59


def test_one_seed_has_no_interval_and_says_so():
    (sentence,) = verdict(hand_summary(row("token-0.15-bert", paired(0.02, n=1))))
    assert sentence == (
        "At 300 labels, the largest change from continued pre-training (token masking at 0.15 for 1.0M tokens) was +2.0 "
        "points of macro-F1 over the checkpoint fine-tuned directly on 1 seed: no interval, so it may be noise; more seeds "
        "would tell."
    )


def test_budgets_in_order_then_masking_augmentation_and_the_curve():
    gain, null = paired(0.031, 0.012, 0.050), paired(0.004, -0.006, 0.014)
    masking = [row("whole_word-0.15-bert", gain, size="100", against="token-0.15-bert"),
               row("whole_word-0.15-bert", null, size="all", against="token-0.15-bert")]  # fmt: skip
    augmentation = [
        row("token-0.15-bert", null, augment=0.1, size="100"),
        row("token-0.15-bert", gain, augment=0.1, size="100", set_="typo-0.1"),
    ]
    fractions = [{"fraction": 0.0, "pretrain_tokens": 0, "n": 3, "mean": 0.7, "sd": 0.01, "paired": None},
                 {"fraction": 0.25, "pretrain_tokens": 250_000, "n": 3, "mean": 0.71, "sd": 0.01, "paired": null},
                 {"fraction": 0.5, "pretrain_tokens": 500_000, "n": 3, "mean": 0.73, "sd": 0.01, "paired": gain},
                 {"fraction": 1.0, "pretrain_tokens": 1_000_000, "n": 3, "mean": 0.73, "sd": 0.01, "paired": gain}]  # fmt: skip
    curve = [{"size": "100", "point": "token-0.15-bert", "metric": "macro_f1", "augment": 0.0, "fractions": fractions},
             {"size": "all", "point": "token-0.15-bert", "metric": "macro_f1", "augment": 0.0, "fractions": fractions[:2]
              + [{**fractions[2], "paired": null}, {**fractions[3], "paired": null}]}]  # fmt: skip
    summary = hand_summary(row("token-0.15-bert", null, size="all"), row("token-0.15-bert", gain, size="100"), sizes=("100", "all"),
                           masking=masking, augmentation=augmentation, curve=curve)  # fmt: skip
    sentences = verdict(summary)
    assert sentences[0].startswith("At 100 labels, continued pre-training with token masking") and sentences[1].startswith(
        "With all labels,"
    )
    assert sentences[2] == (
        "Against token masking at the same rate (macro-F1, clean set, full pre-training, no augmentation), 2 comparisons: "
        "1 better, 1 no measurable difference; the largest measurable: whole-word masking at 0.15 with 100 labels, +3.1 points [1.2, 5.0]."
    )
    assert sentences[3] == (
        "[MASK] augmentation while fine-tuning, against none (macro-F1, clean set), 1 comparison: 1 no measurable difference. "
        "On the corrupted sets with 100 labels, 1 comparison: 1 better; the largest measurable: augmentation at 0.1 after "
        "token masking at 0.15 with 100 labels on typo-0.1, +3.1 points [1.2, 5.0]."
    )
    assert sentences[4] == (
        "Along the pre-training curve (macro-F1, clean set, no augmentation): with 100 labels a measurable gain first appears "
        "after 500k tokens (token masking at 0.15: +3.1 points [1.2, 5.0]; 2 of 3 checkpoints measurably better); with all "
        "labels no checkpoint on it is measurably better than the checkpoint fine-tuned directly."
    )
    assert len(sentences) == 5


def test_a_study_fine_tuned_only_with_augmentation_says_so_in_every_sentence():
    """No rate 0 in --augment-rates: the curve and the masking comparison are at the lowest rate, and say which."""
    cells = [tune("baseline", s, 0.70 + 0.01 * s, augment=0.1) for s in (0, 1, 2)]
    for point, fraction, gain in (
        ("token-0.15-bert", 0.5, 0.03),
        ("token-0.15-bert", 1.0, 0.04),
        ("whole_word-0.15-bert", 1.0, 0.04),
    ):
        cells += [tune(point, s, 0.70 + 0.01 * s + gain + 0.002 * s, augment=0.1, fraction=fraction) for s in (0, 1, 2)]
    summary = summarize(cells)
    assert {c["augment"] for c in summary["curve"]} == {0.1}
    sentences = verdict(summary)
    assert sentences[0].startswith("At 100 labels (fine-tuned with [MASK] augmentation at 0.1), continued pre-training")
    assert sentences[1].startswith(
        "Against token masking at the same rate (macro-F1, clean set, full pre-training, [MASK] augmentation at 0.1), 1 comparison: "
    )
    assert sentences[2].startswith(
        "Along the pre-training curve (macro-F1, clean set, [MASK] augmentation at 0.1): with 100 labels a measurable gain "
        "first appears after 500k tokens"
    )
    assert len(sentences) == 3 and not any("no augmentation" in s for s in sentences)


def test_replaced_token_detection_pairs_with_the_masked_lm_of_the_same_masking():
    def with_objective(cell, objective):
        return {**cell, "objective": objective}

    cells = [with_objective(tune("baseline", s, 0.70), None) for s in (0, 1, 2)]
    cells += [with_objective(tune("token-0.15-bert", s, v), "mlm") for s, v in enumerate((0.72, 0.73, 0.74))]
    cells += [with_objective(tune("whole_word-0.15-bert", s, v), "mlm") for s, v in enumerate((0.71, 0.71, 0.72))]
    rtd = {"rtd-token-0.15-bert": (0.75, 0.77, 0.78), "rtd-whole_word-0.15-bert": (0.76, 0.76, 0.80)}
    for point, values in rtd.items():
        strategy = point.split("-")[1]
        for s, v in enumerate(values):
            cell = tune("token-0.15-bert", s, v)
            cells.append(
                {**cell, "point": point, "strategy": strategy, "objective": "rtd", "name": cell["name"].replace("token", point)}
            )
    summary = summarize(cells)
    row = one(summary, "objective", point="rtd-token-0.15-bert", metric="macro_f1")
    assert row["against"]["point"] == "token-0.15-bert"
    assert row["paired"]["mean"] == pytest.approx(0.11 / 3)  # (0.03 + 0.04 + 0.04) / 3
    assert (
        one(summary, "objective", point="rtd-whole_word-0.15-bert", metric="macro_f1")["against"]["point"]
        == "whole_word-0.15-bert"
    )
    # masking comparisons stay within an objective: rtd whole-word against rtd token, mlm against mlm
    against = {r["point"]: r["against"]["point"] for r in rows(summary, "masking", metric="macro_f1")}
    assert against == {"whole_word-0.15-bert": "token-0.15-bert", "rtd-whole_word-0.15-bert": "rtd-token-0.15-bert"}
    assert not rows(summary, "objective", point="token-0.15-bert")  # a masked-LM point has no objective row
    words = describe_point(summary["points"]["rtd-token-0.15-bert"])
    assert words == "replaced-token detection on token masking at 0.15"
    sentence = next(s for s in verdict(summary) if s.startswith("Against the masked LM"))
    assert sentence.startswith(
        "Against the masked LM with the same masking (macro-F1, clean set, full pre-training, no augmentation), 2 comparisons:"
    )
