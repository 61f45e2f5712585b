"""Running a sweep's cells: one after another in this process, or several in processes of their own.

Each cell runs under its folder's lock (two sweeps never run the same cell) and writes its
marker, ``cell.json`` (its result), last and atomically: a cell with it is finished, any other
is not. Cells in processes are spawned (no forked torch threads), each on its share of the
cores, and stop with the sweep, saving a checkpoint first. :class:`Relay` passes a cell's
progress bar and warnings on, not its set-up lines.

SIGINT / SIGTERM stop a sweep the way they stop a run: noted, never dropped. The cells that
are training stop at their next step with a checkpoint, a cell past its training (scoring,
writing its marker) finishes, and no cell starts after; then :class:`Interrupted` is raised
(unless no cell was left: the sweep is complete).
Cells in processes of their own are asked to stop through a pipe, not a second signal: a
scheduler that signals every process of the job already sent them one, and a second signal
means "stop now, unsaved".
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
from tokenmask.train.interrupt import Interrupted, StopSignals, request_stop
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
        with StopSignals() as signals:  # a signal outside a cell's loop: the cell finishes, no other starts
            for cell in pending:
                if signals.received is not None:
                    raise Interrupted(signals.received)
                reporter.message(f"{label[cell.name]}: started")
                result = run_cell(
                    experiment, cell, run.output, Relay(reporter), loaded=loaded, resume=run.continues, command=command
                )
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
    the first waiting cell whose ``after`` cells are ``finished`` starts next. A signal here, or
    a cell stopped by one, stops the sweep: the running cells are asked to stop (the end of a
    pipe they read closes) and waited for, then :class:`Interrupted` is raised."""
    from multiprocessing.connection import wait

    context = multiprocessing.get_context("spawn")  # no forked torch or tokenizer threads
    threads = max(1, (os.cpu_count() or 1) // run.jobs)
    stop, stopping = context.Pipe(duplex=False)  # the cells read `stop`: closing `stopping` (or this process ending) stops them
    waiting = list(cells)
    running: dict[int, tuple[Any, Cell, Any]] = {}  # sentinel -> (process, cell, receiving end)
    stopped: int | None = None  # the signal a cell stopped on
    halted: list[str] = []  # the cells stopped before they finished
    try:
        with StopSignals() as signals:
            while running or (waiting and signals.received is None and stopped is None):
                while len(running) < run.jobs and signals.received is None and stopped is None:
                    ready = next((c for c in waiting if finished.issuperset(c.after)), None)
                    if ready is None:  # the rest wait for running cells
                        break
                    waiting.remove(ready)
                    receiver, sender = context.Pipe(duplex=False)
                    arguments = (experiment, ready, run, command, threads, sender, stop)
                    process = context.Process(target=_cell_process, args=arguments, daemon=False)
                    process.start()
                    sender.close()
                    running[process.sentinel] = (process, ready, receiver)
                    reporter.message(f"{label[ready.name]}: started (process {process.pid})")
                ended = wait(list(running), timeout=_POLL_SECONDS)
                if (signals.received is not None or stopped is not None) and not stopping.closed:
                    stopping.close()  # the cells stop at their next step, a checkpoint saved
                for sentinel in ended:
                    process, cell, receiver = running.pop(cast(int, sentinel))
                    outcome: tuple[str, Any] = (
                        receiver.recv() if receiver.poll() else ("error", f"its process ended with exit code {process.exitcode}")
                    )
                    process.join()
                    if outcome[0] == "stopped":
                        number, said = outcome[1]
                        stopped = stopped or number
                        halted.append(cell.name)
                        reporter.message(f"{label[cell.name]}: stopped: {said}")
                        continue
                    if outcome[0] != "done":
                        raise ValueError(f"cell {cell.name}: {outcome[1]}")
                    reporter.message(f"{label[cell.name]}: {experiment.finished_line(outcome[1])}")
                    finished.add(cell.name)
                    on_result(outcome[1])
            number = signals.received or stopped
            if number is not None and (waiting or halted):  # a sweep whose every cell finished is complete
                raise Interrupted(number)
    finally:
        for process, _, _ in running.values():
            if process.is_alive():
                process.terminate()  # SIGTERM: the cell's loop saves a checkpoint and stops
        for process, _, _ in running.values():
            process.join()
        stopping.close()
        stop.close()


_POLL_SECONDS = 0.5
"""How often the sweep looks for a signal while its cells run."""


def _cell_process(
    experiment: Experiment, cell: Cell, run: SweepRun, command: str | None, threads: int, sender: Any, stop: Any
) -> None:
    """A cell's process: stops with the sweep (``stop`` ends), works on ``threads`` threads,
    sends its outcome: ``("done", result)``, ``("stopped", (signal, message))`` or ``("error", message)``."""
    _stop_with_sweep(stop)
    import torch

    torch.set_num_threads(threads)
    outcome: tuple[str, Any]
    try:
        with StopSignals():  # a signal outside the cell's loop: the cell finishes (its loop takes one in it)
            result = run_cell(experiment, cell, run.output, loaded=experiment.load(), resume=run.continues, command=command)
        outcome = ("done", result)
    except Interrupted as stopped:
        outcome = ("stopped", (stopped.signal_number, str(stopped)))
    except (ValueError, OSError) as error:
        outcome = ("error", str(error))
    with contextlib.suppress(OSError):  # the sweep may be gone
        sender.send(outcome)


def _stop_with_sweep(stop: Any) -> None:
    """Stop this cell (:func:`~tokenmask.train.interrupt.request_stop`) once ``stop``, the
    reading end of a pipe whose other end only the sweep holds, ends: the sweep closed it, or
    its process is gone (even killed by SIGKILL), so that no orphan runs on. The cell's loop
    saves a checkpoint and stops (``--resume`` continues it); a cell past its loop finishes.
    A request, not a signal: the loop takes a second signal as "stop now, unsaved", and a
    scheduler that signals every process of the job has sent this one its first. (Not a
    multiprocessing Event: setting one waits for every waiter to wake, and a cell that ended
    while waiting never does. Not Linux's PR_SET_PDEATHSIG: it fires once per thread of a
    multi-threaded parent.)"""

    def watch() -> None:
        with contextlib.suppress(OSError, EOFError):
            while True:
                stop.recv()  # nothing is ever sent: EOFError once the sweep's end closes
        request_stop(signal.SIGTERM)

    threading.Thread(target=watch, name="stop-with-sweep", daemon=True).start()
