"""The terms of a study's terms cells across resumes: the refusals, and markers of studies
recorded when the terms were part of every cell's identity."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenmask.experiments.plan import Cell, cell_digest, plan_digest, shared_part
from tokenmask.experiments.study import StudyConfig, StudyExperiment
from tokenmask.experiments.study_grid import StudyGrid, terms_fingerprint
from tokenmask.experiments.study_terms import carry_over_markers, study_terms
from tokenmask.recipes.config import PretrainConfig
from tokenmask.train.config import LoopConfig
from tokenmask.train.job import QuietReporter

SHARED = {"grid": {"rates": [0.3]}, "settings": {"lr": 0.001}}


def former(cell: Cell, terms: str) -> str:
    """A marker's identity when the plan's terms entry was in every cell's shared part."""
    return plan_digest({"plan": {**SHARED, "terms": terms}, "cell": dict(cell.coordinates)})


def write_marker(root: Path, cell: Cell, identity: str) -> Path:
    path = root / cell.folder / "cell.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"name": cell.name, "loss": 1.5, "identity": identity}))
    return path


def test_markers_of_the_former_identity_are_carried_over_a_terms_cells_only_for_its_own_terms(tmp_path):
    token = Cell("token", "cells/token", {"strategy": "token", "seed": 0})
    terms_a = Cell("terms-a", "cells/terms-a", {"strategy": "terms", "seed": 0}, inputs={"terms": "aaaa"})
    terms_b = Cell("terms-b", "cells/terms-b", {"strategy": "terms", "seed": 1}, inputs={"terms": "aaaa"})
    stranger = Cell("stranger", "cells/stranger", {"strategy": "span", "seed": 0})
    unfinished = Cell("unfinished", "cells/unfinished", {"strategy": "pmi", "seed": 0})
    paths = {
        "token": write_marker(tmp_path, token, former(token, "bbbb")),  # the terms did not make it: any recorded terms
        "terms-a": write_marker(tmp_path, terms_a, former(terms_a, "aaaa")),  # the terms it selects now
        "terms-b": write_marker(tmp_path, terms_b, former(terms_b, "bbbb")),  # other terms: another model
        "stranger": write_marker(tmp_path, stranger, "0123456789abcdef"),  # another sweep's
    }
    texts = {name: path.read_text() for name, path in paths.items()}
    cells = [token, terms_a, terms_b, stranger, unfinished]
    assert carry_over_markers(tmp_path, cells, SHARED, {"aaaa", "bbbb"}) == 2
    marker = json.loads(paths["token"].read_text())
    assert marker == {"name": "token", "loss": 1.5, "identity": cell_digest(SHARED, token)}
    assert json.loads(paths["terms-a"].read_text())["identity"] == cell_digest(SHARED, terms_a)
    assert cell_digest(SHARED, terms_a) != plan_digest({"plan": SHARED, "cell": dict(terms_a.coordinates)})  # inputs count
    assert (paths["terms-b"].read_text(), paths["stranger"].read_text()) == (texts["terms-b"], texts["stranger"])
    assert carry_over_markers(tmp_path, cells, SHARED, {"aaaa", "bbbb"}) == 0  # carried once


def test_a_cell_without_inputs_keeps_the_identity_cells_had_before_inputs():
    cell = Cell("token", "cells/token", {"strategy": "token", "seed": 0})
    assert cell_digest(SHARED, cell) == plan_digest({"plan": SHARED, "cell": {"strategy": "token", "seed": 0}})


def test_markers_written_by_tokenmask_before_cells_had_inputs_are_carried_over(tmp_path):
    """Identities computed by tokenmask at 33d69b5 (the terms fingerprint in every cell's): for
    this config they were ee27… (token) and 085a… (terms)."""
    terms = tmp_path / "terms.txt"
    terms.write_text("thou\nthee\n")
    config = StudyConfig(
        base=PretrainConfig(loop=LoopConfig(output="o", max_steps=8)), grid=StudyGrid(("token", "terms"), (0.15,)),
        terms_file=str(terms),
    )  # fmt: skip
    experiment = StudyExperiment(config)
    assert experiment.plan()["terms"] == "8036b561f8116df0"
    token, terms_cell = experiment.cells()
    paths = [write_marker(tmp_path, token, "ee2700dd1c979212"), write_marker(tmp_path, terms_cell, "085a73bc6a692977")]
    shared = shared_part(experiment)
    assert carry_over_markers(tmp_path, experiment.cells(), shared, {"8036b561f8116df0"}) == 2
    assert [json.loads(path.read_text())["identity"] for path in paths] == [
        cell_digest(shared, token),
        cell_digest(shared, terms_cell),
    ]


def test_the_terms_given_are_kept_in_the_output_and_a_resumed_study_may_not_change_them(tmp_path):
    given = tmp_path / "mine.txt"
    given.write_text("thou\nthee\n")
    output = tmp_path / "study"
    kept = output / "terms.txt"
    assert study_terms(output, str(given), None, PretrainConfig(), QuietReporter()) == (given, kept)  # copied
    assert kept.read_text() == "thou\nthee\n"
    assert study_terms(output, str(given), terms_fingerprint(str(given)), PretrainConfig(), QuietReporter()) == (given, None)
    assert study_terms(output, None, None, PretrainConfig(), QuietReporter()) == (kept, None)  # given no more: the copy
    other = tmp_path / "other.txt"
    other.write_text("thou\nthee\nthy\n")
    for recorded in (None, terms_fingerprint(str(given))):  # the copy says so even where the record has no terms now
        with pytest.raises(ValueError, match=r"other.txt holds other terms than the 'terms' cells of .*study selected first"):
            study_terms(output, str(other), recorded, PretrainConfig(), QuietReporter())
    kept.unlink()  # a study recorded before the copy was kept: the record's fingerprint alone
    with pytest.raises(ValueError, match="a file given with --terms-file first: give it again"):
        study_terms(output, None, terms_fingerprint(str(given)), PretrainConfig(), QuietReporter())
    with pytest.raises(ValueError, match="other.txt holds other terms"):
        study_terms(output, str(other), terms_fingerprint(str(given)), PretrainConfig(), QuietReporter())
    assert not kept.exists()
