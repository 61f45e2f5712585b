"""The sweep runner: a typed plan of cells, each run once in its own folder, resumable, one record.

Every experiment (the study, the augmentation comparison) is an :class:`Experiment`: a plan
(JSON, what the sweep runs), its cells (crossed from declared :class:`Axis` values by
:func:`cross`), and how one cell runs. :func:`run_sweep` does the rest the same way for all:

- **one resume rule**: ``OUTPUT/<record>`` holds the plan; a resumed sweep must have the same
  one (:func:`plan_differences` names what differs), finished cells are read back, an
  interrupted one continues (its runs resume from their checkpoints), the others start;
- **one finished-cell marker**: ``<cell folder>/cell.json``, the cell's result, written last
  and atomically (:mod:`tokenmask.files`): a cell with it is finished, any other is not;
- **jobs**: cells one after another in this process, or ``jobs`` at once in processes of
  their own (spawned, each with its share of the cores), stopped cleanly with the sweep;
- **one relay** of progress: each cell's bar and warnings, not its set-up lines;
- **one record**: ``OUTPUT/<record>`` (``study.json``, ``compare.json``) rewritten after every
  cell: the plan, every cell (its result, or its coordinates while pending), ``complete``,
  and the experiment's summary of what finished; and ``OUTPUT/config.yaml``, the settings
  that replay the sweep (``--config``).

A new factor of an experiment is one more :class:`Axis` in its declaration (and the cell
reading its coordinate), not new plumbing.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

from tokenmask.files import write_json
from tokenmask.train.job import QuietReporter, Reporter

MARKER = "cell.json"
"""A finished cell's result, in its folder: written last, atomically."""

SETTINGS_FILE = "config.yaml"
"""The settings that replay a sweep (``--config OUTPUT/config.yaml``), as a run's."""

_LOCK = ".lock"

Coordinates = Mapping[str, Any]
"""A cell's place in the plan, JSON-ready: ``{"strategy": "span", "rate": 0.3, "seed": 0}``."""


@dataclass(frozen=True)
class Axis:
    """One factor of a plan: its values, crossed with the other axes'.

    A value is a coordinate under the axis's ``name``, or a mapping of several coordinates
    that go together (an augmentation arm is ``{"arm": "adaptive-0.1", "rate": 0.1, "adaptive": True}``).
    """

    name: str
    values: tuple[Any, ...]


@dataclass(frozen=True)
class Cell:
    """One run of a sweep: its ``name`` in the record and messages, its ``folder`` under
    OUTPUT, and its ``coordinates``."""

    name: str
    folder: str
    coordinates: Coordinates

    def describe(self) -> dict[str, Any]:
        """The cell as the record lists it while pending: name and coordinates."""
        return {"name": self.name, **self.coordinates}


def cross(
    axes: Sequence[Axis],
    *,
    name: Callable[[Coordinates], str],
    folder: Callable[[Coordinates], str],
    derive: Callable[[Coordinates], Coordinates] | None = None,
) -> list[Cell]:
    """Every combination of the axes' values, the first axis slowest; ``name`` and ``folder``
    spell each cell's coordinates, ``derive`` adds coordinates computed from them (listed first).

    ``cross([Axis("rate", (0.1, 0.2)), Axis("seed", (0, 1))], …)`` gives the cells of
    ``(0.1, 0), (0.1, 1), (0.2, 0), (0.2, 1)``.
    """
    cells = []
    for values in itertools.product(*(axis.values for axis in axes)):
        coordinates: dict[str, Any] = {}
        for axis, value in zip(axes, values):
            coordinates.update(value if isinstance(value, Mapping) else {axis.name: value})
        if derive is not None:
            coordinates = {**derive(coordinates), **coordinates}
        cells.append(Cell(name(coordinates), folder(coordinates), coordinates))
    return cells


class Experiment(Protocol):
    """What :func:`run_sweep` runs. An implementation is a frozen dataclass of configs, so it
    pickles into the processes of ``jobs``."""

    @property
    def kind(self) -> str:
        """What the sweep is called in messages: ``"study"``, ``"comparison"``."""
        ...

    @property
    def record_file(self) -> str:
        """The record's name in OUTPUT: ``"study.json"``."""
        ...

    def plan(self) -> dict[str, Any]:
        """What the sweep runs, JSON-ready: a resumed sweep must have the same."""
        ...

    def settings(self) -> dict[str, Any]:
        """The flat settings that replay the sweep (written to ``OUTPUT/config.yaml``)."""
        ...

    def cells(self) -> list[Cell]: ...

    def prepare(self, finished: int) -> str:
        """Check and load what every cell needs (bad input fails here, before anything is
        written); returns the sweep's first lines: the plan in words, ``finished`` cells read back."""
        ...

    def run_cell(self, cell: Cell, folder: Path, reporter: Reporter, *, resume: bool, command: str | None) -> dict[str, Any]:
        """Run ``cell`` in ``folder``; returns its result (JSON-ready). ``resume``: its runs
        continue from their checkpoints."""
        ...

    def finished_line(self, result: Mapping[str, Any]) -> str:
        """What a finished cell's line says after its name: ``done in 3.1 min; accuracy 0.71``."""
        ...

    def summary(self, finished: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """The record's fields beside plan and cells, from the results so far (tables, tests)."""
        ...


@dataclass(frozen=True)
class SweepRun:
    """Where and how a sweep runs (not what it runs: that is the experiment's plan).

    Attributes:
        output: the sweep's folder.
        resume: continue the sweep in ``output``.
        overwrite: start afresh in an ``output`` that holds this kind of sweep (every cell again).
        jobs: cells run at once, each in its own process (1 = in this process).
    """

    output: Path
    resume: bool = False
    overwrite: bool = False
    jobs: int = 1

    def __post_init__(self) -> None:
        if not str(self.output):
            raise ValueError("--output is required: the folder the sweep writes to")
        if self.jobs < 1:
            raise ValueError(f"jobs must be >= 1; got {self.jobs}")


def run_sweep(
    experiment: Experiment, run: SweepRun, reporter: Reporter = QuietReporter(), *, command: str | None = None
) -> dict[str, Any]:
    """Run every cell of ``experiment`` not finished yet; returns the record (also in ``OUTPUT/<record>``).

    Raises:
        ValueError: an OUTPUT that holds something else, or a sweep without ``resume`` (or of
            another plan with it), all before anything is written; the error of a cell (the
            other running cells are stopped first, each at a checkpoint). Bad input refused
            by the first cell of a new sweep leaves no record behind.
        Interrupted: SIGINT or SIGTERM (the running cells saved a checkpoint first).
    """
    output, cells = Path(run.output), experiment.cells()
    check_folder(output, experiment, resume=run.resume and not run.overwrite, overwrite=run.overwrite)
    results: dict[str, dict[str, Any]] = {}
    for cell in cells:
        done = read_marker(output / cell.folder) if run.resume and not run.overwrite else None
        if done is not None:
            results[cell.name] = done
    reporter.message(experiment.prepare(len(results)))
    fresh = not (output / experiment.record_file).exists() or run.overwrite
    record = _Record(output, experiment, cells, results)
    record.write()
    from tokenmask.train.runs import write_settings  # torch comes with it: not at import, which --help does

    write_settings(output / SETTINGS_FILE, experiment.settings())
    pending = [cell for cell in cells if cell.name not in results]
    try:
        _run_cells(experiment, run, pending, cells, reporter, command=command, on_result=record.add)
    except (ValueError, OSError):
        if fresh and not results:  # bad input (a corpus path, a tokenizer): the corrected command needs no --resume
            for name in (experiment.record_file, SETTINGS_FILE):
                (output / name).unlink(missing_ok=True)
        raise
    return record.write()


class _Record:
    """``OUTPUT/<record>``: the plan, every cell in plan order (result or pending), the summary."""

    def __init__(self, output: Path, experiment: Experiment, cells: Sequence[Cell], results: dict[str, dict[str, Any]]):
        self.output, self.experiment, self.cells, self.results = output, experiment, cells, results

    def add(self, result: dict[str, Any]) -> None:
        self.results[result["name"]] = result
        self.write()

    def write(self) -> dict[str, Any]:
        finished = [self.results[cell.name] for cell in self.cells if cell.name in self.results]
        content = {
            "version": 1,
            "kind": self.experiment.kind,
            "complete": len(finished) == len(self.cells),
            "plan": self.experiment.plan(),
            **self.experiment.summary(finished),
            "cells": [self.results.get(cell.name) or {**cell.describe(), "status": "pending"} for cell in self.cells],
        }
        write_json(self.output / self.experiment.record_file, content)
        return content


def check_folder(output: Path, experiment: Experiment, *, resume: bool, overwrite: bool = False) -> None:
    """Refuse a folder the sweep must not write to; nothing is changed.

    Raises:
        ValueError: ``output`` holds a single run or another kind of sweep (a ``config.yaml``
            without this sweep's record); holds this kind of sweep and neither ``resume`` nor
            ``overwrite`` is set; or holds one of another plan (the message names what
            differs, e.g. ``grid (rates), settings (lr)``).
    """
    path = output / experiment.record_file
    if (output / SETTINGS_FILE).exists() and not path.exists():
        raise ValueError(f"{output} holds a single run or another experiment, not a {experiment.kind}: choose another --output")
    if not path.exists() or overwrite:
        return
    if not resume:
        raise ValueError(f"{output} already holds a {experiment.kind}: pass --resume to continue it, or choose another --output")
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))["plan"]
    except (json.JSONDecodeError, KeyError, TypeError):
        raise ValueError(f"{path} is not a {experiment.kind} record: choose another --output") from None
    differences = plan_differences(saved, experiment.plan())
    if differences:
        raise ValueError(
            f"--resume: {output} holds a {experiment.kind} of another plan ({differences}): "
            "rerun with its settings, or choose another --output"
        )


def plan_differences(saved: Mapping[str, Any], plan: Mapping[str, Any]) -> str:
    """Where two plans differ, ``""`` if nowhere: each differing entry, with (at most 4 of) the
    keys that differ inside it when both sides are mappings.

    ``{"grid": {"rates": [0.15]}, "settings": {"lr": 1}}`` against
    ``{"grid": {"rates": [0.3]}, "settings": {"lr": 2}}`` -> ``"grid (rates), settings (lr)"``;
    a section present on one side only reads ``"finetune (on now)"`` or ``"(off now)"``.
    """
    parts = []
    for section in dict.fromkeys([*saved, *plan]):
        old, new = saved.get(section), plan.get(section)
        if old == new:
            continue
        if isinstance(old, Mapping) and isinstance(new, Mapping):
            keys = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
            shown = ", ".join(keys[:4]) + (f" and {len(keys) - 4} more" if len(keys) > 4 else "")
            parts.append(f"{section} ({shown})")
        elif old is None or new is None:
            parts.append(f"{section} ({'on' if new is not None else 'off'} now)")
        else:
            parts.append(section)
    return ", ".join(parts)


def read_marker(folder: Path) -> dict[str, Any] | None:
    """The result of a finished cell (``folder/cell.json``), or None if it has not finished."""
    path = folder / MARKER
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:  # written atomically, so only a hand-edited file: run the cell again
        return None


def run_cell(
    experiment: Experiment, cell: Cell, output: Path, reporter: Reporter = QuietReporter(), *, resume: bool, command: str | None
) -> dict[str, Any]:
    """Run one cell under its lock and write its marker last; returns its result."""
    folder = output / cell.folder
    began = time.perf_counter()
    with cell_lock(folder):
        (folder / MARKER).unlink(missing_ok=True)  # a cell run again (overwrite) is unfinished until it ends
        result = experiment.run_cell(cell, folder, reporter, resume=resume, command=command)
        result = {"name": cell.name, **result, "minutes": (time.perf_counter() - began) / 60, "status": "finished"}
        write_json(folder / MARKER, result)
    return result


@contextlib.contextmanager
def cell_lock(folder: Path) -> Iterator[None]:
    """Hold ``folder/.lock`` while a cell runs, so two sweeps (a resumed one and an orphaned
    process of a killed one) never run the same cell at once. The lock goes with the process.

    Raises:
        ValueError: another process holds it.
    """
    folder.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # no flock (Windows): no protection
        yield
        return
    with (folder / _LOCK).open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ValueError(f"{folder} is being run by another process: wait for it, or stop it first") from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class Relay:
    """A cell's progress bar and warnings for the sweep's reporter, not its set-up lines (the
    sweep says what each cell is)."""

    def __init__(self, reporter: Reporter) -> None:
        self.reporter = reporter

    def message(self, text: str) -> None:
        if text.startswith(("warning", "resuming from")):
            self.reporter.message(text)

    def step(self, step: int, total: int | None, loss: float, tokens_per_s: float) -> None:
        self.reporter.step(step, total, loss, tokens_per_s)


OnResult = Callable[[dict[str, Any]], None]


def _run_cells(
    experiment: Experiment,
    run: SweepRun,
    pending: Sequence[Cell],
    every: Sequence[Cell],
    reporter: Reporter,
    *,
    command: str | None,
    on_result: OnResult,
) -> None:
    """Run ``pending`` (``run.jobs`` at a time), calling ``on_result`` as each finishes."""
    label = {cell.name: f"cell {number}/{len(every)} {cell.name}" for number, cell in enumerate(every, 1)}
    resume = run.resume and not run.overwrite
    if run.jobs == 1:
        for cell in pending:
            reporter.message(f"{label[cell.name]}: started")
            result = run_cell(experiment, cell, run.output, Relay(reporter), resume=resume, command=command)
            reporter.message(f"{label[cell.name]}: {experiment.finished_line(result)}")
            on_result(result)
        return
    _run_in_processes(experiment, run, pending, reporter, command=command, on_result=on_result, label=label)


def _run_in_processes(
    experiment: Experiment,
    run: SweepRun,
    cells: Sequence[Cell],
    reporter: Reporter,
    *,
    command: str | None,
    on_result: OnResult,
    label: Mapping[str, str],
) -> None:
    """Up to ``run.jobs`` cells at once, each in a spawned process with its share of the cores."""
    from multiprocessing.connection import wait

    context = multiprocessing.get_context("spawn")  # no forked torch or tokenizer threads
    threads = max(1, (os.cpu_count() or 1) // run.jobs)
    waiting = list(cells)
    running: dict[int, tuple[Any, Cell, Any]] = {}  # sentinel -> (process, cell, receiving end)
    try:
        while waiting or running:
            while waiting and len(running) < run.jobs:
                cell = waiting.pop(0)
                receiver, sender = context.Pipe(duplex=False)
                arguments = (experiment, cell, run, command, threads, sender)
                process = context.Process(target=_cell_process, args=arguments, daemon=False)
                process.start()
                sender.close()
                running[process.sentinel] = (process, cell, receiver)
                reporter.message(f"{label[cell.name]}: started (process {process.pid})")
            for sentinel in wait(list(running)):
                process, cell, receiver = running.pop(cast(int, sentinel))
                outcome: tuple[str, Any] = (
                    receiver.recv() if receiver.poll() else ("error", f"its process ended with exit code {process.exitcode}")
                )
                process.join()
                if outcome[0] != "done":
                    raise ValueError(f"cell {cell.name}: {outcome[1]}")
                reporter.message(f"{label[cell.name]}: {experiment.finished_line(outcome[1])}")
                on_result(outcome[1])
    finally:
        for process, _, _ in running.values():
            if process.is_alive():
                process.terminate()  # SIGTERM: the cell's loop saves a checkpoint and stops
        for process, _, _ in running.values():
            process.join()


def _cell_process(experiment: Experiment, cell: Cell, run: SweepRun, command: str | None, threads: int, sender: Any) -> None:
    """A cell's process: stops with the sweep, works on ``threads`` threads, sends its outcome."""
    _stop_with_parent()
    import torch

    from tokenmask.train.interrupt import Interrupted

    torch.set_num_threads(threads)
    try:
        resume = run.resume and not run.overwrite
        outcome: tuple[str, Any] = ("done", run_cell(experiment, cell, run.output, resume=resume, command=command))
    except (ValueError, OSError, Interrupted) as error:
        outcome = ("error", str(error))
    with contextlib.suppress(OSError):  # the sweep may be gone
        sender.send(outcome)


def _stop_with_parent(poll_seconds: float = 1.0) -> None:
    """Send this process SIGTERM once, when the sweep's process is gone (even killed by SIGKILL),
    so no orphan runs on: the cell's loop then saves a checkpoint and stops (``--resume``
    continues it). A watching thread, not Linux's PR_SET_PDEATHSIG, which fires once per thread
    of a multi-threaded parent, and the loop takes a second signal as "stop now, unsaved"."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_seconds)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="stop-with-sweep", daemon=True).start()
