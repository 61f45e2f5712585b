"""A progress bar for encoding a corpus, on stderr: documents read, tokens produced, rate.

Disabled, it does nothing (a null object), so the encoding code has no ``if progress:``.
"""

from __future__ import annotations

from typing import Any


class EncodingProgress:
    """Context manager; call :meth:`update` with running totals.

    Args:
        enabled: show the bar (rich, transient: it disappears when done).
        total: documents expected, for a bar with an end; None shows counts and a spinner.
    """

    def __init__(self, *, enabled: bool, total: int | None = None) -> None:
        self.enabled = enabled
        self.total = total
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> EncodingProgress:
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                SpinnerColumn(),
                TextColumn("encoding"),
                BarColumn(),
                TextColumn("{task.completed:,} documents, {task.fields[tokens]:,} tokens"),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self._progress.start()
            self._task = self._progress.add_task("encoding", total=self.total, tokens=0)
        return self

    def update(self, *, documents: int, tokens: int) -> None:
        """Documents read and tokens produced so far."""
        if self._progress is not None:
            self._progress.update(self._task, completed=documents, tokens=tokens)

    def __exit__(self, *exc_info: object) -> None:
        if self._progress is not None:
            self._progress.stop()
