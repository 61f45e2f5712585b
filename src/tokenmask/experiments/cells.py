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
import multiprocessing.connection
import multiprocessing.resource_tracker
import os
import signal
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenmask.experiments.plan import Cell, Experiment, SweepRun, cell_digest, shared_part
from tokenmask.files import write_json
from tokenmask.train.interrupt import SIGNALS, Interrupted, StopSignals, request_stop
from tokenmask.train.job import QuietReporter, Reporter

MARKER = "cell.json"
"""A finished cell's result, in its folder: written last, atomically."""

_LOCK = ".lock"


def read_marker(
    folder: Path, identity: str, *, earlier: Collection[str] = (), former: Set[str] = frozenset()
) -> dict[str, Any] | None:
    """The result of the cell of ``identity`` (:func:`~tokenmask.experiments.plan.cell_digest`)
    finished in ``folder`` (``folder/cell.json``), or None if it has not finished.

    ``earlier``: the digests of the whole plans the sweep ran under; a marker written before
    markers carried the cell's identity carries one of those instead. ``former``: identities
    an earlier tokenmask gave the same cell (:meth:`~tokenmask.experiments.plan.Experiment.former_identities`).

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
    valid = result["identity"] in (identity, *former) if "identity" in result else result.get("plan") in earlier
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
    a cell stopped by one, stops the sweep: the running cells are asked to stop (:class:`_CellProcess`)
    and waited for, then :class:`Interrupted` is raised. A second signal here stops them at once."""
    context = multiprocessing.get_context("spawn")  # no forked torch or tokenizer threads
    threads = max(1, (os.cpu_count() or 1) // run.jobs)
    waiting = list(cells)
    running: dict[Any, _CellProcess] = {}  # by the end of the pipe each outcome comes through
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
                    worker = _CellProcess.start(context, experiment, ready, run, command, threads)
                    running[worker.outcome] = worker
                    reporter.message(f"{label[ready.name]}: started (process {worker.process.pid})")
                ended = multiprocessing.connection.wait(list(running), timeout=_POLL_SECONDS)
                if signals.received is not None or stopped is not None:
                    for worker in running.values():
                        worker.ask_to_stop(signals.received or stopped or signal.SIGTERM)
                for end in ended:
                    worker = running.pop(end)
                    kind, said = worker.result()
                    if kind == "stopped":  # its loop saved a checkpoint
                        number, message = said
                        stopped = stopped or number
                        halted.append(worker.cell.name)
                        reporter.message(f"{label[worker.cell.name]}: stopped: {message}")
                    elif kind == "done":
                        reporter.message(f"{label[worker.cell.name]}: {experiment.finished_line(said)}")
                        finished.add(worker.cell.name)
                        on_result(said)
                    else:
                        raise ValueError(f"cell {worker.cell.name}: {said}")
            number = signals.received or stopped
            if number is not None and (waiting or halted):  # a sweep whose every cell finished is complete
                raise Interrupted(number)
    except KeyboardInterrupt:  # a second signal: stop now (a cell that had only been asked still saves)
        for worker in running.values():
            if worker.process.is_alive():
                worker.process.terminate()
        raise
    finally:
        for worker in running.values():  # after a cell's error: the others stop at a checkpoint
            worker.ask_to_stop(signal.SIGTERM)
        for worker in running.values():
            worker.process.join()


_POLL_SECONDS = 0.5
"""How often the sweep looks for a signal while its cells run."""


@dataclass
class _CellProcess:
    """A cell running in a process of its own, with two pipes: ``outcome`` (the cell's end
    closed here, so it ends when the process does) and the sweep's end of ``stop``, which only
    this process holds. Sending a signal's number through ``stop``, or closing it (this process
    ending closes it too, even killed by SIGKILL), asks the cell to stop: a request, not a
    signal, since the cell's loop takes a second signal as "stop now, unsaved" and a scheduler
    that signals every process of the job has sent it the first. (Not a multiprocessing Event:
    setting one waits for every waiter to wake, and a cell that ended while waiting never does.)"""

    cell: Cell
    process: Any
    outcome: Any  # the receiving end
    stop: Any  # the sending end

    @classmethod
    def start(
        cls, context: Any, experiment: Experiment, cell: Cell, run: SweepRun, command: str | None, threads: int
    ) -> _CellProcess:
        """Start ``cell``'s process with SIGINT and SIGTERM blocked: one that comes while it
        starts (imports, unpickles) waits, and reaches its handlers once it has them."""
        outcome, sending = context.Pipe(duplex=False)
        listening, stop = context.Pipe(duplex=False)
        process = context.Process(
            target=_cell_process, args=(experiment, cell, run, command, threads, sending, listening), daemon=False
        )
        with _signals_blocked():  # inherited by the new process; pending here until the end of the block
            process.start()
        sending.close()
        listening.close()
        return cls(cell, process, outcome, stop)

    def ask_to_stop(self, number: int) -> None:
        if not self.stop.closed:
            with contextlib.suppress(OSError):  # the cell may be gone
                self.stop.send(number)
            self.stop.close()

    def result(self) -> tuple[str, Any]:
        """``("done", result)``, ``("stopped", (signal, message))`` or ``("error", message)``;
        waits for the process to end."""
        try:
            said: tuple[str, Any] = self.outcome.recv()
        except EOFError:  # it ended without a word
            self.process.join()
            said = ("error", f"its process ended with exit code {self.process.exitcode}")
        self.process.join()
        self.outcome.close()
        self.stop.close()
        return said


@contextlib.contextmanager
def _signals_blocked() -> Iterator[None]:
    """SIGINT and SIGTERM held back in this thread (and in processes started meanwhile) until the end.

    A spawn's first start also starts multiprocessing's resource tracker, and CPython unblocks
    both signals once that is up (``resource_tracker.ensure_running``), which would let them
    through for the process started next: so the tracker is started here first, before blocking."""
    if not hasattr(signal, "pthread_sigmask"):  # Windows
        yield
        return
    multiprocessing.resource_tracker.ensure_running()
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _cell_process(
    experiment: Experiment, cell: Cell, run: SweepRun, command: str | None, threads: int, sender: Any, stop: Any
) -> None:
    """A cell's process: stops with the sweep (:class:`_CellProcess`), works on ``threads`` threads,
    sends its outcome. SIGINT and SIGTERM come blocked (:meth:`_CellProcess.start`): they are let
    through once this process notes them."""
    outcome: tuple[str, Any]
    with StopSignals():  # a signal outside the cell's loop: the cell finishes (its loop takes one in it)
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)
        _stop_with_sweep(stop)
        import torch

        torch.set_num_threads(threads)
        try:
            result = run_cell(experiment, cell, run.output, loaded=experiment.load(), resume=run.continues, command=command)
            outcome = ("done", result)
        except Interrupted as stopped:
            outcome = ("stopped", (stopped.signal_number, str(stopped)))
        except (ValueError, OSError) as error:
            outcome = ("error", str(error))
        with contextlib.suppress(OSError):  # the sweep may be gone; a signal now must not end the process unheard
            sender.send(outcome)


def _stop_with_sweep(stop: Any) -> None:
    """Stop this cell (:func:`~tokenmask.train.interrupt.request_stop`) once the sweep sends a
    signal's number through ``stop`` or its end closes (:class:`_CellProcess`), so that no
    orphan runs on: the cell's loop saves a checkpoint and stops (``--resume`` continues it); a
    cell past its loop finishes. A watching thread, not Linux's PR_SET_PDEATHSIG, which fires once per
    thread of a multi-threaded parent."""

    def watch() -> None:
        try:
            number = int(stop.recv())
        except (OSError, EOFError):  # the sweep is gone
            number = signal.SIGTERM
        request_stop(number)

    threading.Thread(target=watch, name="stop-with-sweep", daemon=True).start()
