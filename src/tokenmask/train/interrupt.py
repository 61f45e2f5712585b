"""Stopping a run cleanly: SIGINT / SIGTERM end the current step, save a checkpoint, then stop.

Clusters send SIGTERM before they preempt a job, and Ctrl-C sends SIGINT; both are only noted
while the loop runs, and the loop stops after the step it is in (or, when the signal came after
the last step, after the final evaluation), with a checkpoint that ``--resume`` continues from.
A second signal interrupts at once (KeyboardInterrupt). A sweep notes them too, between and
around its cells' loops, and :func:`request_stop` is how it asks a cell in another process to
stop without sending a signal that could count as that second one.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(Exception):
    """The run stopped on a signal after saving ``checkpoint`` at ``step``; a sweep's stop has
    neither (its finished cells are kept; a cell stopped while training saved its own)."""

    def __init__(self, signal_number: int, step: int | None = None, checkpoint: str | None = None) -> None:
        self.signal_number, self.step, self.checkpoint = signal_number, step, checkpoint
        name = signal.Signals(signal_number).name
        where = (
            f" at step {step:,}: checkpoint saved in {checkpoint}"
            if checkpoint is not None
            else ": the sweep stopped (finished cells are kept, a cell stopped while training saved a checkpoint)"
        )
        super().__init__(f"{name}{where}; continue with --resume")

    @property
    def exit_code(self) -> int:
        """The shell's convention for a process ended by a signal: 128 + its number."""
        return 128 + self.signal_number


_lock = threading.RLock()  # guards _open: the main thread opens and closes, request_stop comes from others
_open: list[StopSignals] = []  # the contexts open in the main thread, innermost last


def request_stop(signal_number: int = signal.SIGTERM) -> None:
    """Stop as if ``signal_number`` had come, without sending it: the innermost open
    :class:`StopSignals` notes it (nothing happens when none is open), and a signal that comes
    after still counts as the first. Safe from any thread: a sweep's cell calls it from the
    thread that waits for the sweep to ask its cells to stop."""
    with _lock:
        if _open and _open[-1].received is None:
            _open[-1].received = signal_number


class StopSignals:
    """A context in which SIGINT and SIGTERM set :attr:`received` instead of stopping the process.

    Outside the main thread (where Python cannot install handlers) it does nothing, and
    :func:`request_stop` does not reach it. The previous handlers come back on exit. Nested
    contexts share what they noted: an inner one starts with the outer one's signal (the run
    stops at its first check), and an inner one's signal is the outer one's once it exits; a
    second signal interrupts at once in either.
    """

    def __init__(self) -> None:
        self.received: int | None = None
        self._signalled = False  # a signal came (request_stop is not one): the next one interrupts
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is not threading.main_thread():
            return self
        for number in SIGNALS:
            self._previous[number] = signal.signal(number, self._note)
        with _lock:  # after the handlers: what the outer context noted until now is taken too
            if _open:
                outer = _open[-1]
                self.received = self.received if self.received is not None else outer.received
                self._signalled = self._signalled or outer._signalled
            _open.append(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous.clear()
        with _lock:
            if self in _open:
                _open.remove(self)
                if _open and self.received is not None:
                    outer = _open[-1]
                    outer.received = outer.received if outer.received is not None else self.received
                    outer._signalled = outer._signalled or self._signalled

    def _note(self, number: int, frame: FrameType | None) -> None:
        if self._signalled:
            self.__exit__()
            raise KeyboardInterrupt
        self._signalled = True
        if self.received is None:
            self.received = number
