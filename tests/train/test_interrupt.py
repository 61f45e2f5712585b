"""StopSignals on its own: what a signal, a second one and a request do, alone and nested (no training)."""

import signal

import pytest

from tokenmask.train.interrupt import Interrupted, StopSignals, request_stop


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
        assert outer.received == signal.SIGTERM  # noted in a run that ended: the sweep around it still stops
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGTERM)


def test_a_request_stops_like_a_signal_but_does_not_count_as_one():
    with StopSignals() as signals:
        request_stop(signal.SIGTERM)
        assert signals.received == signal.SIGTERM
        signal.raise_signal(signal.SIGINT)  # the first signal: noted, not an interrupt
        assert signals.received == signal.SIGTERM
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)


def test_a_request_with_no_context_open_does_nothing_later():
    request_stop(signal.SIGINT)  # a cell's request after its work ended must not stop an unrelated run
    with StopSignals() as later:
        assert later.received is None


def test_a_sweeps_stop_names_no_checkpoint():
    stop = Interrupted(signal.SIGTERM)
    assert str(stop) == (
        "SIGTERM: the sweep stopped (finished cells are kept, a cell stopped while training saved a checkpoint); "
        "continue with --resume"
    )
    assert stop.exit_code == 143 and stop.step is None
    assert str(Interrupted(signal.SIGINT, 1200, "run/checkpoints/step-1200")) == (
        "SIGINT at step 1,200: checkpoint saved in run/checkpoints/step-1200; continue with --resume"
    )
