"""The terms of a study's terms cells across resumes: the refusals, and markers of studies
recorded when the terms were part of every cell's identity."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenmask.experiments.plan import Cell, cell_digest, plan_digest
from tokenmask.experiments.study_grid import terms_fingerprint
from tokenmask.experiments.study_terms import carry_over_markers, study_terms
from tokenmask.recipes.config import PretrainConfig
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


def test_a_resumed_study_may_not_change_its_terms(tmp_path):
    given = tmp_path / "mine.txt"
    given.write_text("thou\nthee\n")
    recorded = terms_fingerprint(str(given))
    output = tmp_path / "study"
    assert study_terms(output, str(given), recorded, PretrainConfig(), QuietReporter()) == (given, False)
    assert study_terms(output, str(given), None, PretrainConfig(), QuietReporter()) == (given, False)  # terms added now
    given.write_text("thou\nthee\nthy\n")
    with pytest.raises(ValueError, match=r"mine.txt holds other terms than the 'terms' cells of .*study selected first"):
        study_terms(output, str(given), recorded, PretrainConfig(), QuietReporter())
    with pytest.raises(ValueError, match="a file given with --terms-file first: give it again"):
        study_terms(output, None, recorded, PretrainConfig(), QuietReporter())
    assert not output.exists()
