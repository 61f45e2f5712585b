"""The forecast's arithmetic: a probe run's records into a pace, a pace into each cell's seconds."""

from __future__ import annotations

import pytest

from tokenmask.experiments.downstream import DownstreamPlan
from tokenmask.experiments.pace import Pace, RunPace, cell_seconds, forecast_line, kept_pace, this_machine
from tokenmask.experiments.study import StudyConfig
from tokenmask.experiments.study_grid import StudyGrid
from tokenmask.recipes.config import PretrainConfig
from tokenmask.train.config import LoopConfig


def test_a_probe_runs_records_give_its_pace():
    # steps 1 and 6 at 4.0 s and 6.5 s: 2.5 s over 5 steps, 0.5 s a step and 100 tokens (500 over 5);
    # the first evaluation is step 1's time less one step, 3.5 s; the rest: 12.0 - 6.5 - 3.5 (the final evaluation) = 2.0 s
    records = [{"step": 0, "eval_loss": 9.0}, {"step": 1, "loss": 9.0, "tokens": 100, "seconds": 4.0}]
    records += [{"step": s, "loss": 8.0, "tokens": 100 * s, "seconds": 4.0 + 0.5 * (s - 1)} for s in range(2, 7)]
    assert RunPace.of(records, wall=12.0, settle=1) == RunPace(step=0.5, tokens=100.0, evaluation=3.5, rest=2.0)
    assert RunPace.of(records, wall=8.0, settle=1).rest == 0.0  # never below 0


def test_a_probes_first_steps_are_set_apart_and_their_extra_time_counts_as_rest():
    # steps 2 and 3 warm up (1.5 s and 1.0 s), then 0.5 s a step to step 8: timed after step 3,
    # 2.5 s over 5 steps; the first evaluation 4.0 - 0.5 = 3.5 s; the rest 16.0 - 8 x 0.5 - 2 x 3.5 = 5.0 s,
    # of which 1.0 + 0.5 is the warm-up's extra and 3.5 what follows the last step but the final evaluation
    seconds = {1: 4.0, 2: 5.5, 3: 6.5, 4: 7.0, 5: 7.5, 6: 8.0, 7: 8.5, 8: 9.0}
    records = [{"step": 0, "eval_loss": 9.0}] + [
        {"step": s, "loss": 8.0, "tokens": 100 * s, "seconds": t} for s, t in seconds.items()
    ]
    assert RunPace.of(records, wall=16.0, settle=3) == RunPace(step=0.5, tokens=100.0, evaluation=3.5, rest=5.0)
    timed_from_the_first = RunPace.of(records, wall=16.0, settle=1)  # the warm-up in the pace: 5.0 s over 7 steps
    assert timed_from_the_first.step == pytest.approx(5.0 / 7)
    assert RunPace.of(records[:4], wall=16.0, settle=3).step == pytest.approx(1.0)  # 3 steps: the last one timed


def config(**downstream) -> StudyConfig:
    base = PretrainConfig(loop=LoopConfig(output="o", max_tokens=100_000, eval_every=250))
    plan = DownstreamPlan(finetune=("builtin",), label_budgets=(100, 300), finetune_seeds=1, finetune_max_steps=150, **downstream)
    return StudyConfig(base=base, grid=StudyGrid(("token",), (0.15,)), downstream=plan)


PACE = Pace(pretrain=RunPace(step=0.5, tokens=1000.0, evaluation=4.0, rest=10.0), finetune=RunPace(0.4, 500.0, 8.0, 6.0))


def test_each_cell_takes_its_steps_evaluations_and_rest_at_the_measured_pace():
    study = config()
    baseline, *cells = study.cells()
    pretraining = next(c for c in cells if c.coordinates.get("role") is None)
    tuning = next(c for c in cells if c.coordinates.get("role") == "finetune")
    assert cell_seconds(baseline, study, PACE) == 0.0
    # 100,000 tokens at 1,000 a step: 100 steps of 0.5 s, evaluations at 0 and the end (none at 250), 10 s besides
    assert cell_seconds(pretraining, study, PACE) == pytest.approx(100 * 0.5 + 2 * 4.0 + 10.0)
    # 150 steps of 0.4 s; an evaluation at the end and one per corrupted set (3 by default); 6 s besides
    assert cell_seconds(tuning, study, PACE) == pytest.approx(150 * 0.4 + (1 + 3) * 8.0 + 6.0)
    plain = config(robustness=False)
    assert cell_seconds(tuning, plain, PACE) == pytest.approx(150 * 0.4 + 1 * 8.0 + 6.0)
    # a time limit shorter than the steps: 0.5 min of training instead of 60 s, the evaluations and rest as before
    timed = config(robustness=False, finetune_max_time=0.5)
    assert cell_seconds(tuning, timed, PACE) == pytest.approx(30.0 + 1 * 8.0 + 6.0)
    assert cell_seconds(tuning, config(robustness=False, finetune_max_time=5), PACE) == pytest.approx(150 * 0.4 + 14.0)


def test_a_time_limited_fine_tuning_stops_at_the_first_limit_and_says_so():
    plan = DownstreamPlan(finetune=("builtin",), finetune_max_steps=5000, finetune_max_time=3)
    loop = plan.finetune_config(PretrainConfig(loop=LoopConfig(output="o", max_steps=10))).loop
    assert (loop.max_steps, loop.max_time, loop.save_every) == (5000, 3, 50)  # steps unknown ahead: a checkpoint every 50
    steps_only = DownstreamPlan(finetune=("builtin",), finetune_max_steps=300)  # no time limit: a third of the steps
    assert steps_only.finetune_config(PretrainConfig(loop=LoopConfig(output="o"))).loop.save_every == 100
    assert plan.describe().endswith("at most 5,000 steps or 3 min each")
    assert DownstreamPlan(finetune=("builtin",)).describe().endswith(", 150 steps each")
    with pytest.raises(ValueError, match="finetune_max_time"):
        DownstreamPlan(finetune=("builtin",), finetune_max_time=0)


def test_the_forecast_sums_the_cells_and_says_what_it_measured():
    study = config()
    line = forecast_line(study.cells(), study, PACE, cores=2)
    # the baseline (0 s), 1 pre-training cell of 68 s and 2 x 2 fine-tunings (of both models at 2 budgets) of 98 s: 460 s
    assert line == (
        "about 8 min for 6 cells (measured here: pre-training 2,000 tokens/s, fine-tuning 0.40 s a step and 8 s an "
        "evaluation of the held-out set)"
    )


def test_a_probe_times_whole_steps_without_evaluations_checkpoints_or_a_head_only_warm_up():
    from tokenmask.experiments.pace import PROBE_SETTLE, PROBE_STEPS, _probe

    assert 1 <= PROBE_SETTLE < PROBE_STEPS - 10  # enough steps timed after the warm-up

    loop = _probe(LoopConfig(output="o", max_tokens=10**6, max_time=5.0, head_warmup_steps=30, snapshots=(0.5,)))
    assert (loop.max_steps, loop.max_tokens, loop.max_time, loop.head_warmup_steps) == (PROBE_STEPS, None, None, 0)
    assert loop.eval_at_start and loop.eval_every > PROBE_STEPS and loop.save_every > PROBE_STEPS and loop.snapshots == ()


def test_a_kept_pace_serves_a_resume_only_if_it_times_every_kind_of_run_left():
    study = config()
    baseline, *cells = study.cells()
    tunings = [c for c in cells if c.coordinates.get("role") == "finetune"]
    pretraining = [c for c in cells if c.coordinates.get("role") is None]
    measured = Pace(PACE.pretrain, PACE.finetune, rate=0.15)
    assert measured.covers(cells) and measured.covers(tunings) and measured.covers([baseline])
    assert not Pace(None, PACE.finetune).covers(pretraining)  # measured when only fine-tunings were left
    assert not Pace(PACE.pretrain, None, rate=0.15).covers(tunings)
    higher = StudyConfig(base=study.base, grid=StudyGrid(("token",), (0.15, 0.3)), downstream=study.downstream).cells()
    assert not measured.covers(higher) and Pace(PACE.pretrain, PACE.finetune, rate=0.3).covers(higher)
    assert Pace.from_dict(measured.to_dict()) == measured


def test_a_resume_forecasts_with_the_kept_pace_only_on_the_machine_that_measured_it():
    study = config()
    cells = study.cells()
    here, measured = this_machine(), Pace(PACE.pretrain, PACE.finetune, rate=0.15)
    saved = {"plan": "p1", "machine": here, "measured": "2026-12-04 09:17", **measured.to_dict()}
    pace, when = kept_pace(saved, plan="p1", machine=here, pending=cells) or (None, None)
    assert (pace, when) == (measured, "2026-12-04 09:17")
    assert kept_pace(saved, plan="p2", machine=here, pending=cells) is None  # another plan
    assert kept_pace(saved, plan="p1", machine="Intel Xeon, 16 cores + NVIDIA H200", pending=cells) is None  # moved
    assert kept_pace({k: v for k, v in saved.items() if k != "machine"}, plan="p1", machine=here, pending=cells) is None
    only_tuning = {**saved, "pretrain": None}  # measured when only fine-tunings were left
    assert kept_pace(only_tuning, plan="p1", machine=here, pending=cells) is None
    assert here.endswith(" cores") or " cores + " in here

    line = forecast_line(cells, study, PACE, cores=2, measured=when)
    assert line.startswith("about 8 min for 6 cells (measured here on 2026-12-04 09:17: pre-training 2,000 tokens/s")
