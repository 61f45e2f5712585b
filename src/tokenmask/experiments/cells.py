"""Running a sweep's cells: one after another in this process, or several in processes of their own.

Each cell runs under its folder's lock (two sweeps never run the same cell) and writes its
marker, ``cell.json`` (its result), last and atomically: a cell with it is finished, any other
is not. Cells in processes are spawned (no forked torch threads), each on its share of the
cores, and stop with the sweep, saving a checkpoint first. :class:`Relay` passes a cell's
progress bar and warnings on, not its set-up lines.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from tokenmask.experiments.plan import Cell, Experiment, SweepRun, cell_digest, shared_part
from tokenmask.files import write_json
from tokenmask.train.job import QuietReporter, Reporter

MARKER = "cell.json"
"""A finished cell's result, in its folder: written last, atomically."""

_LOCK = ".lock"


def read_marker(folder: Path, identity: str, *, earlier: Collection[str] = ()) -> dict[str, Any] | None:
    """The result of the cell of ``identity`` (:func:`~tokenmask.experiments.plan.cell_digest`)
    finished in ``folder`` (``folder/cell.json``), or None if it has not finished.

    ``earlier``: the digests of the whole plans the sweep ran under; a marker written before
    markers carried the cell's identity carries one of those instead.

    Raises:
        ValueError: the cell finished under other settings (a folder left by another sweep).
    """
    path = folder / MARKER
    if not path.exists():
        return None
    try:
        result = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:  # written atomically, so only a hand-edited file: run the cell again
        return None
    valid = result["identity"] == identity if "identity" in result else result.get("plan") in earlier
    if not valid:
        raise ValueError(f"{path} was written by a sweep of another plan: choose another --output")
    return result


def run_cell(
    experiment: Experiment, cell: Cell, output: Path, reporter: Reporter = QuietReporter(), *,
    loaded: Any, resume: bool, command: str | None,
) -> dict[str, Any]:  # fmt: skip
    """Run one cell under its lock and write its marker last (with the cell's identity); returns its result."""
    folder = output / cell.folder
    began = time.perf_counter()
    with cell_lock(folder):
        (folder / MARKER).unlink(missing_ok=True)  # a cell run again (overwrite) is unfinished until it ends
        result = experiment.run_cell(cell, folder, reporter, loaded=loaded, resume=resume, command=command)
        minutes = (time.perf_counter() - began) / 60
        result = {
            "name": cell.name,
            **result,
            "minutes": minutes,
            "status": "finished",
            "identity": cell_digest(shared_part(experiment), cell),
        }
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


def run_cells(
    experiment: Experiment,
    run: SweepRun,
    pending: Sequence[Cell],
    every: Sequence[Cell],
    reporter: Reporter,
    *,
    loaded: Any,
    command: str | None,
    on_result: OnResult,
) -> None:
    """Run ``pending`` (``run.jobs`` at a time), calling ``on_result`` as each finishes; a cell
    starts once the cells it runs ``after`` have finished. Cells in this process get ``loaded``,
    those in processes of their own load it again there.

    Raises:
        ValueError: a cell waits for a cell that is not in the plan, or comes before it
            (the plan's order is one that one process can run).
    """
    label = {cell.name: f"cell {number}/{len(every)} {cell.name}" for number, cell in enumerate(every, 1)}
    place = {cell.name: number for number, cell in enumerate(every)}
    for cell in every:
        for name in cell.after:
            if place.get(name, len(every)) >= place[cell.name]:
                raise ValueError(f"cell {cell.name} waits for {name}, which is not before it in the plan")
    if run.jobs == 1:
        for cell in pending:
            reporter.message(f"{label[cell.name]}: started")
            result = run_cell(experiment, cell, run.output, Relay(reporter), loaded=loaded, resume=run.continues, command=command)
            reporter.message(f"{label[cell.name]}: {experiment.finished_line(result)}")
            on_result(result)
        return
    finished = {cell.name for cell in every} - {cell.name for cell in pending}
    _run_in_processes(experiment, run, pending, finished, reporter, command=command, on_result=on_result, label=label)


def _run_in_processes(
    experiment: Experiment,
    run: SweepRun,
    cells: Sequence[Cell],
    finished: set[str],
    reporter: Reporter,
    *,
    command: str | None,
    on_result: OnResult,
    label: Mapping[str, str],
) -> None:
    """Up to ``run.jobs`` cells at once, each in a spawned process with its share of the cores;
    the first waiting cell whose ``after`` cells are ``finished`` starts next."""
    from multiprocessing.connection import wait

    context = multiprocessing.get_context("spawn")  # no forked torch or tokenizer threads
    threads = max(1, (os.cpu_count() or 1) // run.jobs)
    waiting = list(cells)
    running: dict[int, tuple[Any, Cell, Any]] = {}  # sentinel -> (process, cell, receiving end)
    try:
        while waiting or running:
            while len(running) < run.jobs:
                ready = next((c for c in waiting if finished.issuperset(c.after)), None)
                if ready is None:  # the rest wait for running cells
                    break
                waiting.remove(ready)
                cell = ready
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
                finished.add(cell.name)
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
        result = run_cell(experiment, cell, run.output, loaded=experiment.load(), resume=run.continues, command=command)
        outcome: tuple[str, Any] = ("done", result)
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
