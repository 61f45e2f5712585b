"""--packing documents in a pre-training run: said in the first lines, replayed, and resumed bit for bit."""

import json

import pytest

from tokenmask.cli.main import main
from tokenmask.recipes.config import PretrainConfig
from tokenmask.recipes.pretrain import pretrain
from tokenmask.settings import build


@pytest.fixture(scope="module")
def corpus(plays_file):
    return plays_file(2400)


def config(corpus, output, **overrides):
    settings = dict(output=str(output), corpus=(str(corpus),), preset="bert-tiny", max_steps=6, batch_size=8, eval_every=3,
                    eval_blocks=16, max_length=64, validation_share=0.1, report_to="none")  # fmt: skip
    return build(PretrainConfig, {**settings, **overrides})


def losses(run):
    return [r["loss"] for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "loss" in r]


def test_documents_apart_change_the_run_and_are_said_and_replayed(corpus, tmp_path, capsys):
    main(["pretrain", str(corpus), "--output", str(tmp_path / "apart"), "--preset", "bert-tiny", "--max-steps", "3",
          "--max-length", "64", "--eval-blocks", "8", "--packing", "documents", "--report-to", "none"])  # fmt: skip
    assert "packing: each document attends to itself only, positions restarting at each" in capsys.readouterr().out
    replay = tmp_path / "apart" / "config.yaml"
    assert "packing: documents" in replay.read_text()
    main(["pretrain", "--config", str(replay), "--output", str(tmp_path / "again")])
    main(["pretrain", "--config", str(replay), "--output", str(tmp_path / "shared"), "--packing", "blocks"])
    assert losses(tmp_path / "again") == losses(tmp_path / "apart")
    assert losses(tmp_path / "shared") != losses(tmp_path / "apart")  # the same blocks and masks, other attention


def test_a_resumed_run_keeps_documents_apart_bit_for_bit(corpus, tmp_path, crash_after):
    whole = pretrain(config(corpus, tmp_path / "whole", save_every=2, packing="documents"))
    cut = config(corpus, tmp_path / "cut", save_every=2, packing="documents")
    with pytest.raises(crash_after.Crash):
        pretrain(cut, crash_after(3))
    resumed = pretrain(cut.with_loop(resume=True))
    assert losses(tmp_path / "cut")[-3:] == losses(tmp_path / "whole")[-3:]
    assert [e["eval_loss"] for e in resumed.evaluations][-1] == whole.evaluations[-1]["eval_loss"]


def test_replaced_token_detection_says_its_documents_share_attention(corpus, tmp_path, capsys):
    main(["pretrain", str(corpus), "--output", str(tmp_path / "rtd"), "--preset", "electra-tiny", "--objective", "rtd",
          "--max-steps", "1", "--max-length", "64", "--eval-blocks", "8", "--packing", "documents", "--report-to", "none"])  # fmt: skip
    assert "packing: documents share attention within a block here (replaced-token detection" in capsys.readouterr().out
