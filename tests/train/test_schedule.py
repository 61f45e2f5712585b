"""The learning-rate schedule's shapes: warm-up, stable, and a linear, cosine or 1 - √ decay; a decay alone."""

import math

import pytest

from tokenmask.train.config import LoopConfig
from tokenmask.train.schedule import Schedule


def multipliers(**settings):
    schedule = Schedule(LoopConfig(output="o", max_steps=100, **settings))
    return [schedule(step) for step in range(101)]


def test_warmup_stable_decay_holds_the_peak_until_the_last_share():
    # warm-up 10 steps (0.1 x 100), decay over the last 20 (0.2 x 100): steps 10-80 at the peak
    rates = multipliers(warmup=0.1, decay=0.2)
    assert rates[0] == pytest.approx(0.1) and rates[9] == 1.0
    assert set(rates[10:81]) == {1.0}
    assert rates[90] == pytest.approx(0.5) and rates[100] == 0.0


def test_decay_1_is_the_old_linear_schedule():
    # no stable phase: from the end of warm-up (step 6) linearly to 0 at step 100
    rates = multipliers(warmup=0.06)
    assert rates[6] == 1.0 and rates[53] == pytest.approx(1 - 47 / 94)


def test_square_root_decay_falls_fast_then_slowly():
    rates = multipliers(warmup=0.0, decay=0.4, schedule="sqrt")
    # decay from step 60: a quarter of the way (step 70) at 1 - √0.25 = 0.5
    assert rates[60] == 1.0 and rates[70] == pytest.approx(0.5) and rates[100] == 0.0
    cosine = multipliers(warmup=0.0, decay=0.4, schedule="cosine")
    assert cosine[70] == pytest.approx(0.5 * (1 + math.cos(math.pi / 4)))


def test_a_run_from_a_stable_checkpoint_is_the_decay_alone():
    rates = multipliers(warmup=0.06, decay=0.1, decay_from="stable/checkpoints/step-100")
    assert rates[0] == 1.0 and rates[50] == pytest.approx(0.5) and rates[100] == 0.0


def test_a_decay_share_out_of_range_is_refused():
    with pytest.raises(ValueError, match="decay"):
        LoopConfig(output="o", decay=0.0)
