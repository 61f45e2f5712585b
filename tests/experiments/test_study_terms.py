"""The terms of a study's terms cells across resumes: the refusals, and the identities of cells
recorded when the terms were part of every cell's identity."""

from __future__ import annotations

import shutil
from dataclasses import replace

import pytest

from tokenmask.experiments.plan import Cell, cell_digest, plan_digest
from tokenmask.experiments.study import StudyConfig, StudyExperiment
from tokenmask.experiments.study_grid import StudyGrid, terms_fingerprint
from tokenmask.experiments.study_terms import identities_with_terms, study_terms
from tokenmask.recipes.config import PretrainConfig
from tokenmask.train.config import LoopConfig
from tokenmask.train.job import QuietReporter

SHARED = {"grid": {"rates": [0.3]}, "settings": {"lr": 0.001}}


def former(cell: Cell, terms: str) -> str:
    """A marker's identity when the plan's terms entry was in every cell's shared part."""
    return plan_digest({"plan": {**SHARED, "terms": terms}, "cell": dict(cell.coordinates)})


def test_former_identities_hold_every_fingerprint_but_a_terms_cells_own_terms_only():
    token = Cell("token", "cells/token", {"strategy": "token", "seed": 0})
    terms = Cell("terms", "cells/terms", {"strategy": "terms", "seed": 0}, inputs={"terms": "aaaa"})
    assert identities_with_terms([token, terms], SHARED, {"aaaa", "bbbb"}) == {
        "token": {former(token, "aaaa"), former(token, "bbbb")},  # the terms did not make it: any the study had
        "terms": {former(terms, "aaaa")},  # other terms made another model
    }
    assert cell_digest(SHARED, terms) != former(terms, "aaaa") != plan_digest({"plan": SHARED, "cell": dict(terms.coordinates)})


def test_a_cell_without_inputs_keeps_the_identity_cells_had_before_inputs():
    cell = Cell("token", "cells/token", {"strategy": "token", "seed": 0})
    assert cell_digest(SHARED, cell) == plan_digest({"plan": SHARED, "cell": {"strategy": "token", "seed": 0}})


def test_the_study_accepts_the_identities_tokenmask_gave_its_cells_before_cells_had_inputs(tmp_path):
    """Identities computed by tokenmask at 33d69b5 (the terms fingerprint in every cell's): for
    this config they were ee27… (token) and 085a… (terms); the record or the kept copy names the terms."""
    terms = tmp_path / "terms.txt"
    terms.write_text("thou\nthee\n")
    config = StudyConfig(
        base=PretrainConfig(loop=LoopConfig(output=str(tmp_path / "o"), max_steps=8)),
        grid=StudyGrid(("token", "terms"), (0.15,)), terms_file=str(terms),
    )  # fmt: skip
    experiment = StudyExperiment(config)
    record = {"plan": experiment.plan()}
    assert record["plan"]["terms"] == "8036b561f8116df0"
    former = experiment.former_identities(record)
    assert former == {"token-0.15-bert-seed0": {"ee2700dd1c979212"}, "terms-0.15-bert-seed0": {"085a73bc6a692977"}}
    other = {"plan": {**record["plan"], "terms": "0123456789abcdef"}}  # terms the record held, not the cells' now
    former = experiment.former_identities(other)
    assert len(former["token-0.15-bert-seed0"]) == 2 and former["terms-0.15-bert-seed0"] == {"085a73bc6a692977"}
    token_only = StudyExperiment(replace(config, grid=StudyGrid(("token",), (0.15,)), terms_file=None))
    assert token_only.former_identities(record) == {"token-0.15-bert-seed0": {"ee2700dd1c979212"}}  # terms dropped since
    assert token_only.former_identities({"plan": token_only.plan()}) == {}  # nothing says which: none
    (tmp_path / "o").mkdir()
    shutil.copyfile(terms, tmp_path / "o" / "terms.txt")
    assert token_only.former_identities({"plan": token_only.plan()}) == {"token-0.15-bert-seed0": {"ee2700dd1c979212"}}


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
