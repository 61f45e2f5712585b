"""How long a study will take, before it starts: a few real steps of each kind of run, timed, then arithmetic.

:func:`measure_pace` runs a short pre-training (the study's first cell, a few steps) and a short
fine-tuning (the starting model on a few examples) in a temporary folder, through the same
recipes the cells use, and reads their ``metrics.jsonl``: seconds per step, seconds per
evaluation, and the rest (loading, saving) per run. :func:`cell_seconds` turns a
:class:`Pace` into each pending cell's time; nothing here guesses a speed it did not measure.
The numbers are for this machine, now: a busy machine measures slower.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from tokenmask.experiments.downstream_stats import FINETUNE
from tokenmask.experiments.plan import Cell

if TYPE_CHECKING:
    from tokenmask.experiments.compare_data import CompareData
    from tokenmask.experiments.downstream import DownstreamPlan
    from tokenmask.recipes.config import PretrainConfig
    from tokenmask.train.config import LoopConfig

PACE_FILE = "pace.json"
"""OUTPUT/pace.json: the pace measured when the study first started, with the machine and the
time (a resumed study on the same machine reuses it)."""

PROBE_STEPS = 24
"""Steps of each probe run: the first :data:`PROBE_SETTLE` are set apart, the others give the pace."""

PROBE_SETTLE = 4
"""The probe's first steps, set apart from its pace: the first holds the evaluation at the start,
and the next ones run slower while the process warms up (their extra time counts as the run's rest)."""


class PlannedStudy(Protocol):
    """What a forecast needs of a study (:class:`~tokenmask.experiments.study.StudyConfig`)."""

    @property
    def base(self) -> PretrainConfig: ...
    @property
    def downstream(self) -> DownstreamPlan: ...
    @property
    def terms_file(self) -> str | None: ...
    @property
    def jobs(self) -> int: ...


@dataclass(frozen=True)
class RunPace:
    """One kind of run, measured: ``step`` seconds per optimizer step and ``tokens`` per step,
    ``evaluation`` seconds per evaluation, ``rest`` seconds of everything else in a run (start, save)."""

    step: float
    tokens: float
    evaluation: float
    rest: float

    @classmethod
    def of(cls, records: Sequence[Mapping[str, Any]], wall: float, *, settle: int = PROBE_SETTLE) -> RunPace:
        """From a probe run's ``metrics.jsonl`` records and its wall time in seconds, the pace
        timed from the end of step ``settle`` (by default :data:`PROBE_SETTLE`) to the last step.

        Step records carry ``seconds`` since the start, the first evaluation included. Steps 1,
        2 and 6 at 4.0 s, 5.0 s and 7.0 s, tokens 100, 200 and 600, wall 12.0 s, ``settle=2``:
        a step takes (7.0 − 5.0) / 4 = 0.5 s (100 tokens), the first evaluation 4.0 − 0.5 =
        3.5 s, and the rest, what 6 steps and two evaluations (the final one taken as long as
        the first) leave of the wall time, 12.0 − 3.0 − 7.0 = 2.0 s: step 2's extra half second
        is in it. Never below 0.
        """
        steps = [r for r in records if "loss" in r and "seconds" in r]
        # a run shorter than ``settle`` steps is timed over its last step (its only step: 0 s)
        first, timed, last = steps[0], steps[max(0, min(settle, len(steps) - 1) - 1)], steps[-1]
        count = max(1, last["step"] - timed["step"])
        step = (last["seconds"] - timed["seconds"]) / count
        tokens = (last["tokens"] - timed["tokens"]) / count
        evaluation = max(0.0, first["seconds"] - step)
        rest = max(0.0, wall - last["step"] * step - 2 * evaluation)
        return cls(step=step, tokens=tokens, evaluation=evaluation, rest=rest)


@dataclass(frozen=True)
class Pace:
    """The measured pace of a study's two kinds of run (``pretrain`` None when it had no
    pre-training to run; ``rate``: the masking rate the pre-training was measured at)."""

    pretrain: RunPace | None
    finetune: RunPace | None
    rate: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"pretrain": _as_dict(self.pretrain), "finetune": _as_dict(self.finetune), "rate": self.rate}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Pace:
        pretrain, finetune = (RunPace(**data[kind]) if data.get(kind) else None for kind in ("pretrain", "finetune"))
        return cls(pretrain, finetune, rate=data.get("rate"))

    def covers(self, cells: Sequence[Cell]) -> bool:
        """Whether this pace times every kind of run in ``cells``: fine-tuning, and pre-training
        at a rate no higher than the one measured (a higher rate predicts more targets, so takes longer)."""
        if any(c.coordinates.get("role") == FINETUNE for c in cells) and self.finetune is None:
            return False
        rates = [float(c.coordinates["rate"]) for c in _pretraining(cells)]
        return not rates or (self.pretrain is not None and self.rate is not None and max(rates) <= self.rate)


def _pretraining(cells: Sequence[Cell]) -> list[Cell]:
    """The cells of ``cells`` that pre-train (neither fine-tunings nor baselines)."""
    return [c for c in cells if c.coordinates.get("role") != FINETUNE and c.coordinates.get("strategy")]


def _as_dict(pace: RunPace | None) -> dict[str, float] | None:
    return asdict(pace) if pace is not None else None


def cell_seconds(cell: Cell, config: PlannedStudy, pace: Pace) -> float:
    """The seconds ``cell`` should take at ``pace``.

    A pre-training cell: its step or token limit at the measured pace, plus an evaluation at the
    start, every ``eval_every`` steps and at the end, plus the rest; a fine-tuning cell: its
    steps, the evaluation at its end and one per corrupted set, plus the rest; a
    baseline cell: nothing measurable (0).
    """
    role = cell.coordinates.get("role")
    if role == FINETUNE and pace.finetune is not None:
        run = pace.finetune
        evaluations = 1 + len(config.downstream.corruption_sets)  # at the end (none at the start), and each corrupted set
        training = config.downstream.finetune_max_steps * run.step
        if config.downstream.finetune_max_time is not None:
            training = min(training, config.downstream.finetune_max_time * 60)
        return training + evaluations * run.evaluation + run.rest
    if cell.coordinates.get("strategy") is None or pace.pretrain is None:
        return 0.0
    run, loop = pace.pretrain, config.base.loop
    limits = [loop.max_steps or float("inf")]
    if loop.max_tokens is not None and run.tokens > 0:
        limits.append(loop.max_tokens / run.tokens)
    if loop.max_time is not None and run.step > 0:
        limits.append(loop.max_time * 60 / run.step)
    steps = min(limits)
    evaluations = 2 + int(steps // loop.eval_every)
    return steps * run.step + evaluations * run.evaluation + run.rest


def forecast(config: PlannedStudy, data: CompareData | None, pending: Sequence[Cell], output: Path, *, plan: str) -> str:
    """:func:`forecast_line` for the ``pending`` cells, at the pace :func:`measure_pace` measures
    here when the study first starts; kept in ``OUTPUT/pace.json`` with the digest of the plan's
    shared part, and read back by the study's resumes while it times every kind of run they have
    left (:meth:`Pace.covers`: a grown study may add pre-training, or a higher rate). A pace of
    another plan, left by a study refused at its start, is measured again."""
    from tokenmask.files import write_json

    path = output / PACE_FILE
    saved = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    machine = this_machine()
    kept = kept_pace(saved, plan=plan, machine=machine, pending=pending)
    if kept is not None:
        pace, measured = kept
    else:
        pace, measured = measure_pace(config, data, pending), None
        output.mkdir(parents=True, exist_ok=True)
        write_json(path, {"plan": plan, "machine": machine, "measured": time.strftime("%Y-%m-%d %H:%M"), **pace.to_dict()})
    return forecast_line(pending, config, pace, cores=os.cpu_count() or 1, measured=measured)


def kept_pace(saved: Mapping[str, Any], *, plan: str, machine: str, pending: Sequence[Cell]) -> tuple[Pace, str] | None:
    """The pace in a study's ``pace.json`` (``saved``) and when it was measured, if a resume may
    forecast with it: measured for the same ``plan``, on the same ``machine`` (a study moved to
    another machine, or a file from before the machine was kept, is timed again) and timing
    every kind of run ``pending`` (:meth:`Pace.covers`); else None."""
    if saved.get("plan") != plan or saved.get("machine") != machine:
        return None
    pace = Pace.from_dict(saved)
    return (pace, str(saved.get("measured", "?"))) if pace.covers(pending) else None


def this_machine() -> str:
    """What sets the pace here, in words: ``"AMD EPYC 9R14, 2 cores"`` (`` + NVIDIA H200`` with a
    GPU). The processor's model comes from ``/proc/cpuinfo`` where there is one."""
    import platform

    import torch

    model = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        names = [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines() if line.startswith("model name")]
        model = names[0] if names else model
    gpu = f" + {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else ""
    return f"{model}, {os.cpu_count() or 1} cores{gpu}"


def forecast_line(cells: Sequence[Cell], config: PlannedStudy, pace: Pace, *, cores: int, measured: str | None = None) -> str:
    """``"about 87 min for 39 cells (measured here: pre-training 3,100 tokens/s, fine-tuning 0.52 s a step, …)"``;
    ``measured here on 2026-12-04 09:17`` for a pace kept from that time (``measured``)."""
    seconds = sum(cell_seconds(cell, config, pace) for cell in cells)
    pace_words = []
    if pace.pretrain is not None:
        pace_words.append(f"pre-training {pace.pretrain.tokens / max(pace.pretrain.step, 1e-9):,.0f} tokens/s")
    if pace.finetune is not None:
        pace_words.append(
            f"fine-tuning {pace.finetune.step:.2f} s a step and {pace.finetune.evaluation:.0f} s an evaluation of the held-out set"
        )
    jobs = (
        f"; that is one cell after another: --jobs {config.jobs} on {cores} cores takes at most about as long"
        if config.jobs > 1
        else ""
    )
    took = f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"
    when = f" on {measured}" if measured else ""
    return f"about {took} for {len(cells)} cells (measured here{when}: {', '.join(pace_words)}){jobs}"


def measure_pace(config: PlannedStudy, data: CompareData | None, cells: Sequence[Cell]) -> Pace:
    """Time :data:`PROBE_STEPS` steps of the first pending pre-training cell's run and of a
    fine-tuning of the starting model (on ``data``, at the first augmentation rate), each in a
    temporary folder; the block cache it fills is the cells' own."""
    from tokenmask.experiments.study_grid import cell_config
    from tokenmask.recipes.pretrain import pretrain
    from tokenmask.train.logs import read_metrics

    pretraining = max(  # the slowest cells: replaced-token detection (two models), at the highest rate (more targets)
        _pretraining(cells), key=lambda c: (c.coordinates.get("objective") == "rtd", float(c.coordinates["rate"])), default=None
    )
    with tempfile.TemporaryDirectory(prefix="tokenmask-pace-") as folder:
        pretrain_pace = finetune_pace = None
        if pretraining is not None:
            run = cell_config(config.base, pretraining.coordinates, Path(folder) / "pretrain", terms=config.terms_file)
            run = replace(run, loop=_probe(run.loop))
            began = time.perf_counter()
            pretrain(run)
            pretrain_pace = RunPace.of(read_metrics(Path(folder) / "pretrain"), time.perf_counter() - began)
        if data is not None and any(c.coordinates.get("role") == FINETUNE for c in cells):
            finetune_pace = _finetune_pace(config, data, Path(folder))
    return Pace(pretrain_pace, finetune_pace, rate=float(pretraining.coordinates["rate"]) if pretraining else None)


def _probe(loop: LoopConfig) -> LoopConfig:
    """``loop`` for a probe: :data:`PROBE_STEPS` steps, no evaluation but the first (whose time
    the first step's then holds, for :meth:`RunPace.of` to set apart), no checkpoint, no snapshot,
    no tracker, and no head-only warm-up: steps that train the head alone take about half the
    time of the run's others (the continued-pre-training recipe's first 30), and a probe made
    of them measured MiniLM at twice its pace."""
    return replace(
        loop, max_steps=PROBE_STEPS, max_tokens=None, max_time=None, eval_every=10**6, eval_at_start=True,
        save_every=10**6, snapshots=(), report_to="none", head_warmup_steps=0,
    )  # fmt: skip


def _finetune_pace(config: PlannedStudy, data: CompareData, folder: Path) -> RunPace:
    from tokenmask.experiments.downstream import baseline_model
    from tokenmask.recipes.finetune import finetune
    from tokenmask.train.logs import read_metrics

    base, downstream = config.base, config.downstream
    model = baseline_model(base, base.loop.seed, folder / "untrained")
    tuning = downstream.finetune_config(base)
    loop = replace(_probe(tuning.loop), output=str(folder / "finetune"), seed=base.loop.seed)
    run = replace(tuning, loop=loop, model=model, augment_rate=downstream.augment_rates[0])
    began = time.perf_counter()
    finetune(run, data=data.training(PROBE_STEPS * loop.batch_size, base.loop.seed))
    return RunPace.of(read_metrics(folder / "finetune"), time.perf_counter() - began)
