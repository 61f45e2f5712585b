"""The runner on a stand-in study (no training): markers written last, the record rebuilt from them,
resume, a grown axis, refusals, a failed cell, the order of cells and the forecast."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tokenmask.experiments.grid import Cell
from tokenmask.experiments.runner import (
    ERROR,
    FORMAT,
    MARKER,
    RECORD,
    check_folder,
    forecast,
    plan_differences,
    run_cells,
    shared_plan,
    write_record,
)
from tokenmask.train.job import QuietReporter


class Lines(QuietReporter):
    def __init__(self) -> None:
        self.lines: list[str] = []

    def message(self, text: str) -> None:
        self.lines.append(text)


@dataclass(frozen=True)
class Stand:
    """A study of ``seeds`` cells ``a-0``, ``a-1``, … each followed by ``b-N`` (which runs after it); the
    cell ``fail`` raises ValueError; ``lr`` is a shared setting, ``seeds`` an axis that may grow."""

    seeds: int = 2
    lr: float = 0.1
    fail: str | None = None
    ran: list[str] = field(default_factory=list, compare=False)
    growing: tuple[tuple[str, ...], ...] = (("grid", "seeds"),)

    def plan(self) -> dict[str, Any]:
        return {"grid": {"seeds": self.seeds}, "settings": {"lr": self.lr}}

    def cells(self) -> list[Cell]:
        cells = []
        for seed in range(self.seeds):
            cells += [Cell(f"a-{seed}", f"cells/a-{seed}", {"seed": seed}),
                      Cell(f"b-{seed}", f"cells/b-{seed}", {"seed": seed, "role": "b"}, after=(f"a-{seed}",))]  # fmt: skip
        return cells

    def load(self) -> None:
        return None

    def run_cell(self, cell: Cell, folder: Path, reporter: Any, *, loaded: Any) -> dict[str, Any]:
        if cell.name == self.fail:
            raise ValueError("bad input")
        for name in cell.after:  # what it starts from is there
            assert (folder.parent / name / MARKER).exists()
        self.ran.append(cell.name)
        return {"value": 10 * self.lr + cell.coordinates["seed"]}

    def guess_minutes(self, cell: Cell) -> float:
        return 2.0 if cell.coordinates.get("role") == "b" else 1.0

    def finished_line(self, result: Any) -> str:
        return f"value {result['value']}"

    def summary(self, cells: Any) -> dict[str, Any]:
        return {"total": sum(c.get("value", 0) for c in cells)}


def run(study: Stand, output: Path, *, resume: bool = False) -> dict[str, Any]:
    check_folder(output, study, resume=resume)
    write_record(output, study)
    run_cells(study, output, QuietReporter(), jobs=1)
    return json.loads((output / RECORD).read_text())


def test_every_cell_runs_after_what_it_needs_and_the_record_is_rebuilt_from_the_markers(tmp_path):
    study = Stand()
    record = run(study, tmp_path)
    assert study.ran == ["a-0", "b-0", "a-1", "b-1"]
    assert record["format"] == FORMAT and record["complete"] and record["total"] == 2 * 1.0 + 2 * 2.0  # 1, 1, 2, 2
    for cell in record["cells"]:
        assert cell == json.loads((tmp_path / cell["folder"] / MARKER).read_text())
        assert cell["status"] == "finished" and len(cell["identity"]) == 16
    (tmp_path / RECORD).unlink()
    assert write_record(tmp_path, study) == record  # the markers alone hold it


def test_a_resume_keeps_finished_cells_and_may_grow_an_axis(tmp_path):
    with pytest.raises(ValueError, match="bad input"):
        run(Stand(fail="b-0"), tmp_path)
    assert (tmp_path / "cells/b-0" / ERROR).read_text() == "cell b-0: bad input"
    record = json.loads((tmp_path / RECORD).read_text())
    assert [c["status"] for c in record["cells"]] == ["finished", "pending", "pending", "pending"]  # a failure stops the study
    kept = (tmp_path / "cells/a-0" / MARKER).stat().st_mtime_ns
    grown = Stand(seeds=3)
    record = run(grown, tmp_path, resume=True)
    assert grown.ran == ["b-0", "a-1", "b-1", "a-2", "b-2"] and record["complete"]  # the failed cell is tried again
    assert (tmp_path / "cells/a-0" / MARKER).stat().st_mtime_ns == kept and not (tmp_path / "cells/b-0" / ERROR).exists()


def test_a_folder_is_refused_before_anything_is_written(tmp_path):
    run(Stand(), tmp_path)
    with pytest.raises(ValueError, match="already holds a study: pass --resume"):
        check_folder(tmp_path, Stand(), resume=False)
    with pytest.raises(ValueError, match=r"holds a study of another plan \(settings \(lr\)\)"):
        check_folder(tmp_path, Stand(lr=0.2), resume=True)
    assert check_folder(tmp_path, Stand(seeds=5), resume=True) is not None  # a grown axis is the same plan
    old = json.loads((tmp_path / RECORD).read_text())
    del old["format"]
    (tmp_path / RECORD).write_text(json.dumps(old))
    with pytest.raises(ValueError, match=r"format 1\b.*new --output"):
        check_folder(tmp_path, Stand(), resume=True)
    run_folder = tmp_path / "run"
    run_folder.mkdir()
    (run_folder / "config.yaml").write_text("lr: 0.1\n")
    with pytest.raises(ValueError, match="holds a single run, not a study"):
        check_folder(run_folder, Stand(), resume=True)


def test_a_marker_of_another_plan_is_refused(tmp_path):
    run(Stand(), tmp_path)
    (tmp_path / RECORD).unlink()
    with pytest.raises(ValueError, match=r"cells/a-0/cell.json was written by a study of another plan"):
        run(Stand(lr=0.3), tmp_path)


def test_plan_differences_name_sections_and_keys():
    assert plan_differences({"a": {"x": 1, "y": 2}, "b": 1}, {"a": {"x": 1, "y": 3}, "b": 1}) == "a (y)"
    assert plan_differences({"a": 1, "f": None}, {"a": 2, "f": {"s": 1}}) == "a, f"
    assert shared_plan({"grid": {"seeds": 3, "rates": [1]}, "lr": 1}, [("grid", "seeds"), ("x", "y")]) == {
        "grid": {"rates": [1]}, "lr": 1
    }  # fmt: skip


def numbers(forecast: str) -> tuple[str, ...]:
    """The cells left and the time a forecast gives: ``("35", "1.8 h")``."""
    found = re.search(r"(\d+) cells? left, about ([\d.]+ (?:s|min|h))", forecast)
    assert found, forecast
    return found.groups()


def test_the_forecast_scales_the_guesses_by_the_finished_cells(tmp_path):
    study = Stand()
    nothing = {"cells": []}  # no cell finished yet: the guesses as they are
    assert numbers(forecast(study, nothing)) == ("4", "6 min") and "rough" in forecast(study, nothing)  # 1 + 2 + 1 + 2
    run(study, tmp_path)
    for name, minutes in (("a-0", 0.5), ("b-0", 1.0)):  # half the guesses
        marker = tmp_path / "cells" / name / MARKER
        marker.write_text(json.dumps({**json.loads(marker.read_text()), "minutes": minutes}))
    for name in ("a-1", "b-1"):
        (tmp_path / "cells" / name / MARKER).unlink()
    record = write_record(tmp_path, study)
    assert numbers(forecast(study, record)) == ("2", "2 min")  # (1 + 2) x 0.5 = 1.5 min
    assert numbers(forecast(study, record, jobs=3)) == ("2", "30 s") and "rough" not in forecast(study, record)
