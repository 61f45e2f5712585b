"""Running the cells of a study: one at a time in this process, or several in processes of their own.

:func:`run_cell` trains one cell in ``OUTPUT/cells/<name>`` (pre-training, then optionally
fine-tuning) and writes its ``result.json`` last, atomically: a cell with that file is finished,
any other is continued by a resumed study (each run with the loop's own ``resume``).
:func:`run_cells` schedules the pending cells (:mod:`tokenmask.recipes.study` decides which).
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from tokenmask.recipes.study import CELLS, RESULT_FILE, StudyConfig, cell_lock, write_json
from tokenmask.recipes.study_grid import Cell
from tokenmask.train.logs import read_metrics
from tokenmask.train.loop import QuietReporter, Reporter

_SCORES = ("loss", "perplexity", "accuracy", "targets")
"""The fixed-mask scores a cell's result keeps (from the last evaluation of metrics.jsonl)."""

OnResult = Callable[[dict[str, Any]], None]


def read_result(folder: Path) -> dict[str, Any] | None:
    """The result of a finished cell (``folder/result.json``), or None if it has not finished."""
    path = folder / RESULT_FILE
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:  # written atomically, so only a hand-edited file: train the cell again
        return None


def run_cell(
    config: StudyConfig, cell: Cell, reporter: Reporter = QuietReporter(), *, command: str | None = None
) -> dict[str, Any]:
    """Train ``cell`` in ``OUTPUT/cells/<name>`` and write its ``result.json``; returns the result.

    The result: the cell's coordinates (:meth:`Cell.describe`); for a pre-trained cell
    ``steps``, ``tokens``, ``minutes``, ``common`` (the final fixed-mask ``loss``,
    ``perplexity``, ``accuracy``, ``targets`` on the common masks), ``own`` (the same on its own
    masks, or None where they are the common ones) and ``curve`` (``step``, ``tokens``, ``loss``,
    ``accuracy`` at each evaluation); with fine-tuning, ``finetune`` (the final validation
    metrics and ``steps``).
    """
    from tokenmask.recipes.finetune import finetune
    from tokenmask.recipes.pretrain import pretrain

    folder, resume = config.output / CELLS / cell.name, config.base.loop.resume
    began = time.perf_counter()
    with cell_lock(folder):
        result: dict[str, Any] = cell.describe()
        if cell.strategy is not None:
            trained = pretrain(cell.config(config.base, folder / "pretrain", resume=resume), reporter, command=command)
            result.update(_pretrain_result(folder / "pretrain", trained.steps, trained.tokens))
            model = str(folder / "pretrain" / "model")
        else:
            model = baseline_model(config, cell.seed, folder / "untrained")
        if config.finetune is not None:
            run = replace(config.finetune.with_loop(output=str(folder / "finetune"), seed=cell.seed, resume=resume), model=model)
            tuned = finetune(run, reporter, command=command)
            result["finetune"] = {"steps": tuned.steps, "metric": tuned.metric, **tuned.final.metrics()}
        result.update(minutes=(time.perf_counter() - began) / 60, status="finished")
        write_json(folder / RESULT_FILE, result)
    return result


def _pretrain_result(folder: Path, steps: int, tokens: int) -> dict[str, Any]:
    evaluations = [r for r in read_metrics(folder) if "eval_loss" in r]
    final = evaluations[-1]
    common = {name: final[f"eval_{name}"] for name in _SCORES}
    own = {name: final[f"eval_own_{name}"] for name in _SCORES} if "eval_own_loss" in final else None
    curve = [
        {"step": r["step"], "tokens": r["tokens"], "loss": r["eval_loss"], "accuracy": r["eval_accuracy"]} for r in evaluations
    ]
    return {"steps": steps, "tokens": tokens, "common": common, "own": own, "curve": curve}


def baseline_model(config: StudyConfig, seed: int, folder: Path) -> str:
    """The model the cells start from, untrained: ``base.init`` itself, or a new ``preset`` model
    initialised as the cells of ``seed`` are (saved once to ``folder`` with its tokenizer)."""
    base = config.base
    if base.init:
        return base.init
    if not (folder / "config.json").exists():
        import torch

        from tokenmask.text.token_tables import require_mask_token
        from tokenmask.train.checkpoint import save_model
        from tokenmask.train.models import build_model, paired_tokenizer

        tokenizer = paired_tokenizer(None, base.tokenizer)
        require_mask_token(tokenizer)
        torch.manual_seed(seed)  # as the loop seeds before it builds a cell's model: the same weights
        model = build_model(
            base.preset, vocab_size=len(tokenizer), max_length=base.blocks.max_length, pad_token_id=tokenizer.pad_token_id
        )
        save_model(folder, model, tokenizer, card="")
    return str(folder)


def run_cells(
    config: StudyConfig, cells: Sequence[Cell], reporter: Reporter, *, command: str | None, on_result: OnResult
) -> None:
    """Train ``cells`` (``config.jobs`` at a time), calling ``on_result`` as each one finishes.

    Raises:
        ValueError: a cell failed (the others running are stopped first, each at a checkpoint).
    """
    every = config.cells()
    label = {cell.name: f"cell {number}/{len(every)} {cell.name}" for number, cell in enumerate(every, start=1)}
    if config.jobs == 1:
        for cell in cells:
            reporter.message(f"{label[cell.name]}: started")
            result = run_cell(config, cell, _Relay(reporter), command=command)
            reporter.message(finished_line(label[cell.name], result))
            on_result(result)
        return
    _run_in_processes(config, cells, reporter, command=command, on_result=on_result, label=label)


def finished_line(label: str, result: dict[str, Any]) -> str:
    """``cell 3/8 span-0.3-bert-seed0: done in 3.1 min; fixed-mask accuracy 0.1234 (own masks 0.1100); fine-tuned accuracy 0.7100``
    (``label`` is the part before the colon: the cell's place in the grid and its name)."""
    parts = [f"{label}: done in {result['minutes']:.1f} min"]
    if result.get("common"):
        own = f" (own masks {result['own']['accuracy']:.4f})" if result.get("own") else ""
        parts.append(f"fixed-mask accuracy {result['common']['accuracy']:.4f}{own}")
    if result.get("finetune"):
        parts.append(f"fine-tuned accuracy {result['finetune']['accuracy']:.4f}")
    return "; ".join(parts)


class _Relay:
    """A cell's progress bar and warnings, not its set-up lines (the study says what each cell is)."""

    def __init__(self, reporter: Reporter) -> None:
        self.reporter = reporter

    def message(self, text: str) -> None:
        if text.startswith(("warning", "resuming from")):
            self.reporter.message(text)

    def step(self, step: int, total: int | None, loss: float, tokens_per_s: float) -> None:
        self.reporter.step(step, total, loss, tokens_per_s)


def _run_in_processes(
    config: StudyConfig,
    cells: Sequence[Cell],
    reporter: Reporter,
    *,
    command: str | None,
    on_result: OnResult,
    label: dict[str, str],
) -> None:
    """Up to ``config.jobs`` cells at once, each in a spawned process with its share of the cores."""
    from multiprocessing.connection import wait

    context = multiprocessing.get_context("spawn")  # no forked torch or tokenizer threads
    threads = max(1, (os.cpu_count() or 1) // config.jobs)
    waiting = list(cells)
    running: dict[int, tuple[Any, Cell, Any]] = {}  # sentinel -> (process, cell, receiving end)
    try:
        while waiting or running:
            while waiting and len(running) < config.jobs:
                cell = waiting.pop(0)
                receiver, sender = context.Pipe(duplex=False)
                process = context.Process(target=_cell_process, args=(config, cell, command, threads, sender), daemon=False)
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
                reporter.message(finished_line(label[cell.name], outcome[1]))
                on_result(outcome[1])
    finally:
        for process, _, _ in running.values():
            if process.is_alive():
                process.terminate()  # SIGTERM: the cell's loop saves a checkpoint and stops
        for process, _, _ in running.values():
            process.join()


def _cell_process(config: StudyConfig, cell: Cell, command: str | None, threads: int, sender: Any) -> None:
    """A cell's process: stops with the study, trains on ``threads`` threads, sends its outcome."""
    _stop_with_parent()
    import torch

    from tokenmask.train.interrupt import Interrupted

    torch.set_num_threads(threads)
    try:
        outcome: tuple[str, Any] = ("done", run_cell(config, cell, command=command))
    except (ValueError, OSError, Interrupted) as error:
        outcome = ("error", str(error))
    with contextlib.suppress(OSError):  # the study may be gone
        sender.send(outcome)


def _stop_with_parent(poll_seconds: float = 1.0) -> None:
    """Send this process SIGTERM once, when the study's process is gone (even killed by SIGKILL),
    so no orphan trains on: the cell's loop then saves a checkpoint and stops (``--resume``
    continues it). A watching thread, not Linux's PR_SET_PDEATHSIG, which fires once per thread
    of a multi-threaded parent, and the loop takes a second signal as "stop now, unsaved"."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_seconds)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="stop-with-study", daemon=True).start()
