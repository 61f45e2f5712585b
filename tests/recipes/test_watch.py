"""The divergence watch on constructed loss sequences, and the augmentation-rate halving."""

import pytest

from tokenmask.recipes.watch import DivergenceWatch, halved_rate, training_loss_between


def run(watch, pairs):
    return [watch.observe(train, valid) for train, valid in pairs]


def test_fires_after_patience_diverging_evaluations_in_a_row():
    watch = DivergenceWatch(patience=3)
    # train keeps falling; validation falls, then rises three times in a row
    pairs = [(None, 1.0), (2.0, 0.9), (1.5, 0.8), (1.2, 0.85), (1.0, 0.9), (0.8, 0.95), (0.7, 1.0)]
    verdicts = run(watch, pairs)
    assert [v.diverging for v in verdicts] == [False, False, False, True, True, True, True]
    assert [v.fired for v in verdicts] == [False, False, False, False, False, True, False]
    assert [v.streak for v in verdicts] == [0, 0, 0, 1, 2, 0, 1]  # counts again after firing


def test_fires_again_after_another_patience():
    watch = DivergenceWatch(patience=2)
    pairs = [(None, 1.0)] + [(2.0 - 0.1 * i, 1.0 + 0.1 * i) for i in range(1, 7)]
    fired = [v.fired for v in run(watch, pairs)]
    # eval 1 has no earlier training loss to compare with; evals 2..6 diverge
    assert fired == [False, False, False, True, False, True, False]


def test_a_break_in_the_pattern_resets_the_streak():
    watch = DivergenceWatch(patience=3)
    pairs = [(3.0, 1.0), (2.0, 1.1), (1.0, 1.2), (1.1, 1.3), (0.9, 1.4), (0.8, 1.5)]
    verdicts = run(watch, pairs)
    # evaluation 3: training loss rose -> not diverging; the streak starts over
    assert [v.streak for v in verdicts] == [0, 1, 2, 0, 1, 2]
    assert not any(v.fired for v in verdicts)


def test_both_losses_falling_or_equal_never_fire():
    watch = DivergenceWatch(patience=1)
    assert not any(v.fired for v in run(watch, [(2.0, 1.0), (1.0, 0.5), (0.5, 0.5), (0.5, 0.6)]))


def test_patience_must_be_positive():
    with pytest.raises(ValueError, match="patience must be >= 1"):
        DivergenceWatch(0)


def test_halved_rate_turns_off_below_one_percent():
    rates = [0.1]
    while rates[-1] > 0:
        rates.append(halved_rate(rates[-1]))
    assert rates == [0.1, 0.05, 0.025, 0.0125, 0.0]
    assert halved_rate(0.02) == 0.01 and halved_rate(0.0) == 0.0


def test_training_loss_is_weighted_by_targets_and_takes_the_last_of_a_repeated_step():
    records = [
        {"step": 0, "eval_loss": 9.0},
        {"step": 1, "loss": 2.0, "targets": 3},
        {"step": 2, "loss": 5.0, "targets": 1},  # logged before an interruption...
        {"step": 2, "loss": 1.0, "targets": 1},  # ...and again by the resumed run: this one counts
        {"step": 3, "loss": 4.0, "targets": 2},
    ]
    assert training_loss_between(records, 0, 2) == (2.0 * 3 + 1.0) / 4
    assert training_loss_between(records, 2, 3) == 4.0
    assert training_loss_between(records, 3, 5) is None
