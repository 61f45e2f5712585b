"""StopSignals on its own: what a signal and a second one do, alone and nested (no training)."""

import signal

import pytest

from tokenmask.train.interrupt import Interrupted, StopSignals


def handlers():
    """The handlers in place (the ones a context must restore: they differ in a background job)."""
    return signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)


def test_a_signal_is_noted_and_a_second_one_interrupts_at_once():
    before = handlers()
    with StopSignals() as signals:
        signal.raise_signal(signal.SIGTERM)
        assert signals.received == signal.SIGTERM
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
        assert handlers() == before  # restored before the interrupt
    assert handlers() == before


def test_an_inner_context_starts_with_the_outer_ones_signal_and_hands_its_own_out():
    with StopSignals() as outer:
        signal.raise_signal(signal.SIGINT)
        with StopSignals() as inner:
            assert inner.received == signal.SIGINT  # a run opened after the signal stops at its first check
            with pytest.raises(KeyboardInterrupt):  # and the next signal is the second
                signal.raise_signal(signal.SIGTERM)
        assert signal.getsignal(signal.SIGTERM) == outer._note
    with StopSignals() as outer:
        with StopSignals() as inner:
            signal.raise_signal(signal.SIGTERM)
            assert outer.received is None
        assert outer.received == signal.SIGTERM  # noted in a run that ended: the study around it still stops
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGTERM)
    with StopSignals() as later:
        assert later.received is None  # nothing open any more: what the closed ones noted stays with them


def test_a_studys_stop_names_no_checkpoint_and_a_runs_names_its_step_and_checkpoint():
    stop = Interrupted(signal.SIGTERM)
    assert str(stop).startswith("SIGTERM: ") and str(stop).endswith("; continue with --resume")
    assert "study" in str(stop) and "checkpoint saved in" not in str(stop) and " at step " not in str(stop)
    assert stop.exit_code == 143 and stop.step is None and stop.checkpoint is None
    run = Interrupted(signal.SIGINT, 1200, "run/checkpoints/step-1200")
    assert str(run).startswith("SIGINT at step 1,200: ") and str(run).endswith("; continue with --resume")
    assert "run/checkpoints/step-1200" in str(run) and "study" not in str(run)
    assert run.exit_code == 130 and (run.step, run.checkpoint) == (1200, "run/checkpoints/step-1200")
