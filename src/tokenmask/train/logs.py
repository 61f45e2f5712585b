"""Where a run's numbers go: JSON Lines always, the trackers asked for (:mod:`.trackers`), a PNG plot at the end.

One :class:`RunLog` per run; the loop calls :meth:`RunLog.write` with flat records
(``{"step": 10, "loss": 6.2, ...}``) and never asks which sinks exist.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tokenmask.files import write_text
from tokenmask.plots import pyplot, save_png

METRICS_FILE = "metrics.jsonl"
PLOT_FILE = "metrics.png"


class RunLog:
    """Appends records to ``folder/metrics.jsonl`` and mirrors their numbers to the trackers.

    Args:
        folder: the run's output folder.
        append: continue an existing file (resuming) instead of starting a new one.
        mirror: ``mirror(values, step)`` gets each record's numbers other than ``step``
            (Accelerate's ``accelerator.log``, for TensorBoard, W&B, …), or None.
    """

    def __init__(
        self, folder: Path, *, append: bool = False, mirror: Callable[[dict[str, float], int], None] | None = None
    ) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._file = (self.folder / METRICS_FILE).open("a" if append else "w", encoding="utf-8")
        self._mirror = mirror

    def write(self, record: dict[str, Any]) -> None:
        """Log one record; its numeric fields other than ``step`` go to the trackers under their name."""
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()
        if self._mirror is not None and "step" in record:
            numbers = {k: v for k, v in record.items() if k != "step" and isinstance(v, int | float)}
            self._mirror(numbers, record["step"])

    def close(self) -> None:
        self._file.close()


class NoLog:
    """The run log of processes other than the main one: it writes nothing."""

    def write(self, record: dict[str, Any]) -> None:
        pass

    def close(self) -> None:
        pass


def read_metrics(folder: Path) -> list[dict[str, Any]]:
    """The records of ``folder/metrics.jsonl`` (empty if there is none)."""
    path = Path(folder) / METRICS_FILE
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def truncate_metrics(folder: Path, step: int) -> int:
    """Keep only the records of ``folder/metrics.jsonl`` up to ``step``: resuming from a checkpoint.

    A killed run logged the steps after its last checkpoint (and maybe half a line); the
    resumed run trains and logs them again, so they would appear twice. The file is replaced
    atomically. Returns how many records (or broken lines) were dropped.
    """
    path = Path(folder) / METRICS_FILE
    if not path.exists():
        return 0
    kept, dropped = [], 0
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:  # the half-written last line of a killed run
            dropped += 1
            continue
        if isinstance(record, dict) and record.get("step", 0) <= step:
            kept.append(line)
        else:
            dropped += 1
    if dropped:
        write_text(path, "".join(line + "\n" for line in kept))
    return dropped


def plot_metrics(records: Sequence[dict[str, Any]], path: Path) -> Path | None:
    """Save training loss, evaluation loss and masked-token accuracy against step as a PNG, atomically.

    Returns the path, or None when there is nothing to plot or matplotlib is missing.
    """
    training = [(r["step"], r["loss"]) for r in records if r.get("loss") is not None]  # None: a skipped step
    evaluation = [(r["step"], r["eval_loss"], r.get("eval_accuracy", math.nan)) for r in records if "eval_loss" in r]
    if not training and not evaluation:
        return None
    try:
        plt = pyplot()
    except ImportError:
        return None
    figure, (loss_axes, accuracy_axes) = plt.subplots(1, 2, figsize=(10, 4))
    if training:
        loss_axes.plot(*zip(*training), label="training (per step)", linewidth=0.8, alpha=0.7)
    if evaluation:
        steps, losses, accuracies = zip(*evaluation)
        loss_axes.plot(steps, losses, "o-", label="validation (fixed masks)")
        accuracy_axes.plot(steps, accuracies, "o-", color="tab:green")
    loss_axes.set(xlabel="optimizer step", ylabel="cross-entropy per target", title="loss")
    loss_axes.legend()
    accuracy_axes.set(xlabel="optimizer step", ylabel="accuracy", title="validation accuracy (masked tokens, or labels)")
    for axes in (loss_axes, accuracy_axes):
        axes.grid(alpha=0.3)
    figure.tight_layout()
    return save_png(figure, path)
