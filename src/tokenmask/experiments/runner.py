"""Running a study's cells: each one run in its own folder under its lock, finished when its ``cell.json`` is written last.

The record, ``OUTPUT/study.json``, is rebuilt from the ``cell.json`` files after every cell, so
processes need not talk: ``--jobs N`` starts N processes that each claim the first cell whose model
is ready and whose lock is free, run it and write its marker, until none is left. A signal stops a
cell's loop at a checkpoint, as it stops a run; a failed cell leaves ``error.txt``, retried on ``--resume``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import multiprocessing
import multiprocessing.connection
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from tokenmask.experiments.grid import Cell
from tokenmask.files import write_json
from tokenmask.train.interrupt import Interrupted, StopSignals
from tokenmask.train.job import Reporter

FORMAT = 2  # a record of another format is refused: version 0.x carries no upgrade code
RECORD, SETTINGS, MARKER, ERROR = "study.json", "config.yaml", "cell.json", "error.txt"


class Study(Protocol):
    """What the runner needs of a study (:class:`~tokenmask.experiments.study.StudyRun`); it pickles into processes."""

    @property
    def growing(self) -> tuple[tuple[str, ...], ...]: ...  # where plan() lists the axes a resumed study may grow
    def plan(self) -> dict[str, Any]: ...
    def cells(self) -> list[Cell]: ...
    def load(self) -> Any: ...
    def run_cell(self, cell: Cell, folder: Path, reporter: Reporter, *, loaded: Any) -> dict[str, Any]: ...
    def guess_minutes(self, cell: Cell) -> float: ...
    def finished_line(self, result: Mapping[str, Any]) -> str: ...
    def summary(self, cells: Sequence[Mapping[str, Any]]) -> dict[str, Any]: ...


def shared_plan(plan: Mapping[str, Any], growing: Sequence[Sequence[str]]) -> dict[str, Any]:
    """``plan`` without the entries at the ``growing`` paths (``("grid", "rates")``): what every cell depends on."""
    shared = json.loads(json.dumps(plan))
    for path in growing:
        entry = shared
        for key in path[:-1]:
            entry = entry.get(key) if isinstance(entry, dict) else None
        if isinstance(entry, dict):
            entry.pop(path[-1], None)
    return shared


def identity(shared: Mapping[str, Any], cell: Cell) -> str:
    """What a finished cell's marker carries: the digest of the plan's ``shared`` part (:func:`shared_plan`),
    and its coordinates. It holds while they do, so a resumed study may grow an axis and keep its cells."""
    found = {"plan": shared, "cell": dict(cell.coordinates)}
    return hashlib.sha256(json.dumps(found, sort_keys=True).encode("utf-8")).hexdigest()[:16]


def plan_differences(saved: Mapping[str, Any], plan: Mapping[str, Any]) -> str:
    """Where two plans differ, ``""`` if nowhere: ``"grid (rates), pretrain (lr, seed), finetune"``."""
    parts = []
    for section in dict.fromkeys([*saved, *plan]):
        old, new = saved.get(section), plan.get(section)
        if isinstance(old, Mapping) and isinstance(new, Mapping):
            parts += (
                [f"{section} ({', '.join(sorted(k for k in {**old, **new} if old.get(k) != new.get(k)))})"] if old != new else []
            )
        elif old != new:
            parts.append(section)
    return ", ".join(parts)


def check_folder(output: Path, study: Study, *, resume: bool) -> dict[str, Any] | None:
    """The record of the study ``output`` holds, which this one continues (None: a new study); ValueError
    for a run's folder, a study without ``resume``, a record of an older format or another plan."""
    path = output / RECORD
    if not path.exists():
        if (output / SETTINGS).exists():
            raise ValueError(f"{output} holds a single run, not a study: choose another --output")
        return None
    if not resume:
        raise ValueError(f"{output} already holds a study: pass --resume to continue it, or choose another --output")
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        form, plan = record.get("format"), record["plan"]
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError):
        raise ValueError(f"{path} is not a study record: choose another --output") from None
    if form != FORMAT:
        raise ValueError(f"{path} is of format {form or 1}, from another tokenmask: rerun the study into a new --output")
    if differences := plan_differences(shared_plan(plan, study.growing), shared_plan(study.plan(), study.growing)):
        raise ValueError(f"--resume: {output} holds a study of another plan ({differences}): rerun it with its settings")
    return dict(record)


def finished(output: Path, study: Study, cells: Sequence[Cell]) -> dict[str, dict[str, Any]]:
    """The results of the finished ``cells``, by name, from their markers; ValueError for a marker of another plan."""
    shared = shared_plan(study.plan(), study.growing)
    results = {}
    for cell in cells:
        path = output / cell.folder / MARKER
        if not path.exists():
            continue
        result = json.loads(path.read_text(encoding="utf-8"))
        if result.get("identity") != identity(shared, cell):
            raise ValueError(f"{path} was written by a study of another plan: choose another --output")
        results[cell.name] = result
    return results


def write_record(output: Path, study: Study) -> dict[str, Any]:
    """Rebuild ``OUTPUT/study.json`` from the markers on disk: the plan, every cell (its result, or
    its coordinates while pending), whether it is complete, and the study's summary."""
    cells = study.cells()
    done = finished(output, study, cells)
    listed = [done.get(c.name) or {"name": c.name, **c.coordinates, "status": "pending"} for c in cells]
    record = {"format": FORMAT, "complete": len(done) == len(cells), "plan": study.plan(), **study.summary(listed)}
    write_json(output / RECORD, record := {**record, "cells": listed})
    return record


@contextlib.contextmanager
def cell_lock(folder: Path) -> Iterator[bool]:
    """Try to hold ``folder/.lock`` while a cell runs; yields whether this process holds it (the lock goes with the process)."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / ".lock").open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True  # closing the file lets the lock go


def run_cells(study: Study, output: Path, reporter: Reporter, *, jobs: int) -> None:
    """Run every cell not finished yet, in this process or in ``jobs`` processes of their own; a cell
    left unfinished (stopped, killed) continues from its newest checkpoint.

    Raises:
        ValueError: a cell failed (its message; the other processes finish their cells first).
        Interrupted: SIGINT or SIGTERM, or a process of ``jobs`` ended by a signal, before every cell finished.
        RuntimeError: a process of ``jobs`` ended on an error of its own (shown above).
    """
    for cell in study.cells():
        (output / cell.folder / ERROR).unlink(missing_ok=True)  # a resumed study tries failed cells again
    loaded = study.load()  # bad input fails here, once, before any cell
    reporter.message(forecast(study, write_record(output, study), jobs=jobs))
    if jobs == 1:
        return work(study, output, reporter, loaded=loaded, jobs=1)
    context = multiprocessing.get_context("spawn")  # no forked torch threads
    stop = context.Event()
    processes = [context.Process(target=_process, args=(study, output, jobs, stop)) for _ in range(jobs)]
    with StopSignals() as signals:  # noted here; the cells' own loops stop at a checkpoint
        for process in processes:
            process.start()
        while any(process.is_alive() for process in processes):
            multiprocessing.connection.wait([process.sentinel for process in processes], timeout=1.0)
            if signals.received is not None:
                stop.set()  # a signal to this process alone: the others finish their cell and start no other
    errors = [path.read_text(encoding="utf-8") for c in study.cells() if (path := output / c.folder / ERROR).exists()]
    if errors:
        raise ValueError(errors[0])
    if len(finished(output, study, study.cells())) == len(study.cells()):
        return
    codes = [code for p in processes if (code := p.exitcode or 0)]
    signalled = [-code if code < 0 else code - 128 for code in codes if code < 0 or code > 128]
    if signals.received is not None or signalled:
        raise Interrupted(signals.received or signalled[0])
    raise RuntimeError(f"a process of the study ended with exit code {codes[0] if codes else 0}: its error is above")


def work(
    study: Study, output: Path, reporter: Reporter, *, loaded: Any, jobs: int, stop: Callable[[], bool] | None = None
) -> None:
    """Claim and run cells until none is left that this process can run; with ``jobs`` > 1, a locked
    cell is another process's of the study (wait for it rather than refuse)."""
    cells = study.cells()
    label = {c.name: f"cell {number}/{len(cells)} {c.name}" for number, c in enumerate(cells, 1)}
    with StopSignals() as signals:
        while True:
            done = finished(output, study, cells)
            failed = {c.name for c in cells if (output / c.folder / ERROR).exists()}
            todo = [c for c in cells if c.name not in done and c.name not in failed]
            if not todo or failed or (stop is not None and stop()):  # a failure stops the study after the running cells
                return
            for cell in (c for c in todo if set(c.after) <= done.keys()):
                if signals.received is not None:
                    raise Interrupted(signals.received)
                with cell_lock(output / cell.folder) as mine:
                    if not mine and jobs == 1:
                        raise ValueError(f"{output / cell.folder} is being run by another process: wait for it, or stop it")
                    if not mine or (output / cell.folder / MARKER).exists():
                        continue
                    reporter.message(f"{label[cell.name]}: started")
                    result = _run_one(study, cell, output, reporter, loaded=loaded)
                record = write_record(output, study)  # the markers read once: the record, then the forecast from it
                reporter.message(f"{label[cell.name]}: {study.finished_line(result)}; {forecast(study, record, jobs=jobs)}")
                break
            else:
                time.sleep(1.0)  # every ready cell is another process's: wait for one to finish


def _run_one(study: Study, cell: Cell, output: Path, reporter: Reporter, *, loaded: Any) -> dict[str, Any]:
    """Run ``cell`` and write its marker last; bad input leaves ``error.txt`` instead."""
    folder, began = output / cell.folder, time.perf_counter()
    try:
        result = study.run_cell(cell, folder, _Relay(reporter), loaded=loaded)
        minutes = (time.perf_counter() - began) / 60
        identified = {
            "minutes": minutes,
            "status": "finished",
            "identity": identity(shared_plan(study.plan(), study.growing), cell),
        }
        write_json(folder / MARKER, result := {"name": cell.name, "folder": cell.folder, **result, **identified})
    except (ValueError, OSError) as error:
        (folder / ERROR).write_text(f"cell {cell.name}: {error}", encoding="utf-8")
        raise
    return result


def forecast(study: Study, record: Mapping[str, Any], *, jobs: int = 1) -> str:
    """How long the cells left will take: ``"35 cells left, about 1.8 h"``. Each cell's rough guess
    from the settings, scaled by how the ``record``'s finished cells compared with theirs."""
    cells, done = study.cells(), {c["name"]: c for c in record["cells"] if c.get("status") == "finished"}
    guessed = sum(study.guess_minutes(c) for c in cells if c.name in done)
    took = sum(float(r.get("minutes", 0.0)) for r in done.values())
    scale, rough = (took / guessed, "") if done and guessed > 0 else (1.0, " (a rough guess from the settings)")
    left = [c for c in cells if c.name not in done]
    minutes = scale * sum(study.guess_minutes(c) for c in left) / jobs
    when = f"{minutes * 60:.0f} s" if minutes < 1 else f"{minutes:.0f} min" if minutes < 90 else f"{minutes / 60:.1f} h"
    return f"{len(left)} cell{'s' * (len(left) != 1)} left, about {when}{rough}"


@dataclass(frozen=True)
class _Relay:
    """A cell's progress bar and warnings for the study's reporter, not its set-up lines; lines on stdout without one."""

    reporter: Reporter | None

    def message(self, text: str) -> None:
        if self.reporter is None:
            print(text, flush=True)
        elif text.startswith(("warning", "resuming from")):
            self.reporter.message(text)

    def step(self, step: int, total: int | None, loss: float, tokens_per_s: float) -> None:
        if self.reporter is not None:
            self.reporter.step(step, total, loss, tokens_per_s)


def _process(study: Study, output: Path, jobs: int, stop: Any) -> None:
    """Another process of ``--jobs``: works until no cell is left, the main process stops, or it is gone."""
    import torch

    torch.set_num_threads(max(1, (os.cpu_count() or 1) // jobs))
    parent = os.getppid()
    try:
        work(study, output, _Relay(None), loaded=study.load(), jobs=jobs, stop=lambda: stop.is_set() or os.getppid() != parent)
    except Interrupted as stopped:
        sys.exit(stopped.exit_code)
    except (ValueError, OSError) as error:
        print(f"tokenmask study: {error}", file=sys.stderr, flush=True)
        sys.exit(2)
