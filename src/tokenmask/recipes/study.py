"""Which masking pays? A pre-training ablation grid, every cell its own resumable run in one folder.

Each cell of the :class:`~tokenmask.recipes.study_grid.StudyGrid` is one
:func:`~tokenmask.recipes.pretrain.pretrain` run in ``OUTPUT/cells/<name>/pretrain``, with the
study's base settings, budget and seeds; only the masking differs. Every cell is scored on the
same fixed masks (``eval_masking="common"``: token-level 80/10/10 at the evaluation rate), its
own-masking score beside. With a fine-tuning config, each cell's model, and per seed a baseline
(the same model untrained), is also fine-tuned (``OUTPUT/cells/<name>/finetune``).

A finished cell leaves ``result.json`` (written atomically); ``OUTPUT/study.json`` holds the
plan and every result so far, rewritten after each cell. A resumed study reads finished cells
back, continues an interrupted one from its checkpoint, and starts the others. Cells may run in
parallel processes (``jobs``). The report is :mod:`tokenmask.recipes.study_report`.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenmask.recipes.config import FinetuneConfig, PretrainConfig, pretrain_config
from tokenmask.recipes.study_grid import DEFAULT_CELL_TOKENS, GRID_KEYS, Cell, StudyGrid
from tokenmask.settings import flatten
from tokenmask.train.loop import QuietReporter, Reporter

STUDY_FILE = "study.json"
CELLS = "cells"
RESULT_FILE = "result.json"
_RUN_KEYS = ("output", "resume", "overwrite")
"""Settings that say where and how a study runs, not what it trains: not compared on resume."""


@dataclass(frozen=True)
class StudyConfig:
    """A study: the base pre-training settings every cell shares, the grid, optional fine-tuning.

    Attributes:
        base: every cell's settings but the masking (``base.loop.output`` is the study's
            folder, ``base.loop.seed`` its first seed, ``base.loop.resume`` continues it).
        grid: what the cells cross.
        finetune: fine-tune each cell's model (and a baseline per seed) with these settings
            (``model``, ``output`` and ``seed`` are set per cell); None = no fine-tuning.
        jobs: cells trained at once, each in its own process (1 = in this process).

    Raises:
        ValueError: a base config that sets what the grid sets per cell (``strategy``…), no
            output folder, or fewer than one job.
    """

    base: PretrainConfig
    grid: StudyGrid
    finetune: FinetuneConfig | None = None
    jobs: int = 1

    def __post_init__(self) -> None:
        if not self.base.loop.output:
            raise ValueError("--output is required: the folder the study writes to")
        if self.jobs < 1:
            raise ValueError(f"jobs must be >= 1; got {self.jobs}")
        given, default = flatten(self.base), flatten(PretrainConfig())
        for key in GRID_KEYS:
            if given[key] != default[key]:
                raise ValueError(
                    f"{key} is set per cell by the grid: leave it at its default ({default[key]}) in the base config"
                )

    @property
    def output(self) -> Path:
        return Path(self.base.loop.output)

    def cells(self) -> list[Cell]:
        """The grid's cells, then (with fine-tuning) one baseline per seed."""
        cells = self.grid.cells(self.base.loop.seed)
        if self.finetune is not None:
            cells += [Cell.baseline(seed) for seed in range(self.base.loop.seed, self.base.loop.seed + self.grid.seeds)]
        return cells

    def plan(self) -> dict[str, Any]:
        """What the study trains, JSON-ready: the part of ``study.json`` a resumed study must match."""
        settings = {k: v for k, v in flatten(self.base).items() if k not in (*GRID_KEYS, *_RUN_KEYS)}
        finetune = None
        if self.finetune is not None:
            finetune = {k: v for k, v in flatten(self.finetune).items() if k not in (*_RUN_KEYS, "model", "seed")}
        return {"grid": self.grid.to_dict(), "settings": settings, "finetune": finetune}


def study_config(
    settings: Mapping[str, Any], grid: StudyGrid, *, finetune: FinetuneConfig | None = None, jobs: int = 1
) -> StudyConfig:
    """A study from flat pre-training settings (as on the command line): with no limit given,
    each cell stops at :data:`~tokenmask.recipes.study_grid.DEFAULT_CELL_TOKENS` tokens.

    ``study_config({"output": "runs/study", "max_steps": 300}, DEFAULT_GRID)``

    Raises:
        ValueError: a setting the grid sets per cell, an unknown setting, or a value out of range.
    """
    for key in GRID_KEYS:
        if key in settings:
            raise ValueError(f"{key} is set per cell by the grid (--strategies, --rates, --rate-ends, --corruption)")
    if not {"max_steps", "max_tokens", "max_time"} & settings.keys():
        settings = {**settings, "max_tokens": DEFAULT_CELL_TOKENS}
    return StudyConfig(base=pretrain_config(settings), grid=grid, finetune=finetune, jobs=jobs)


def run_study(config: StudyConfig, reporter: Reporter = QuietReporter(), *, command: str | None = None) -> dict[str, Any]:
    """Train every cell not finished yet, then write ``OUTPUT/study.json``; returns its content.

    ``study.json``: ``plan`` (grid, settings, fine-tuning), ``cells`` (one result per cell in
    grid order, baselines last: :func:`~tokenmask.recipes.study_cells.run_cell`), ``complete``.
    With ``config.base.loop.resume``, finished cells are read back as they are and the others
    continue (from their newest checkpoint, if any). ``command`` goes into the model cards.

    Raises:
        ValueError: an OUTPUT that holds another study (or a run), or ``resume`` on a study of
            another plan; all before anything is written. The errors of the cells (bad input
            refused by the first cell of a new study leaves no ``study.json`` behind).
        Interrupted: SIGINT or SIGTERM (the running cells saved a checkpoint first).
    """
    from tokenmask.recipes.study_cells import read_result, run_cells

    output, cells, resume = config.output, config.cells(), config.base.loop.resume
    check_study_folder(output, config.plan(), resume=resume)
    results: dict[str, dict[str, Any]] = {}
    for cell in cells:
        done = read_result(output / CELLS / cell.name) if resume else None
        if done is not None:
            results[cell.name] = done
    reporter.message(describe(config, finished=len(results)))
    fresh = not (output / STUDY_FILE).exists()
    _write_study(output, config, cells, results)

    def finished(result: dict[str, Any]) -> None:
        results[result["name"]] = result
        _write_study(output, config, cells, results)

    pending = [cell for cell in cells if cell.name not in results]
    try:
        run_cells(config, pending, reporter, command=command, on_result=finished)
    except (ValueError, OSError):
        if fresh and not results:  # bad input (a corpus path, a tokenizer): the corrected command needs no --resume
            (output / STUDY_FILE).unlink(missing_ok=True)
        raise
    return _write_study(output, config, cells, results)


def describe(config: StudyConfig, *, finished: int = 0) -> str:
    """The study's first line: the grid, the budget of each cell, the common evaluation."""
    base = config.base
    tuned = (
        f"; each model then fine-tuned ({config.finetune.loop.describe_limits()}), beside an untrained baseline"
        if config.finetune
        else ""
    )
    kept = f"; {finished} finished before, kept" if finished else ""
    return (
        f"study: {config.grid.describe()}, each {base.preset if not base.init else base.init}, "
        f"{base.loop.describe_limits()}; scored on the same token-level 80/10/10 masks at "
        f"{base.eval_mlm_probability:g}{tuned}{kept}"
    )


def check_study_folder(output: Path, plan: Mapping[str, Any], *, resume: bool) -> None:
    """Refuse a folder the study must not write to; nothing is changed.

    Raises:
        ValueError: ``output`` holds a single run (``config.yaml``); holds a study and
            ``resume`` is not set; or holds a study of another plan (the message names what
            differs, e.g. ``grid (rates), settings (lr)``).
    """
    if (output / "config.yaml").exists():
        raise ValueError(f"{output} holds a single run (config.yaml), not a study: choose another --output")
    path = output / STUDY_FILE
    if not path.exists():
        return
    if not resume:
        raise ValueError(f"{output} already holds a study: pass --resume to continue it, or choose another --output")
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))["plan"]
    except (json.JSONDecodeError, KeyError, TypeError):
        raise ValueError(f"{path} is not a study file: choose another --output") from None
    differences = plan_differences(saved, plan)
    if differences:
        raise ValueError(
            f"--resume: {output} holds a study of another plan ({differences}): "
            "rerun with its settings, or choose another --output"
        )


def plan_differences(saved: Mapping[str, Any], plan: Mapping[str, Any]) -> str:
    """``"grid (rates), settings (lr)"``: where two plans differ (at most 4 keys named per section), or ``""``."""
    parts = []
    for section in ("grid", "settings", "finetune"):
        old, new = saved.get(section), plan.get(section)
        if old == new:
            continue
        if isinstance(old, Mapping) and isinstance(new, Mapping):
            keys = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
            shown = ", ".join(keys[:4]) + (f" and {len(keys) - 4} more" if len(keys) > 4 else "")
            parts.append(f"{section} ({shown})")
        else:
            parts.append(f"{section} ({'on' if new else 'off'} now)")
    return ", ".join(parts)


def _write_study(
    output: Path, config: StudyConfig, cells: Sequence[Cell], results: Mapping[str, dict[str, Any]]
) -> dict[str, Any]:
    """``OUTPUT/study.json``: the plan, every cell (its result, or its coordinates while pending)."""
    study = {
        "version": 1,
        "complete": all(cell.name in results for cell in cells),
        "plan": config.plan(),
        "evaluation": {
            "masking": "token-level 80/10/10",
            "mlm_probability": config.base.eval_mlm_probability,
            "blocks": config.base.eval_blocks,
        },
        "cells": [results.get(cell.name) or {**cell.describe(), "status": "pending"} for cell in cells],
    }
    write_json(output / STUDY_FILE, study)
    return study


def write_json(path: Path, content: Any) -> None:
    """Write ``content`` as JSON through a temporary file renamed into place (a kill leaves the old file or the new)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.partial-{os.getpid()}")
    with temporary.open("w", encoding="utf-8") as handle:
        json.dump(content, handle, indent=2)
        handle.flush()
        os.fsync(handle.fileno())
    temporary.replace(path)


@contextlib.contextmanager
def cell_lock(folder: Path) -> Iterator[None]:
    """Hold ``folder/.lock`` while a cell runs, so two studies (a resumed one and an orphaned
    process of a killed one) never train the same cell at once. The lock goes with the process.

    Raises:
        ValueError: another process holds it.
    """
    folder.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # no flock (Windows): no protection, as before
        yield
        return
    with (folder / ".lock").open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ValueError(f"{folder} is being trained by another process: wait for it, or stop it first") from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
