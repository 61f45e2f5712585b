"""The sweep runner on a made-up experiment (no training): cells, record, marker, resume rule, clean-up."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from multiprocessing import resource_tracker
from pathlib import Path
from typing import Any

import pytest
import yaml

from tokenmask.experiments.cells import MARKER, read_marker
from tokenmask.experiments.plan import Axis, Cell, SweepRun, cell_digest, cross, plan_digest, shared_part, shared_plan
from tokenmask.experiments.sweep import run_sweep
from tokenmask.train.interrupt import Interrupted, StopSignals


@dataclass(frozen=True)
class Squares:
    """Each cell squares its number; ``fail`` names a cell that raises, as bad input would."""

    numbers: tuple[int, ...] = (1, 2, 3)
    offset: int = 0
    fail: int | None = None
    former: dict[str, set[str]] = field(default_factory=dict, compare=False)
    refuse_input: bool = False
    ran: list[int] = field(default_factory=list, compare=False)
    kind: str = "squares"
    record_file: str = "squares.json"

    def plan(self) -> dict[str, Any]:
        return {"numbers": list(self.numbers), "offset": self.offset}

    @property
    def growing(self) -> tuple[tuple[str, ...], ...]:
        return (("numbers",),)

    def settings(self) -> dict[str, Any]:
        return {"numbers": list(self.numbers), "resume": True}

    def cells(self) -> list[Cell]:
        return cross(
            [Axis("n", self.numbers), Axis("seed", (0,))], name=lambda c: f"n{c['n']}", folder=lambda c: f"cells/n{c['n']}"
        )

    def former_identities(self, record: Any) -> dict[str, set[str]]:
        return self.former

    def load(self) -> int:
        if self.refuse_input:
            raise ValueError("the input is bad")
        return 10

    def introduce(self, loaded: int, finished: int) -> str:
        return f"{len(self.numbers)} squares, {finished} kept"

    def forecast(self, loaded: int, pending: Any, output: Path) -> str:
        return f"{len(pending)} to square"

    def run_cell(self, cell: Cell, folder: Path, reporter: Any, *, loaded: int, resume: bool, command: str | None) -> dict:
        if cell.coordinates["n"] == self.fail:
            raise ValueError(f"cell {cell.name} refused its input")
        self.ran.append(cell.coordinates["n"])
        return {**cell.coordinates, "square": cell.coordinates["n"] ** 2 + loaded - 10 + self.offset}

    def finished_line(self, result: Any) -> str:
        return f"square {result['square']}"

    def summary(self, finished: Any) -> dict[str, Any]:
        return {"total": sum(r["square"] for r in finished)}


def test_cross_takes_the_first_axis_slowest_and_merges_mapping_values():
    cells = cross(
        [Axis("rate", (0.1, 0.2)), Axis("arm", ({"arm": "a", "x": 1}, {"arm": "b", "x": 2}))],
        name=lambda c: f"{c['rate']}-{c['arm']}", folder=lambda c: f"f/{c['arm']}",
    )  # fmt: skip
    assert [c.name for c in cells] == ["0.1-a", "0.1-b", "0.2-a", "0.2-b"]
    assert cells[1].coordinates == {"rate": 0.1, "arm": "b", "x": 2} and cells[1].folder == "f/b"


def test_a_sweep_runs_every_cell_and_records_them(tmp_path):
    experiment = Squares()
    record = run_sweep(experiment, SweepRun(tmp_path))
    assert record["complete"] and record["kind"] == "squares" and record["total"] == 1 + 4 + 9
    assert [c["square"] for c in record["cells"]] == [1, 4, 9] and experiment.ran == [1, 2, 3]
    assert json.loads((tmp_path / "squares.json").read_text()) == record
    marker = json.loads((tmp_path / "cells" / "n2" / MARKER).read_text())
    assert marker == record["cells"][1] and marker["identity"] == cell_digest(shared_part(experiment), experiment.cells()[1])
    assert yaml.safe_load((tmp_path / "config.yaml").read_text()) == {"numbers": [1, 2, 3], "resume": True}


def test_a_resumed_sweep_keeps_finished_cells_and_runs_the_others(tmp_path):
    with pytest.raises(ValueError, match="cell n3 refused"):
        run_sweep(Squares(fail=3), SweepRun(tmp_path))
    partial = json.loads((tmp_path / "squares.json").read_text())
    assert not partial["complete"] and [c["status"] for c in partial["cells"]] == ["finished", "finished", "pending"]
    with pytest.raises(ValueError, match="already holds a squares: pass --resume"):
        run_sweep(Squares(), SweepRun(tmp_path))
    again = Squares()
    assert run_sweep(again, SweepRun(tmp_path, resume=True))["complete"] and again.ran == [3]
    with pytest.raises(ValueError, match=r"holds a squares of another plan \(offset\)"):
        run_sweep(Squares(offset=1), SweepRun(tmp_path, resume=True))
    everything = Squares()
    run_sweep(everything, SweepRun(tmp_path, resume=True, overwrite=True))
    assert everything.ran == [1, 2, 3]  # --overwrite: every cell again


def test_a_resumed_sweep_may_grow_an_axis_and_keeps_the_finished_cells(tmp_path):
    run_sweep(Squares(), SweepRun(tmp_path))
    grown, said = Squares(numbers=(1, 2, 3, 4)), Said()
    record = run_sweep(grown, SweepRun(tmp_path, resume=True), said)
    assert grown.ran == [4] and record["complete"] and record["total"] == 1 + 4 + 9 + 16
    assert "the plan changed along its axes (numbers): 1 cell to run" in said.lines
    fewer = Squares(numbers=(2, 4))
    assert run_sweep(fewer, SweepRun(tmp_path, resume=True))["total"] == 4 + 16 and fewer.ran == []
    assert json.loads((tmp_path / "squares.json").read_text())["plan"]["numbers"] == [2, 4]


def test_a_marker_from_before_cell_identities_counts_under_the_plan_it_was_written_with(tmp_path):
    experiment = Squares()
    run_sweep(experiment, SweepRun(tmp_path))
    marker = tmp_path / "cells" / "n2" / MARKER
    old = {k: v for k, v in json.loads(marker.read_text()).items() if k != "identity"}
    marker.write_text(json.dumps({**old, "plan": plan_digest(experiment.plan())}))
    grown = Squares(numbers=(1, 2, 3, 4))
    assert run_sweep(grown, SweepRun(tmp_path, resume=True))["complete"] and grown.ran == [4]
    assert json.loads(marker.read_text())["identity"] == cell_digest(shared_part(experiment), experiment.cells()[1])  # upgraded
    back = Squares()
    assert run_sweep(back, SweepRun(tmp_path, resume=True))["complete"] and back.ran == []  # still counts
    marker.write_text(json.dumps({**old, "plan": plan_digest(experiment.plan())}))
    (tmp_path / "squares.json").unlink()  # no record: an older marker counts under the plan given
    (tmp_path / "config.yaml").unlink()
    again = Squares()
    assert run_sweep(again, SweepRun(tmp_path, resume=True))["complete"] and again.ran == []
    third = tmp_path / "cells" / "n3" / MARKER  # an older marker in a cell the next plan leaves out
    upgraded = {k: v for k, v in json.loads(third.read_text()).items() if k != "identity"}
    third.write_text(json.dumps({**upgraded, "plan": plan_digest(experiment.plan())}))
    marker.write_text(json.dumps({**old, "plan": plan_digest(experiment.plan())}))
    fewer = Squares(numbers=(1, 2))
    assert run_sweep(fewer, SweepRun(tmp_path, resume=True))["older_plans"] == [plan_digest(experiment.plan())]
    back = Squares()
    assert run_sweep(back, SweepRun(tmp_path, resume=True))["complete"] and back.ran == []  # n3 still counts
    marker.write_text(json.dumps({**old, "plan": "another"}))
    with pytest.raises(ValueError, match="n2/cell.json was written by a sweep of another plan"):
        run_sweep(Squares(), SweepRun(tmp_path, resume=True))


def test_a_marker_of_a_former_identity_counts_once_the_input_has_loaded_and_is_given_todays(tmp_path):
    experiment = Squares()
    run_sweep(experiment, SweepRun(tmp_path))
    marker = tmp_path / "cells" / "n2" / MARKER
    today = json.loads(marker.read_text())
    marker.write_text(json.dumps({**today, "identity": "0123456789abcdef"}))  # as an earlier tokenmask wrote it
    written = marker.read_text()
    with pytest.raises(ValueError, match="the input is bad"):
        run_sweep(Squares(former={"n2": {"0123456789abcdef"}}, refuse_input=True), SweepRun(tmp_path, resume=True))
    assert marker.read_text() == written  # refused first: the folder is as it was
    with pytest.raises(ValueError, match="n2/cell.json was written by a sweep of another plan"):
        run_sweep(Squares(former={"n1": {"0123456789abcdef"}}), SweepRun(tmp_path, resume=True))  # another cell's
    third = tmp_path / "cells" / "n3" / MARKER
    kept = third.read_text()
    third.write_text(json.dumps({**json.loads(kept), "identity": "fedcba9876543210"}))  # another sweep's
    with pytest.raises(ValueError, match="n3/cell.json was written by a sweep of another plan"):
        run_sweep(Squares(former={"n2": {"0123456789abcdef"}}), SweepRun(tmp_path, resume=True))
    assert marker.read_text() == written  # n3 refused: n2 not upgraded either
    third.write_text(kept)
    again = Squares(former={"n2": {"0123456789abcdef"}})
    record = run_sweep(again, SweepRun(tmp_path, resume=True))
    assert again.ran == [] and record["complete"] and "older_plans" not in record
    assert json.loads(marker.read_text()) == today  # today's identity from now on
    plain = Squares()
    assert run_sweep(plain, SweepRun(tmp_path, resume=True))["complete"] and plain.ran == []  # no former identity needed now


def test_a_new_sweep_refused_by_its_first_cell_leaves_no_record(tmp_path):
    with pytest.raises(ValueError, match="cell n1 refused"):
        run_sweep(Squares(fail=1), SweepRun(tmp_path))
    assert not (tmp_path / "squares.json").exists() and not (tmp_path / "config.yaml").exists()
    run_sweep(Squares(), SweepRun(tmp_path))  # the corrected command needs no --resume


def test_a_marker_of_another_cell_identity_is_refused(tmp_path):
    folder = tmp_path / "cell"
    folder.mkdir()
    assert read_marker(folder, "abc") is None
    (folder / MARKER).write_text(json.dumps({"name": "n1", "identity": "other"}))
    with pytest.raises(ValueError, match="written by a sweep of another plan"):
        read_marker(folder, "abc", earlier="other")  # the plan's digest is no cell's identity
    assert read_marker(folder, "other") == {"name": "n1", "identity": "other"}


def test_the_shared_plan_leaves_out_the_growing_axes_only():
    plan = {"grid": {"seeds": 3, "rates": [0.15]}, "finetune": None, "lr": 1}
    shared = shared_plan(plan, [("grid", "seeds"), ("finetune", "seeds"), ("absent",)])
    assert shared == {"grid": {"rates": [0.15]}, "finetune": None, "lr": 1} and plan["grid"]["seeds"] == 3


def test_a_run_folder_is_not_taken_for_a_sweep(tmp_path):
    (tmp_path / "config.yaml").write_text("lr: 1\n")
    with pytest.raises(ValueError, match="holds a single run or another experiment, not a squares"):
        run_sweep(Squares(), SweepRun(tmp_path, resume=True))


class Said:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def message(self, text: str) -> None:
        self.lines.append(text)

    def step(self, *args: Any) -> None:
        pass


def test_the_forecast_is_said_before_the_cells_and_only_for_cells_left(tmp_path):
    said = Said()
    run_sweep(Squares(), SweepRun(tmp_path), said)
    assert said.lines[:3] == ["3 squares, 0 kept", "3 to square", "cell 1/3 n1: started"]
    again = Said()
    run_sweep(Squares(), SweepRun(tmp_path, resume=True), again)
    assert again.lines == ["3 squares, 3 kept"]


@dataclass(frozen=True)
class Chain:
    """``second`` reads what ``first`` wrote, slowly: run side by side, it would find nothing."""

    kind: str = "chain"
    record_file: str = "chain.json"

    def plan(self) -> dict[str, Any]:
        return {}

    growing: tuple[tuple[str, ...], ...] = ()

    def settings(self) -> dict[str, Any]:
        return {}

    def cells(self) -> list[Cell]:
        return [Cell("first", "first", {"n": 1}), Cell("second", "second", {"n": 2}, after=("first",))]

    def former_identities(self, record: Any) -> dict[str, set[str]]:
        return {}

    def load(self) -> None:
        return None

    def introduce(self, loaded: None, finished: int) -> str:
        return "chain"

    def forecast(self, loaded: None, pending: Any, output: Path) -> str:
        return ""

    def run_cell(self, cell: Cell, folder: Path, reporter: Any, *, loaded: None, resume: bool, command: str | None) -> dict:
        made = folder.parent / "first" / "made.txt"
        if cell.name == "first":
            time.sleep(1.0)
            made.write_text("from first")
            return {}
        return {"read": made.read_text() if made.exists() else None}

    def finished_line(self, result: Any) -> str:
        return "done"

    def summary(self, finished: Any) -> dict[str, Any]:
        return {}


def test_a_cell_starts_after_the_cells_it_waits_for_even_with_free_jobs(tmp_path):
    record = run_sweep(Chain(), SweepRun(tmp_path, jobs=2))
    assert record["complete"] and record["cells"][1]["read"] == "from first"


def test_a_cell_waiting_for_a_later_cell_is_refused(tmp_path):
    @dataclass(frozen=True)
    class Backwards(Chain):
        def cells(self) -> list[Cell]:
            return list(reversed(Chain().cells()))

    with pytest.raises(ValueError, match="cell second waits for first, which is not before it in the plan"):
        run_sweep(Backwards(), SweepRun(tmp_path))


@dataclass(frozen=True)
class SignalledWhileScoring(Squares):
    """Cell n1 gets SIGTERM after its training, while it scores (outside any run's loop)."""

    def run_cell(self, cell: Cell, folder: Path, reporter: Any, *, loaded: int, resume: bool, command: str | None) -> dict:
        if cell.coordinates["n"] == 1:
            signal.raise_signal(signal.SIGTERM)
        return super().run_cell(cell, folder, reporter, loaded=loaded, resume=resume, command=command)


def test_a_signal_between_runs_lets_the_cell_finish_and_starts_no_other(tmp_path):
    experiment, before = SignalledWhileScoring(), signal.getsignal(signal.SIGTERM)
    with pytest.raises(Interrupted, match=r"SIGTERM: the sweep stopped \(finished cells are kept") as stop:
        run_sweep(experiment, SweepRun(tmp_path))
    assert stop.value.exit_code == 143 and experiment.ran == [1]
    assert (tmp_path / "cells" / "n1" / MARKER).exists() and not (tmp_path / "cells" / "n2").exists()
    assert signal.getsignal(signal.SIGTERM) == before
    again = Squares()
    assert run_sweep(again, SweepRun(tmp_path, resume=True))["complete"] and again.ran == [2, 3]


@dataclass(frozen=True)
class Trains(Chain):
    """Cells that "train" (a loop under StopSignals, as a run's) until a stop, then save a
    "checkpoint" and raise Interrupted as a run does; resumed, they finish at once, and with
    ``stops=False`` a cell without a checkpoint finishes at once too."""

    stops: bool = True
    kind: str = "trains"
    record_file: str = "trains.json"

    def cells(self) -> list[Cell]:
        return [Cell(name, name, {"n": n}) for n, name in enumerate(("a", "b", "c"))]

    def run_cell(self, cell: Cell, folder: Path, reporter: Any, *, loaded: None, resume: bool, command: str | None) -> dict:
        checkpoint = folder / "checkpoint"
        if checkpoint.exists() or not self.stops:
            return {"resumed": checkpoint.exists()}
        with StopSignals() as signals:
            (folder / "training").write_text(str(os.getpid()))
            deadline = time.monotonic() + 60
            while signals.received is None and time.monotonic() < deadline:
                time.sleep(0.01)
            if signals.received is None:
                raise ValueError("never stopped")
            checkpoint.write_text("saved")
            raise Interrupted(signals.received, 7, str(checkpoint))


def signal_when_training(folder: Path, *, cells_too: bool) -> threading.Thread:
    """SIGTERM this process (the sweep's) once cells a and b train; with ``cells_too``, theirs
    first, as a scheduler that signals every process of the job does."""

    def send() -> None:
        marks = [folder / name / "training" for name in ("a", "b")]
        deadline = time.monotonic() + 120
        while not all(mark.exists() and mark.read_text() for mark in marks) and time.monotonic() < deadline:
            time.sleep(0.02)  # until both pids are written
        if cells_too:
            for mark in marks:
                os.kill(int(mark.read_text()), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("cells_too", [False, True], ids=["the-sweep-only", "every-process"])
def test_a_signal_stops_cells_in_processes_at_their_checkpoints_and_starts_no_other(tmp_path, cells_too):
    # the sweep asks its cells to stop without a second signal: one would stop them unsaved
    said, before = Said(), signal.getsignal(signal.SIGTERM)
    thread = signal_when_training(tmp_path, cells_too=cells_too)
    with pytest.raises(Interrupted, match=r"SIGTERM: the sweep stopped \(finished cells are kept"):
        run_sweep(Trains(), SweepRun(tmp_path, jobs=2), said)
    thread.join()
    stops = sorted(line for line in said.lines if "stopped:" in line)
    assert stops == [
        f"cell {n}/3 {name}: stopped: SIGTERM at step 7: checkpoint saved in {tmp_path / name / 'checkpoint'}; continue with --resume"
        for n, name in ((1, "a"), (2, "b"))
    ]
    assert not (tmp_path / "c").exists()  # no cell started after the signal
    assert signal.getsignal(signal.SIGTERM) == before
    record = run_sweep(Trains(stops=False), SweepRun(tmp_path, jobs=2, resume=True))
    assert record["complete"] and [c["resumed"] for c in record["cells"]] == [True, True, False]


def test_cells_in_processes_stop_at_their_checkpoints_when_the_sweep_is_killed(tmp_path):
    # SIGKILL: the sweep runs no handler, and its cells must not run on as orphans
    script = (
        "import sys; from pathlib import Path; from test_sweep import Trains; "
        "from tokenmask.experiments.plan import SweepRun; from tokenmask.experiments.sweep import run_sweep; "
        "run_sweep(Trains(), SweepRun(Path(sys.argv[1]), jobs=2))"
    )
    source = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), source])}
    sweep = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], env=env)
    try:
        marks = [tmp_path / name / "training" for name in ("a", "b")]
        deadline = time.monotonic() + 120
        while not all(mark.exists() for mark in marks) and time.monotonic() < deadline and sweep.poll() is None:
            time.sleep(0.02)
        assert sweep.poll() is None and all(mark.exists() for mark in marks)
    finally:
        sweep.kill()
        sweep.wait()
    try:
        deadline = time.monotonic() + 60
        while not all((tmp_path / name / "checkpoint").exists() for name in ("a", "b")) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [(tmp_path / name / "checkpoint").read_text() for name in ("a", "b")] == ["saved", "saved"]
        assert not (tmp_path / "c").exists()
    finally:  # no orphan outlives a failed test
        for mark in marks:
            with contextlib.suppress(ValueError, OSError):
                os.kill(int(mark.read_text()), signal.SIGKILL)


class SignalsItsFirstCell(Said):
    """SIGTERM to the first cell's process as soon as it starts (still importing), and to the sweep."""

    def message(self, text: str) -> None:
        super().message(text)
        if text.startswith("cell 1/3 a: started (process "):
            os.kill(int(text.split("process ")[1].rstrip(")")), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGTERM)


def test_a_signal_to_a_cell_that_is_still_starting_waits_for_its_handlers(tmp_path):
    # by default SIGTERM would end the starting process at once: no checkpoint, and an error.
    # As in a fresh process, the sweep's first start launches multiprocessing's resource tracker,
    # which unblocks SIGINT and SIGTERM once launched (CPython's resource_tracker.ensure_running):
    # run alone, this test once lost cell a to SIGTERM ("exit code -15") that way
    resource_tracker._resource_tracker._stop()
    said = SignalsItsFirstCell()
    with pytest.raises(Interrupted, match=r"SIGTERM: the sweep stopped"):
        run_sweep(Trains(), SweepRun(tmp_path, jobs=2), said)
    assert [line for line in said.lines if "stopped:" in line] == [
        f"cell 1/3 a: stopped: SIGTERM at step 7: checkpoint saved in {tmp_path / 'a' / 'checkpoint'}; continue with --resume"
    ]
    assert not (tmp_path / "b").exists() and not (tmp_path / "c").exists()


@dataclass(frozen=True)
class EndsAbruptly(Trains):
    """Cell a's process ends without a word once b trains (as a crash would); b trains until stopped."""

    def run_cell(self, cell: Cell, folder: Path, reporter: Any, *, loaded: None, resume: bool, command: str | None) -> dict:
        if cell.name == "a":
            deadline = time.monotonic() + 60
            while not (folder.parent / "b" / "training").exists() and time.monotonic() < deadline:
                time.sleep(0.02)
            os._exit(3)
        return super().run_cell(cell, folder, reporter, loaded=loaded, resume=resume, command=command)


def test_a_cell_that_ends_without_a_word_is_an_error_and_the_others_stop_at_a_checkpoint(tmp_path):
    with pytest.raises(ValueError, match="cell a: its process ended with exit code 3"):
        run_sweep(EndsAbruptly(), SweepRun(tmp_path, jobs=2))
    assert (tmp_path / "b" / "checkpoint").read_text() == "saved"  # asked to stop, not killed
    assert not (tmp_path / "c").exists()


@dataclass(frozen=True)
class StoppedInItsProbe(Squares):
    def forecast(self, loaded: int, pending: Any, output: Path) -> str:
        raise Interrupted(signal.SIGINT, 3, str(output / "probe-folder-since-removed"))


def test_a_stop_in_the_forecasts_probe_names_no_checkpoint(tmp_path):
    with pytest.raises(Interrupted) as stop:
        run_sweep(StoppedInItsProbe(), SweepRun(tmp_path))
    assert str(stop.value).startswith("SIGINT: the sweep stopped (finished cells are kept") and stop.value.exit_code == 130
    assert "probe-folder" not in str(stop.value)
