"""Trackers: the run's logged numbers mirrored to TensorBoard, W&B, MLflow, Trackio… by Accelerate.

``metrics.jsonl`` (:class:`~tokenmask.train.logs.RunLog`) is the record the project reads back;
trackers are for people watching. Which ones is ``LoopConfig.report_to``; Accelerate runs them.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only
    from accelerate import Accelerator

PACKAGES: dict[str, tuple[str, ...]] = {
    "tensorboard": ("tensorboard", "tensorboardX"),
    "wandb": ("wandb",),
    "mlflow": ("mlflow",),
    "trackio": ("trackio",),
    "comet_ml": ("comet_ml",),
    "aim": ("aim",),
    "clearml": ("clearml",),
    "dvclive": ("dvclive",),
}
"""The importable packages behind each tracker (any one will do)."""

PROJECT = "tokenmask"
"""The project (run) name the trackers get; TensorBoard writes to ``OUTPUT/tensorboard/tokenmask``."""


def installed_trackers(names: Sequence[str]) -> list[str]:
    """``names`` whose packages are installed. TensorBoard, the default, is left out quietly
    when missing; any other tracker asked for must be there.

    ``installed_trackers(["tensorboard"])  ->  ["tensorboard"]`` (with the package), ``[]`` without.

    Raises:
        ValueError: a tracker other than TensorBoard is not installed.
    """
    present = [name for name in names if any(importlib.util.find_spec(m) is not None for m in PACKAGES[name])]
    missing = [name for name in names if name not in present and name != "tensorboard"]
    if missing:
        raise ValueError(f"report_to names {', '.join(missing)}, not installed: pip install {' '.join(missing)}, or leave it out")
    return present


def start_trackers(accelerator: Accelerator, names: Sequence[str], settings: Mapping[str, Any]) -> None:
    """Start Accelerate's trackers ``names`` for project :data:`PROJECT`, with the run's settings as their config.

    Raises:
        ValueError: a tracker failed to start (its own message, e.g. MLflow refusing a
            ``file:`` tracking URI, named with the trackers asked for).
    """
    try:
        accelerator.init_trackers(PROJECT, config=tracker_config(settings))
    except Exception as error:  # each tracker raises its own kinds: say which were asked for, and why
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ValueError(f"--report-to {','.join(names)}: a tracker failed to start: {reason}") from error


def tracker_config(settings: Mapping[str, Any]) -> dict[str, int | float | str | bool]:
    """The run's settings as trackers store them: numbers, strings and booleans (None and lists as text)."""
    return {key: value if isinstance(value, int | float | str | bool) else str(value) for key, value in settings.items()}
