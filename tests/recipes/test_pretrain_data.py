"""Pre-training's data: checks made before the loop writes anything (CLI cases: tests/cli/test_bad_input.py), and the
stream (``--streaming``): exact resume, checkpoints that only their mode resumes, an evaluation corpus."""

from __future__ import annotations

import json
import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from tokenmask.blocks.entry import PretrainBlocks
from tokenmask.cli.main import main
from tokenmask.recipes.config import PretrainConfig
from tokenmask.recipes.pretrain import pretrain
from tokenmask.recipes.pretrain_data import check_blocks, check_maskable, loader_workers
from tokenmask.settings import build
from tokenmask.train.checkpoint import load_state
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
        check_blocks(blocks(count), batch_size=batch, processes=processes)
    check_blocks(blocks(batch * processes), batch_size=batch, processes=processes)  # exactly one batch


def test_evaluation_blocks_with_nothing_to_mask_are_refused():
    only_specials = blocks(4, 1, ids=[0, 1, 1, 0])
    with pytest.raises(ValueError, match="^the validation blocks hold no token that may be masked"):
        check_maskable(only_specials.validation, PROTECTED, "validation")
    check_maskable(blocks(4, 1).validation, PROTECTED, "validation")


@pytest.mark.parametrize(
    "given, device, rate_end, expected",
    [(None, "cuda", None, 2), (None, "cpu", None, 0), (None, "cuda", 0.15, 2), (3, "cpu", 0.15, 3), (0, "cuda", None, 0)],
)
def test_workers_default_to_two_on_a_gpu_and_none_on_a_cpu(given, device, rate_end, expected):
    # a masking-rate schedule reaches the workers (each micro-batch's rate is an argument): no exception for it
    config = PretrainConfig(loop=LoopConfig(output="o"), num_workers=given, mlm_probability_end=rate_end)
    assert loader_workers(config, torch.device(device)) == expected


@pytest.fixture(scope="module")
def plays(tmp_path_factory, lines):
    """240 paragraphs in 4 JSON Lines shards."""
    folder = tmp_path_factory.mktemp("plays")
    for shard in range(4):
        part = [" ".join(lines[i : i + 6]) for i in range(shard * 360, shard * 360 + 360, 6)]
        (folder / f"part-{shard}.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in part), encoding="utf-8")
    return folder


def streamed(corpus, output, **overrides):
    settings = dict(
        output=str(output), corpus=(str(corpus),), preset="bert-tiny", max_steps=10, batch_size=4, eval_every=5,
        eval_blocks=8, max_length=48, save_every=4, streaming=True, chunk_characters=1500, seed=3,
    )  # fmt: skip
    return build(PretrainConfig, {**settings, **overrides})


def step_losses(output):
    records = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
    return {r["step"]: r["loss"] for r in records if "loss" in r}


@pytest.mark.filterwarnings("ignore:This DataLoader will create")
def test_a_streaming_run_resumed_after_a_crash_ends_bit_identical(plays, tmp_path, crash_after):
    # a masking-rate schedule over a token limit (at most 192 tokens a step: 10 steps or more), whose
    # horizon is fitted after step 1: the workers and the resumed run mask each step at its rate too
    schedule = dict(max_steps=None, max_tokens=1900, mlm_probability=0.3, mlm_probability_end=0.1)
    whole = pretrain(streamed(plays, tmp_path / "whole", **schedule))
    cut = streamed(plays, tmp_path / "cut", num_workers=2, **schedule)  # workers change nothing
    with pytest.raises(crash_after.Crash):
        pretrain(cut, crash_after(7))  # dies after step 7; the newest checkpoint is step 4
    (position,) = load_state(tmp_path / "cut" / "checkpoints" / "step-4")["data"]
    assert position["chunk"] >= 1 and position["first_document"] > 0  # the resumed run reads past documents
    resumed = pretrain(cut.with_loop(resume=True))
    assert step_losses(tmp_path / "cut") == step_losses(tmp_path / "whole")
    assert [e["eval_loss"] for e in resumed.evaluations] == [e["eval_loss"] for e in whole.evaluations if e["step"] > 4]
    for name, value in whole.model.state_dict().items():
        assert torch.equal(value, resumed.model.state_dict()[name]), name


def test_a_checkpoint_resumes_only_in_the_mode_that_wrote_it(plays, tmp_path):
    pretrain(streamed(plays, tmp_path / "streamed", max_steps=4))
    with pytest.raises(ValueError, match="written by a --streaming run, whose data order only it can resume: add --streaming"):
        pretrain(streamed(plays, tmp_path / "streamed", max_steps=6, streaming=False, resume=True))
    pretrain(streamed(plays, tmp_path / "cached", max_steps=4, streaming=False))
    with pytest.raises(ValueError, match=r"holds no stream position \(written by a run without --streaming\)"):
        pretrain(streamed(plays, tmp_path / "cached", max_steps=6, resume=True))


def test_an_evaluation_corpus_replaces_the_held_out_documents(plays, tmp_path, lines):
    scored = tmp_path / "scored.txt"
    scored.write_text("\n\n".join(" ".join(lines[i : i + 6]) for i in range(3000, 3300, 6)), encoding="utf-8")
    for streaming in (True, False):
        result = pretrain(
            streamed(plays, tmp_path / f"run-{streaming}", max_steps=2, eval_corpus=(str(scored),), streaming=streaming)
        )
        assert len(result.evaluations) == 2
        card = (tmp_path / f"run-{streaming}" / "model" / "README.md").read_text()
        assert "on 8 evaluation corpus blocks at fixed masks" in card


def test_pmi_masking_needs_the_cache(plays):
    with pytest.raises(ValueError, match="strategy 'pmi' finds its n-grams in a pass over the corpus"):
        streamed(plays, "o", strategy="pmi")
    with pytest.raises(ValueError, match="strategy 'pmi'"):
        build(PretrainConfig, {"output": "o", "corpus": ("hf:wikitext",), "strategy": "pmi"})


def test_a_hub_layout_folder_trains_with_and_without_streaming_and_fills_masks(tmp_path, lines, capsys):
    (tmp_path / "hub" / "data").mkdir(parents=True)
    texts = [" ".join(lines[i : i + 6]) for i in range(0, 1200, 6)]
    pq.write_table(pa.table({"body": texts}), tmp_path / "hub" / "data" / "train-00000-of-00001.parquet")
    for streaming in ((), ("--streaming",)):
        output = tmp_path / f"run{len(streaming)}"
        argv = ["pretrain", f"hf:{tmp_path / 'hub'}", "--text-field", "body", "--output", str(output), "--preset", "bert-tiny",
                "--max-steps", "2", "--max-length", "32", "--validation-share", "0.1", *streaming]  # fmt: skip
        assert main(argv) == 0
        shown = capsys.readouterr().out
        assert "fill-mask on held-out lines" in shown and "answer:" in shown
        assert ("streamed:" in shown) == bool(streaming)
