"""The plan of a sweep: its axes, the cells they cross into, and what an experiment tells the runner.

An experiment (the study, the augmentation comparison) declares its factors as :class:`Axis`
values; :func:`cross` turns them into :class:`Cell` s, each one run in its own folder. The
:class:`Experiment` protocol is everything :func:`tokenmask.experiments.sweep.run_sweep` needs to
know about one: its plan as JSON, its cells, how one runs, what its record says. A new factor
is one more axis, not new plumbing.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tokenmask.train.job import Reporter

RUN_KEYS = ("output", "resume", "overwrite")
"""Settings that say where and how a run goes, not what it trains: no part of a plan compared on resume."""


def replayable(settings: Mapping[str, Any]) -> dict[str, Any]:
    """A sweep's flat settings as its ``config.yaml`` keeps them: a replay goes where it is told
    (``--output``) but neither resumes nor overwrites unasked."""
    return {key: value for key, value in settings.items() if key not in ("resume", "overwrite")}


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
    OUTPUT, its ``coordinates``, the cells it starts ``after`` (it uses what they wrote:
    a fine-tuning cell, the model of a pre-training cell), and the fingerprints of the
    ``inputs`` it reads that the plan shares with no other cell (a study's terms cells and
    their fine-tunings: the terms file's), part of its identity only."""

    name: str
    folder: str
    coordinates: Coordinates
    after: tuple[str, ...] = ()
    inputs: Mapping[str, str] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        """The cell as the record lists it while pending: name and coordinates."""
        return {"name": self.name, **self.coordinates}


def cross(
    axes: Sequence[Axis],
    *,
    name: Callable[[Coordinates], str],
    folder: Callable[[Coordinates], str],
    derive: Callable[[Coordinates], Coordinates] | None = None,
    after: Callable[[Coordinates], tuple[str, ...]] | None = None,
) -> list[Cell]:
    """Every combination of the axes' values, the first axis slowest; ``name`` and ``folder``
    spell each cell's coordinates, ``derive`` adds coordinates computed from them (listed
    first), ``after`` names the cells each one waits for.

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
        cells.append(Cell(name(coordinates), folder(coordinates), coordinates, after(coordinates) if after else ()))
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
        """What the sweep runs, JSON-ready: a resumed sweep must have the same, but for the
        values of its ``growing`` axes."""
        ...

    @property
    def growing(self) -> tuple[tuple[str, ...], ...]:
        """Where :meth:`plan` lists the values of an axis a resumed sweep may change (paths of
        keys, ``("finetune", "seeds")``): more seeds, another budget or rate. Each cell's result
        depends on its coordinates and the rest of the plan only, so the finished cells stay."""
        ...

    def settings(self) -> dict[str, Any]:
        """The flat settings that replay the sweep (written to ``OUTPUT/config.yaml``)."""
        ...

    def cells(self) -> list[Cell]: ...

    def former_identities(self, record: Mapping[str, Any]) -> Mapping[str, Set[str]]:
        """The identities an earlier tokenmask gave cells that are the same runs today, by cell
        name, for a sweep continuing ``record``: a marker carrying one counts, and is given the
        cell's identity of today. ``{}``: identities never changed."""
        ...

    def load(self) -> Any:
        """What every cell needs, read once in each process that runs cells (the comparison's
        encoded data; None for none). Bad input fails here, before anything is written."""
        ...

    def introduce(self, loaded: Any, finished: int) -> str:
        """The sweep's first lines: what was read, the plan in words, ``finished`` cells read back."""
        ...

    def forecast(self, loaded: Any, pending: Sequence[Cell], output: Path) -> str:
        """How long the ``pending`` cells will take, said before they start (``""``: no forecast);
        may measure in a temporary folder and keep what it measured in ``output``."""
        ...

    def run_cell(
        self, cell: Cell, folder: Path, reporter: Reporter, *, loaded: Any, resume: bool, command: str | None
    ) -> dict[str, Any]:
        """Run ``cell`` in ``folder`` with what :meth:`load` gave; returns its result (JSON-ready).
        ``resume``: its runs continue from their checkpoints."""
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
        if self.jobs < 1:
            raise ValueError(f"jobs must be >= 1; got {self.jobs}")

    @property
    def continues(self) -> bool:
        """Whether finished cells are read back and the others' runs resume (``overwrite`` wins over ``resume``)."""
        return self.resume and not self.overwrite


def plan_digest(plan: Mapping[str, Any]) -> str:
    """A short fingerprint of a plan, which every finished cell's marker carries: ``"3f2a9c…"`` (16 hex digits)."""
    return hashlib.sha256(json.dumps(plan, sort_keys=True).encode("utf-8")).hexdigest()[:16]


def shared_plan(plan: Mapping[str, Any], growing: Sequence[Sequence[str]]) -> dict[str, Any]:
    """``plan`` without the entries at the ``growing`` paths (those absent are skipped): what
    every cell depends on, beside its own coordinates.

    ``shared_plan({"grid": {"seeds": 3, "rates": [0.15]}, "lr": 1}, [("grid", "seeds")])``
    -> ``{"grid": {"rates": [0.15]}, "lr": 1}``.
    """
    shared = json.loads(json.dumps(plan))  # a deep copy, as JSON sees it
    for path in growing:
        entry = shared
        for key in path[:-1]:
            entry = entry.get(key) if isinstance(entry, dict) else None
        if isinstance(entry, dict):
            entry.pop(path[-1], None)
    return shared


def shared_part(experiment: Experiment) -> dict[str, Any]:
    """``experiment``'s plan without its ``growing`` entries (:func:`shared_plan`)."""
    return shared_plan(experiment.plan(), experiment.growing)


def cell_digest(shared: Mapping[str, Any], cell: Cell) -> str:
    """What a finished cell's marker carries: the digest of its coordinates, its ``inputs`` (if
    any) and the plan's ``shared`` part (:func:`shared_part`). It stays valid while they do, so a
    resumed sweep may grow an axis (three more seeds, another strategy) and keep every cell
    already finished."""
    identity: dict[str, Any] = {"plan": shared, "cell": dict(cell.coordinates)}
    if cell.inputs:  # a cell without inputs keeps the identity it had before cells had them
        identity["inputs"] = dict(cell.inputs)
    return plan_digest(identity)


def check_axis(name: str, values: Sequence[Any], good: Callable[[Any], bool], allowed: str) -> None:
    """Refuse an axis with no value, a value not ``good``, or a value given twice.

    ``check_axis("rates", (0.15, 2.0), lambda r: 0 < r <= 1, "in (0, 1]")`` ->
    ``ValueError: rates must be in (0, 1]; got 2.0``.
    """
    if not values:
        raise ValueError(f"the grid is empty: give at least one value for {name}")
    for value in values:
        if not good(value):
            raise ValueError(f"{name} must be {allowed}; got {value!r}")
    if len(set(values)) != len(values):
        raise ValueError(f"{name}: each value once, please; got {', '.join(map(str, values))}")
