"""Pre-training's checks on its blocks: made before the loop writes anything (CLI cases: tests/cli/test_bad_input.py)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from tokenmask.blocks.entry import PretrainBlocks
from tokenmask.recipes.config import PretrainConfig
from tokenmask.recipes.pretrain import check_blocks, loader_workers
from tokenmask.train.config import LoopConfig

PROTECTED = np.array([True, True, False, False])  # ids 0 and 1 are special: never masked


def blocks(train: int, validation: int = 0, ids: list[int] = (0, 2, 3, 1)) -> PretrainBlocks:
    block = {"input_ids": list(ids), "word_ids": [-1, 0, 1, -1], "id": 0}
    return PretrainBlocks(
        train=[block] * train, validation=[block] * validation, documents=1, tokens=4 * train, block_length=4,
        empty_documents=0, tokenless_documents=0, text_tokens=2 * train, frame_tokens=2 * train,
    )  # fmt: skip


@pytest.mark.parametrize(
    "count, batch, processes, message",
    [
        (
            1,
            2,
            1,
            "the corpus gives 1 training block of 4 tokens, fewer than one batch of 2: pass --batch-size 1, or give more text",
        ),
        (
            7,
            8,
            1,
            "the corpus gives 7 training blocks of 4 tokens, fewer than one batch of 8: pass --batch-size 7 or less, or give",
        ),
        # 7 blocks over 3 processes: 7 // 3 = 2 each
        (7, 4, 3, "7 training blocks of 4 tokens, fewer than one batch of 4 on each of 3 processes: pass --batch-size 2 or less"),
        (2, 1, 3, "2 training blocks of 4 tokens, fewer than one batch of 1 on each of 3 processes: give more text"),
    ],
)
def test_blocks_that_fill_no_batch_are_refused_with_the_batch_size_that_fits(count, batch, processes, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        check_blocks(blocks(count), blocks(count).train, PROTECTED, batch_size=batch, processes=processes)
    check_blocks(
        blocks(batch * processes), blocks(1).train, PROTECTED, batch_size=batch, processes=processes
    )  # exactly one batch


def test_evaluation_blocks_with_nothing_to_mask_are_refused():
    only_specials = blocks(4, 1, ids=[0, 1, 1, 0])
    with pytest.raises(ValueError, match="^the validation blocks hold no token that may be masked"):
        check_blocks(only_specials, only_specials.validation, PROTECTED, batch_size=2)
    check_blocks(blocks(4, 1), blocks(4, 1).validation, PROTECTED, batch_size=2)


@pytest.mark.parametrize(
    "given, device, rate_end, expected",
    [(None, "cuda", None, 2), (None, "cpu", None, 0), (None, "cuda", 0.15, 0), (3, "cpu", None, 3), (0, "cuda", None, 0)],
)
def test_workers_default_to_two_on_a_gpu_and_none_on_a_cpu(given, device, rate_end, expected):
    config = PretrainConfig(loop=LoopConfig(output="o"), num_workers=given, mlm_probability_end=rate_end)
    assert loader_workers(config, torch.device(device)) == expected
