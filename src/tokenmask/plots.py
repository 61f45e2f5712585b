"""Figures as PNG files, drawn without a display: the one way tokenmask saves a plot.

:func:`pyplot` gives matplotlib's pyplot on the Agg backend (files only, so a run on a server
or in CI never looks for a screen); :func:`save_png` writes a figure through
:func:`tokenmask.files.atomic_file` (a kill leaves the old picture or the new one) and closes
it. matplotlib is imported on first use, not with this module.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tokenmask.files import atomic_file


def pyplot() -> Any:
    """``matplotlib.pyplot``, drawing into files only (the Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_png(figure: Any, path: str | Path, *, dpi: int = 100) -> Path:
    """Write ``figure`` to ``path`` as a PNG, atomically, then close it; returns the path."""
    try:
        with atomic_file(path, binary=True) as handle:
            figure.savefig(handle, format="png", dpi=dpi)
    finally:
        pyplot().close(figure)
    return Path(path)
