"""Stopping a run cleanly: SIGINT / SIGTERM end the current step, save a checkpoint, then stop.

Clusters send SIGTERM before they preempt a job, and Ctrl-C sends SIGINT; both are only noted
while the loop runs, and the loop stops after the step it is in (or, when the signal came after
the last step, after the final evaluation), with a checkpoint that ``--resume`` continues from.
A second signal interrupts at once (KeyboardInterrupt).
"""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(Exception):
    """The run stopped on a signal after saving ``checkpoint`` at ``step``."""

    def __init__(self, signal_number: int, step: int, checkpoint: str) -> None:
        self.signal_number, self.step, self.checkpoint = signal_number, step, checkpoint
        name = signal.Signals(signal_number).name
        super().__init__(f"{name} at step {step:,}: checkpoint saved in {checkpoint}; continue with --resume")

    @property
    def exit_code(self) -> int:
        """The shell's convention for a process ended by a signal: 128 + its number."""
        return 128 + self.signal_number


class StopSignals:
    """A context in which SIGINT and SIGTERM set :attr:`received` instead of stopping the process.

    Outside the main thread (where Python cannot install handlers) it does nothing. The
    previous handlers come back on exit.
    """

    def __init__(self) -> None:
        self.received: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for number in SIGNALS:
                self._previous[number] = signal.signal(number, self._note)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous.clear()

    def _note(self, number: int, frame: FrameType | None) -> None:
        if self.received is not None:
            self.__exit__()
            raise KeyboardInterrupt
        self.received = number
