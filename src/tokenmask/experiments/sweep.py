"""The sweep runner: a typed plan of cells, each run once in its own folder, resumable, one record.

Every experiment (the study, the augmentation comparison) is an
:class:`~tokenmask.experiments.plan.Experiment`: a plan (JSON, what the sweep runs), its cells
(crossed from declared :class:`~tokenmask.experiments.plan.Axis` values), and how one cell runs
(:mod:`tokenmask.experiments.plan`). :func:`run_sweep` does the rest the same way for all:

- **one resume rule**: ``OUTPUT/<record>`` holds the plan; a resumed sweep must have the same
  one (:func:`plan_differences` names what differs) but for the values of the axes it may grow
  (more seeds, another label budget: the experiment's ``growing`` entries); finished cells are
  read back (markers of an earlier tokenmask's identities given today's, once what every cell
  needs has loaded), an interrupted one continues (its runs resume from their checkpoints), the
  others start;
- **one finished-cell marker**, **jobs** and **one relay** of progress: how cells run
  (:mod:`tokenmask.experiments.cells`): ``<cell folder>/cell.json`` written last and
  atomically, carrying the cell's identity (its coordinates and the plan's shared part);
  cells one after another here, or ``jobs`` at once in processes of their own;
- **one record**: ``OUTPUT/<record>`` (``study.json``, ``compare.json``) rewritten after every
  cell: the plan, every cell (its result, or its coordinates while pending), ``complete``,
  and the experiment's summary of what finished; and ``OUTPUT/config.yaml``, the settings
  that replay the sweep (``--config``).

A new factor of an experiment is one more axis in its declaration (and the cell reading its
coordinate), not new plumbing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tokenmask.experiments.cells import MARKER, read_marker, run_cells
from tokenmask.experiments.plan import Cell, Experiment, SweepRun, cell_digest, plan_digest, shared_part, shared_plan
from tokenmask.files import write_json
from tokenmask.train.interrupt import Interrupted, StopSignals
from tokenmask.train.job import QuietReporter, Reporter

SETTINGS_FILE = "config.yaml"
"""The settings that replay a sweep (``--config OUTPUT/config.yaml``), as a run's."""


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
    continued = check_folder(output, experiment, resume=run.continues, overwrite=run.overwrite)
    loaded = experiment.load()
    shared, earlier, older, results = shared_part(experiment), _older_plans(experiment, continued), [], {}
    former = experiment.former_identities(continued) if continued is not None else {}
    upgraded: list[Cell] = []  # markers given today's identity, written once every marker is read
    for cell in cells if run.continues else ():
        identity = cell_digest(shared, cell)
        done = read_marker(output / cell.folder, identity, earlier=earlier, former=former.get(cell.name, frozenset()))
        if done is not None and done.get("identity") != identity:  # older, or a former identity: today's from now on
            if "identity" not in done:
                older = earlier  # others may be in cells this plan leaves out, for a later resume to find
            done = {key: value for key, value in done.items() if key != "plan"} | {"identity": identity}
            upgraded.append(cell)
        if done is not None:
            results[cell.name] = done
    for cell in upgraded:  # a refused marker above left the folder as it was
        write_json(output / cell.folder / MARKER, results[cell.name])
    older = older or earlier[:-1]  # those the record kept already
    reporter.message(experiment.introduce(loaded, len(results)))
    grown = plan_differences(continued["plan"], experiment.plan()) if continued is not None else ""
    if grown:
        left = len(cells) - len(results)
        reporter.message(f"the plan changed along its axes ({grown}): {left} cell{'s' * (left != 1)} to run")
    fresh = not (output / experiment.record_file).exists() or run.overwrite
    record = _Record(output, experiment, cells, results, older_plans=older)
    record.write()
    from tokenmask.train.runs import write_settings  # torch comes with it: not at import, which --help does

    write_settings(output / SETTINGS_FILE, experiment.settings())
    pending = [cell for cell in cells if cell.name not in results]
    try:
        with StopSignals() as signals:  # from the forecast's probes on: a signal stops the sweep, never the process
            try:
                forecast = experiment.forecast(loaded, pending, output) if pending else ""
            except Interrupted as stop:  # in a probe run: its checkpoint went with its temporary folder
                raise Interrupted(stop.signal_number) from None
            if forecast:
                reporter.message(forecast)
            if signals.received is not None:
                raise Interrupted(signals.received)
            run_cells(experiment, run, pending, cells, reporter, loaded=loaded, command=command, on_result=record.add)
    except (ValueError, OSError):
        if fresh and not results:  # bad input (a corpus path, a tokenizer): the corrected command needs no --resume
            for name in (experiment.record_file, SETTINGS_FILE):
                (output / name).unlink(missing_ok=True)
        raise
    return record.write()


def _older_plans(experiment: Experiment, continued: Mapping[str, Any] | None) -> list[str]:
    """The digests of the whole plans a continued sweep ran under (its record keeps them as
    ``older_plans``, the saved plan's last): markers written before markers carried the cell's
    identity carry one of these. A sweep without a record: the plan given."""
    if continued is None:
        return [plan_digest(experiment.plan())]
    kept = continued.get("older_plans", [])
    return [*(d for d in kept if isinstance(d, str)), plan_digest(continued["plan"])]


class _Record:
    """``OUTPUT/<record>``: the plan, every cell in plan order (result or pending), the summary,
    and the plans whose older markers may still be in the folder."""

    def __init__(
        self, output: Path, experiment: Experiment, cells: Sequence[Cell], results: dict[str, dict[str, Any]], *,
        older_plans: Sequence[str] = (),
    ) -> None:  # fmt: skip
        self.output, self.experiment, self.cells, self.results = output, experiment, cells, results
        self.older_plans = list(dict.fromkeys(older_plans))

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
        if self.older_plans:
            content["older_plans"] = self.older_plans
        write_json(self.output / self.experiment.record_file, content)
        return content


def check_folder(output: Path, experiment: Experiment, *, resume: bool, overwrite: bool = False) -> dict[str, Any] | None:
    """Refuse a folder the sweep must not write to; nothing is changed. Returns the record of
    the sweep ``output`` holds, which ``experiment`` continues (None: it starts afresh).

    Raises:
        ValueError: ``output`` holds a single run or another kind of sweep (a ``config.yaml``
            without this sweep's record); holds this kind of sweep and neither ``resume`` nor
            ``overwrite`` is set; or holds one of another plan, beyond the values of the
            experiment's ``growing`` axes (the message names what differs, e.g.
            ``grid (rates), settings (lr)``).
    """
    path = output / experiment.record_file
    if (output / SETTINGS_FILE).exists() and not path.exists():
        raise ValueError(f"{output} holds a single run or another experiment, not a {experiment.kind}: choose another --output")
    if not path.exists() or overwrite:
        return None
    if not resume:
        raise ValueError(f"{output} already holds a {experiment.kind}: pass --resume to continue it, or choose another --output")
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(record["plan"], dict):
            raise TypeError
    except (json.JSONDecodeError, KeyError, TypeError):
        raise ValueError(f"{path} is not a {experiment.kind} record: choose another --output") from None
    differences = plan_differences(shared_plan(record["plan"], experiment.growing), shared_part(experiment))
    if differences:
        raise ValueError(
            f"--resume: {output} holds a {experiment.kind} of another plan ({differences}): "
            "rerun with its settings, or choose another --output"
        )
    return record


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
