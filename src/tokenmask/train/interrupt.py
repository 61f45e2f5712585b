"""Stopping a run cleanly: SIGINT / SIGTERM end the current step, save a checkpoint, then stop.

Clusters send SIGTERM before they preempt a job, and Ctrl-C sends SIGINT; both are only noted
while the loop runs, and the loop stops after the step it is in (or, when the signal came after
the last step, after the final evaluation), with a checkpoint that ``--resume`` continues from.
A second signal interrupts at once (KeyboardInterrupt). A study notes them too, between its
cells, in a context around theirs: the two share what they noted.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(Exception):
    """The run stopped on a signal after saving ``checkpoint`` at ``step``; a study's stop has
    neither (its finished cells are kept; a cell stopped while training saved its own)."""

    def __init__(self, signal_number: int, step: int | None = None, checkpoint: str | None = None) -> None:
        self.signal_number, self.step, self.checkpoint = signal_number, step, checkpoint
        name = signal.Signals(signal_number).name
        where = (
            f" at step {step:,}: checkpoint saved in {checkpoint}"
            if checkpoint is not None
            else ": the study stopped (finished cells are kept, a cell stopped while training saved a checkpoint)"
        )
        super().__init__(f"{name}{where}; continue with --resume")

    @property
    def exit_code(self) -> int:
        """The shell's convention for a process ended by a signal: 128 + its number."""
        return 128 + self.signal_number


_open: list[StopSignals] = []  # the contexts open in the main thread, innermost last


class StopSignals:
    """A context in which SIGINT and SIGTERM set :attr:`received` instead of stopping the process.

    Outside the main thread (where Python cannot install handlers) it does nothing. The previous
    handlers come back on exit. Nested contexts share what they noted: an inner one starts with
    the outer one's signal (the run stops at its first check), and an inner one's signal is the
    outer one's once it exits; a second signal interrupts at once in either.
    """

    def __init__(self) -> None:
        self.received: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is not threading.main_thread():
            return self
        for number in SIGNALS:
            self._previous[number] = signal.signal(number, self._note)
        if _open and self.received is None:  # after the handlers: what the outer one noted until now is taken too
            self.received = _open[-1].received
        _open.append(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous.clear()
        if self in _open:
            _open.remove(self)
            if _open and _open[-1].received is None:
                _open[-1].received = self.received

    def _note(self, number: int, frame: FrameType | None) -> None:
        if self.received is not None:  # the second signal, here or before this context opened
            self.__exit__()
            raise KeyboardInterrupt
        self.received = number
