"""The unigram-plateau guard: its baseline from the masks, and when it warns (synthetic numbers)."""

import pytest
import torch

from tokenmask.recipes.plateau import PlateauGuard, UnigramBaseline, unigram_baseline, warmup_length


def test_the_baseline_is_the_commonest_target_and_its_share():
    batches = [{"labels": torch.tensor([[-100, 7, 7], [5, -100, -100]])}, {"labels": torch.tensor([[7, 5, -100]])}]
    assert unigram_baseline(batches) == UnigramBaseline(token_id=7, share=3 / 5)
    with pytest.raises(ValueError, match="no target"):
        unigram_baseline([{"labels": torch.full((2, 3), -100)}])


class Guard:
    """A :class:`PlateauGuard` whose warm-up is ``warmup`` steps at every evaluation."""

    def __init__(self, *, from_init, warmup=30):
        self.guard = PlateauGuard(UnigramBaseline(token_id=1010, share=0.078), token=",", from_init=from_init, lr=2e-3)
        self.warmup = warmup

    def observe(self, step, *, accuracy, loss):
        return self.guard.observe(step, accuracy=accuracy, loss=loss, warmup_steps=self.warmup)


def test_a_run_from_init_on_the_plateau_after_its_warmup_is_warned_once():
    watch = Guard(from_init=True)
    assert watch.observe(0, accuracy=0.30, loss=4.0) is None
    assert watch.observe(30, accuracy=0.078, loss=6.6) is None  # still in the warm-up
    message = watch.observe(250, accuracy=0.080, loss=6.6)  # 0.080 <= 0.078 + 0.005
    assert message == (
        "warning: fixed-mask accuracy 0.080 at step 250 is no better than always guessing ',' (0.078): the model sits on "
        "the unigram plateau. Likely cause: a learning rate too high for this model (lr 0.002). Try --lr 3e-4, or "
        "--head-warmup-steps 30 --layer-decay 0.8 (the --init recipe)"
    )
    assert watch.observe(500, accuracy=0.078, loss=6.6) is None  # once


def test_no_warning_clearly_above_the_share():
    watch = Guard(from_init=True)
    assert all(watch.observe(step, accuracy=0.084, loss=5.0) is None for step in (0, 250, 500, 750))  # 0.084 > 0.083


def test_a_run_from_scratch_is_warned_only_once_its_loss_stalls():
    watch = Guard(from_init=False)
    assert watch.observe(0, accuracy=0.0, loss=10.4) is None
    assert watch.observe(250, accuracy=0.075, loss=6.61) is None  # two evaluations are not yet a trend
    assert watch.observe(500, accuracy=0.075, loss=6.55) is None  # 10.4 -> 6.55: still falling fast
    assert watch.observe(750, accuracy=0.075, loss=6.57) is not None  # 6.61 -> 6.57: 0.04 < 1 % of 6.61


def test_a_from_scratch_loss_still_falling_is_left_alone():
    watch = Guard(from_init=False, warmup=0)
    assert all(watch.observe(s, accuracy=0.07, loss=8.0 - s / 100) is None for s in (100, 200, 300, 400))


def test_the_warmup_judged_is_the_one_of_each_evaluation():
    # a token or time limit fits the schedule late: 100 provisional warm-up steps, then 60
    watch = PlateauGuard(UnigramBaseline(token_id=1010, share=0.078), token=",", from_init=True, lr=2e-3)
    assert watch.observe(80, accuracy=0.078, loss=6.6, warmup_steps=100) is None
    assert watch.observe(90, accuracy=0.078, loss=6.6, warmup_steps=60) is not None


def test_the_warmup_judged_is_the_longer_of_head_and_schedule():
    assert warmup_length(30, 0.06, 1000) == 60
    assert warmup_length(30, 0.06, 300) == 30
    assert warmup_length(0, 0.06, None) == 100  # the schedule's provisional warm-up
