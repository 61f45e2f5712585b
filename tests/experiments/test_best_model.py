"""The study's best model across resumes: copied once, replaced by a better cell, and a kept one
that stays says which scores higher (no training: model folders are stand-in files)."""

from __future__ import annotations

import json

from test_downstream_stats import tune  # the suite imports test modules by basename (unique names)

from tokenmask.experiments.downstream import best_model, finetune_folder, keep_best_model


def tuned(seed, value):
    """The baseline's fine-tuning at 100 labels with seed ``seed`` (macro-F1 ``value``), where its folder is."""
    return tune("baseline", seed, value) | {"source_folder": "cells/baseline-seed0"}


def with_model(output, cell):
    """Lay out ``cell``'s fine-tuned model: a card and a stand-in weights file naming the cell."""
    folder = output / finetune_folder(cell) / "model"
    folder.mkdir(parents=True)
    (folder / "README.md").write_text("# A fine-tuned model\n")
    (folder / "weights").write_text(f"seed {cell['seed']}")


def study_of(*cells):
    return {"cells": list(cells), "best_model": best_model(cells, "macro_f1")}


def kept_weights(output):
    """Which cell's model ``best-model`` holds: ``"seed 1"``."""
    return (output / "best-model" / "weights").read_text()


def test_the_best_is_copied_with_its_card_and_the_others_removed(tmp_path):
    a, b = tuned(0, 0.70), tuned(1, 0.80)
    for cell in (a, b):
        with_model(tmp_path, cell)
    study = study_of(a, b)
    assert keep_best_model(tmp_path, study, keep_others=False) == study["best_model"]
    assert kept_weights(tmp_path) == "seed 1"
    assert json.loads((tmp_path / "best-model" / "tokenmask.json").read_text())["name"] == b["name"]
    assert f"By `tokenmask study`: {study['best_model']['how']}." in (tmp_path / "best-model" / "README.md").read_text()
    assert not list(tmp_path.glob("cells/**/model"))  # results stay, models go


def test_a_better_cell_added_by_a_resume_replaces_the_kept_model(tmp_path):
    a = tuned(0, 0.70)
    with_model(tmp_path, a)
    keep_best_model(tmp_path, study_of(a), keep_others=False)
    c = tuned(2, 0.90)
    with_model(tmp_path, c)  # the resume's new cell, still holding its model
    grown = study_of(a, c)
    assert keep_best_model(tmp_path, grown, keep_others=False)["name"] == c["name"] and kept_weights(tmp_path) == "seed 2"


def test_a_kept_model_from_a_cell_the_plan_dropped_stays_and_says_the_plans_best_scores_lower(tmp_path):
    # Measured on TREC: the best of 360 models was a 300-label cell; resumed with --label-budgets
    # 1000, the plan's best (0.8711) scored lower, yet the note said it scored "as high or higher".
    old, a = tuned(5, 0.8751), tuned(0, 0.8711)
    for cell in (old, a):
        with_model(tmp_path, cell)
    keep_best_model(tmp_path, study_of(old, a), keep_others=False)  # keeps old, removes a's model
    returned = keep_best_model(tmp_path, study_of(a), keep_others=False)  # old's cell left the plan
    assert returned["name"] == old["name"] and returned["value"] == 0.8751 and kept_weights(tmp_path) == "seed 5"
    assert returned["how"].endswith(
        f"kept from before, from a cell no longer in the study's plan: the best of the plan's models, {a['name']} (macro_f1 0.8711), scores lower"
    )


def test_a_tie_in_another_order_keeps_the_model_and_says_the_other_scores_as_high(tmp_path):
    a, b = tuned(0, 0.80), tuned(1, 0.80)
    for cell in (a, b):
        with_model(tmp_path, cell)
    keep_best_model(tmp_path, study_of(a, b), keep_others=False)  # the first of equals: a
    returned = keep_best_model(tmp_path, study_of(b, a), keep_others=False)  # b first now; its model is gone
    assert returned["name"] == a["name"] and kept_weights(tmp_path) == "seed 0"
    assert returned["how"].endswith(
        f"kept from before: {b['name']} (macro_f1 0.8000) scores as high or higher, but its model was removed when the study first ended"
    )
