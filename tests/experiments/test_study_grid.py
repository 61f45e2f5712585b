"""The study's grid: which cells it expands to, what they are called, what each trains and is scored with."""

from __future__ import annotations

import dataclasses

import pytest

from tokenmask.experiments.study_grid import DEFAULT_GRID, StudyGrid, baseline_cells, cell_config
from tokenmask.masking.config import COMMAND_LINE_STRATEGIES, MaskingConfig
from tokenmask.recipes.config import COMMON_EVAL_MASKING, PretrainConfig
from tokenmask.recipes.pretrain import evaluation_maskings
from tokenmask.train.config import LoopConfig
from tokenmask.use.evaluate import EVAL_SEED_OFFSET


def at(strategy: str, rate: float, corruption: str, seed: int) -> dict:
    """A cell's coordinates, as the grid gives them."""
    return {"strategy": strategy, "rate": rate, "rate_end": None, "corruption": corruption, "seed": seed}


def test_the_grid_expands_strategy_by_strategy_with_the_same_seeds_everywhere():
    grid = StudyGrid(strategies=("span", "token"), rates=(0.3, 0.15), corruptions=("bert", "mask-only"), seeds=2)
    cells = grid.cells(first_seed=3)
    assert len(cells) == 2 * 2 * 2 * 2
    assert [cell.name for cell in cells[:5]] == [
        "span-0.3-bert-seed3", "span-0.3-bert-seed4", "span-0.3-mask-only-seed3", "span-0.3-mask-only-seed4",
        "span-0.15-bert-seed3",
    ]  # fmt: skip
    assert cells[-1].name == "token-0.15-mask-only-seed4"
    assert {cell.coordinates["seed"] for cell in cells} == {3, 4}
    assert cells[0].folder == "cells/span-0.3-bert-seed3"
    assert len({cell.name for cell in cells}) == len(cells)
    assert grid.describe() == "16 cells: 2 strategies x 2 rates x 2 corruptions x 2 seeds"


def test_rate_schedules_and_baselines_are_named_apart():
    grid = StudyGrid(strategies=("whole_word",), rates=(0.3,), rate_ends=(None, 0.15))
    assert [c.name for c in grid.cells()] == ["whole_word-0.3-bert-seed0", "whole_word-0.3to0.15-bert-seed0"]
    assert [c.coordinates["point"] for c in grid.cells()] == ["whole_word-0.3-bert", "whole_word-0.3to0.15-bert"]
    assert grid.describe() == "2 cells: 1 strategy x 1 rate x 2 rate schedules x 1 corruption x 1 seed"
    (baseline,) = baseline_cells([2])
    assert baseline.name == "baseline-seed2" and baseline.coordinates["point"] == "baseline"


def test_the_default_grid_is_four_strategies_at_two_rates():
    assert DEFAULT_GRID.describe() == "8 cells: 4 strategies x 2 rates x 1 corruption x 1 seed"
    assert set(DEFAULT_GRID.strategies) <= set(COMMAND_LINE_STRATEGIES)


def test_the_strategies_are_the_masking_configs_own_command_line_choices_and_terms():
    assert set(COMMAND_LINE_STRATEGIES) == {"token", "whole_word", "span", "ngram", "pmi"}
    with pytest.raises(ValueError, match="strategies must be one of token, whole_word, span, ngram, pmi, terms; got 'given'"):
        StudyGrid(strategies=("given",))
    assert StudyGrid(strategies=("terms",)).cells()[0].name == "terms-0.15-bert-seed0"


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"strategies": ()}, "the grid is empty: give at least one value for strategies"),
        ({"rates": ()}, "the grid is empty: give at least one value for rates"),
        ({"strategies": ("token", "bogus")}, "strategies must be one of token, whole_word"),
        ({"rates": (0.0,)}, r"rates must be in \(0, 1\]; got 0.0"),
        ({"rates": (1.5,)}, r"rates must be in \(0, 1\]; got 1.5"),
        ({"rates": (0.15, 0.15)}, "rates: each value once, please; got 0.15, 0.15"),
        ({"corruptions": ("bert", "keep")}, "corruption must be one of bert, mask-only; got 'keep'"),
        ({"rate_ends": (2.0,)}, r"rate ends must be 'none' or in \(0, 1\]"),
        ({"seeds": 0}, "seeds must be >= 1; got 0"),
    ],
)
def test_bad_grids_are_refused_naming_the_axis(changes, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(StudyGrid(strategies=("token",), rates=(0.15,)), **changes)


def test_a_cell_changes_only_its_masking_seed_output_and_evaluation():
    base = PretrainConfig(loop=LoopConfig(output="study", lr=1e-3, batch_size=4, max_steps=7, seed=9), preset="bert-tiny")
    cell = {"strategy": "span", "rate": 0.3, "corruption": "mask-only", "seed": 10, "rate_end": 0.15}
    config = cell_config(base, cell, "study/cells/x/pretrain", resume=True)
    masking = config.masking
    assert (masking.units.strategy, masking.selection.mlm_probability) == ("span", 0.3)
    assert (masking.corruption.mask_replace_prob, masking.corruption.random_replace_prob) == (1.0, 0.0)
    assert (config.mlm_probability_end, config.eval_masking) == (0.15, "common")
    assert (config.loop.seed, config.loop.output, config.loop.resume) == (10, "study/cells/x/pretrain", True)
    assert (config.loop.lr, config.loop.batch_size, config.loop.max_steps, config.preset) == (1e-3, 4, 7, "bert-tiny")
    bert = cell_config(base, at("token", 0.15, "bert", 0), "o")
    assert bert.masking == MaskingConfig()  # token 15% 80/10/10: the default masking


def test_the_common_evaluation_is_token_level_80_10_10_with_the_seed_0_masks_whatever_the_cell():
    base = PretrainConfig(loop=LoopConfig(output="o", max_steps=1, seed=2), eval_mlm_probability=0.15)
    span = cell_config(base, at("span", 0.3, "mask-only", 2), "o")
    scored, beside = evaluation_maskings(span)
    assert (scored.masking, scored.seed) == (COMMON_EVAL_MASKING.at_rate(0.15), EVAL_SEED_OFFSET)
    assert beside is not None and beside.seed == 2 + EVAL_SEED_OFFSET
    assert beside.masking == span.masking.at_rate(0.15)  # span, mask-only, at the evaluation rate
    # a cell that trains with the common masking at another rate: nothing beside, same masks as every cell
    token = cell_config(base, at("token", 0.3, "bert", 5), "o")
    assert evaluation_maskings(token) == (scored, None)
    # the default ('own'): the run's own masking and seed, nothing beside, as before
    own_scored, own_beside = evaluation_maskings(dataclasses.replace(span, eval_masking="own"))
    assert (own_scored, own_beside) == (beside, None)


def test_the_common_masks_are_the_same_targets_for_every_strategy_and_seed(bert_tokenizer, lines):
    from tokenmask.blocks.pack import pack_texts
    from tokenmask.collate.collator import MaskingCollator

    blocks = list(pack_texts(lines[:200], bert_tokenizer, block_length=64))[:16]
    base = PretrainConfig(loop=LoopConfig(output="o", max_steps=1))
    labels = []
    for cell in (at("token", 0.15, "bert", 0), at("span", 0.3, "mask-only", 1), at("ngram", 0.15, "bert", 7)):
        scored, _ = evaluation_maskings(cell_config(base, cell, "o"))
        labels.append(MaskingCollator.from_config(bert_tokenizer, scored.masking, seed=scored.seed)(blocks)["labels"])
    assert all((other == labels[0]).all() for other in labels[1:])
    _, beside = evaluation_maskings(cell_config(base, at("span", 0.3, "mask-only", 1), "o"))
    assert beside is not None
    own = MaskingCollator.from_config(bert_tokenizer, beside.masking, seed=beside.seed)(blocks)["labels"]
    assert not (own == labels[0]).all()
