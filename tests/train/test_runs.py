"""A run's folder: one run per folder, resuming past damaged checkpoints or from the start, pruning."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import BertConfig, BertForMaskedLM

import tokenmask.train.runs as runs
from tokenmask.recipes.config import FinetuneConfig, PretrainConfig
from tokenmask.recipes.pretrain import pretrain
from tokenmask.settings import build
from tokenmask.text.tokenizer import train_tokenizer
from tokenmask.train.checkpoint import MANIFEST_FILE, STATE_FILE, save_checkpoint, verify_checkpoint
from tokenmask.train.config import LoopConfig
from tokenmask.train.runs import check_output, clear_old_run, save_resumable


class Killed(Exception):
    pass


class Messages:
    """A reporter that keeps the messages (and 'kills' the run after step ``stop_at``)."""

    def __init__(self, stop_at: int | None = None):
        self.lines, self.stop_at = [], stop_at

    def message(self, text):
        self.lines.append(text)

    def step(self, step, total, loss, tokens_per_s):
        if step == self.stop_at:
            raise Killed


# ---- pruning -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny(bert_tokenizer):
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(bert_tokenizer), hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16
    )
    return BertForMaskedLM(config), bert_tokenizer


def save(output, tiny, step, keep_last=2, report=lambda text: None):
    model, tokenizer = tiny
    return save_resumable(output, model, tokenizer, {"step": step, "tokens": step}, keep_last=keep_last, report=report)


def kept(output):
    return sorted(int(p.name.split("-")[1]) for p in (output / "checkpoints").iterdir())


def test_pruning_keeps_the_newest_valid_checkpoints_and_never_best(tiny, tmp_path):
    save_checkpoint(tmp_path / "best", *tiny, {"step": 2})
    for step in (2, 4, 6):
        save(tmp_path, tiny, step)
    assert kept(tmp_path) == [4, 6]
    (tmp_path / "checkpoints" / "step-6" / MANIFEST_FILE).unlink()  # damaged: does not count
    save(tmp_path, tiny, 8)
    assert kept(tmp_path) == [4, 8]
    save(tmp_path, tiny, 10, keep_last=3)
    save(tmp_path, tiny, 12, keep_last=3)
    assert kept(tmp_path) == [8, 10, 12]
    save(tmp_path, tiny, 14, keep_last=1)
    assert kept(tmp_path) == [14]
    assert verify_checkpoint(tmp_path / "best")["step"] == 2


def test_a_new_checkpoint_that_does_not_verify_removes_nothing(tiny, tmp_path, monkeypatch):
    save(tmp_path, tiny, 2)
    save(tmp_path, tiny, 4)
    real = runs.save_checkpoint

    def save_then_break(folder, *args):
        real(folder, *args)
        with (folder / "model.safetensors").open("r+b") as handle:
            handle.truncate(100)
        return folder

    monkeypatch.setattr(runs, "save_checkpoint", save_then_break)
    reports = []
    save(tmp_path, tiny, 6, keep_last=1, report=reports.append)
    assert kept(tmp_path) == [2, 4, 6]
    assert len(reports) == 1 and reports[0].startswith("warning: the new checkpoint checkpoints/step-6 does not verify")
    assert "model.safetensors is truncated (100 of" in reports[0]


def test_keep_last_is_at_least_one():
    with pytest.raises(ValueError, match="keep_last must be >= 1; got 0"):
        build(PretrainConfig, {"output": "o", "max_steps": 1, "keep_last": 0})
    with pytest.raises(ValueError, match="keep_last must be >= 1; got 0"):
        build(FinetuneConfig, {"output": "o", "max_steps": 1, "keep_last": 0})


# ---- one run per folder --------------------------------------------------------------------


def test_a_run_without_an_output_folder_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # LoopConfig's default output is "": it must not mean the current folder
    with pytest.raises(ValueError, match="--output is required"):
        check_output(Path(LoopConfig().output), LoopConfig())
    assert list(tmp_path.iterdir()) == []


def test_a_folder_holding_a_run_needs_resume_or_overwrite(tmp_path):
    settings = LoopConfig(output=str(tmp_path), max_steps=1)
    check_output(tmp_path / "nothing-yet", replace(settings, resume=True))  # a preemption script may always resume
    (tmp_path / "config.yaml").write_text("{}")
    for stale in ("checkpoints/step-2", "model", "best"):
        (tmp_path / stale).mkdir(parents=True)
    with pytest.raises(ValueError, match="already holds a run: pass --resume to continue it, or --overwrite"):
        check_output(tmp_path, settings)
    check_output(tmp_path, replace(settings, overwrite=True))  # allowed, and nothing removed yet
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best", "checkpoints", "config.yaml", "model"]
    clear_old_run(tmp_path)  # the loop's next move, once the new run's input is built
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best", "config.yaml"]


# ---- resuming a pre-training ---------------------------------------------------------------


@pytest.fixture(scope="module")
def small_run(tmp_path_factory, lines):
    """A finished 6-step run with checkpoints at steps 2, 4, 6 (a small vocabulary keeps it fast)."""
    folder = tmp_path_factory.mktemp("small-run")
    corpus = folder / "plays.txt"
    corpus.write_text("\n\n".join(" ".join(lines[i : i + 6]) for i in range(0, 240, 6)), encoding="utf-8")
    train_tokenizer(lines[:2000], kind="wordpiece", vocab_size=400).save_pretrained(folder / "tokenizer")
    config = build(PretrainConfig, dict(
        output=str(folder / "run"), corpus=(str(corpus),), tokenizer=str(folder / "tokenizer"), preset="bert-tiny",
        max_steps=6, batch_size=4, max_length=32, eval_every=3, eval_blocks=8, save_every=2, keep_last=3,
    ))  # fmt: skip
    pretrain(config)
    return config


def records(output):
    return [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]


def truncate(folder):
    path = folder / "model.safetensors"
    size = path.stat().st_size
    with path.open("r+b") as handle:
        handle.truncate(size - 1000)
    return f"model.safetensors is truncated ({size - 1000:,} of {size:,} bytes)"


def flip(folder):
    path = folder / STATE_FILE
    data = bytearray(path.read_bytes())
    data[-100] ^= 0x01
    path.write_bytes(bytes(data))
    return f"{STATE_FILE} is corrupted (its SHA-256 differs from the manifest)"


def unlist(folder):
    (folder / MANIFEST_FILE).unlink()
    return f"no {MANIFEST_FILE}"


def copy_of(small_run, tmp_path):
    shutil.copytree(small_run.loop.output, tmp_path / "run")
    return small_run.with_loop(output=str(tmp_path / "run"), resume=True)


@pytest.mark.parametrize("damage", [truncate, flip, unlist])
def test_resume_skips_a_damaged_newest_checkpoint(damage, small_run, tmp_path):
    config = copy_of(small_run, tmp_path)
    run = tmp_path / "run"
    reason = damage(run / "checkpoints" / "step-6")
    (run / "checkpoints" / ".step-8.partial-4242").mkdir()  # a killed save
    with (run / "metrics.jsonl").open("a") as handle:
        handle.write('{"step": 7, "loss"')  # a killed write
    reporter = Messages()
    pretrain(config, reporter)
    assert reporter.lines[0] == "pre-training bert-tiny from scratch (lr 0.002, batch 4); stops at 6 steps"
    assert reporter.lines[1] == "removed checkpoints/.step-8.partial-4242: unfinished, left by a killed run"
    assert reporter.lines[2].startswith(f"skipping checkpoints/step-6: {reason}")
    resuming = next(i for i, line in enumerate(reporter.lines) if line.startswith("resuming from "))
    assert reporter.lines[resuming].startswith(f"resuming from {run / 'checkpoints' / 'step-4'} (step 4, ")
    assert reporter.lines[resuming + 1] == "dropped 4 records after step 4 from metrics.jsonl (they are trained again)"
    expected, got = load_file(f"{small_run.loop.output}/model/model.safetensors"), load_file(run / "model" / "model.safetensors")
    for name, tensor in expected.items():
        assert torch.equal(tensor, got[name]), name
    for key in ("loss", "eval_loss"):  # each step once, with the uninterrupted run's numbers
        expected = [(r["step"], r[key]) for r in records(Path(small_run.loop.output)) if key in r]
        assert [(r["step"], r[key]) for r in records(run) if key in r] == expected


def test_a_resume_refused_for_bad_input_leaves_the_log_and_checkpoints_whole(small_run, tmp_path):
    """The records after the resumed checkpoint are dropped only once the new input is built."""
    config = copy_of(small_run, tmp_path)
    run = tmp_path / "run"
    unlist(run / "checkpoints" / "step-6")  # resuming would start at step 4 and drop the records after it
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    (tmp_path / "blank.txt").write_text("\n \n", encoding="utf-8")
    with pytest.raises(ValueError, match="holds no text for training"):
        pretrain(replace(config, corpus=(str(tmp_path / "blank.txt"),)))
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before


def test_resume_with_every_checkpoint_damaged_is_an_error_naming_each(small_run, tmp_path):
    config = copy_of(small_run, tmp_path)
    reasons = [
        damage(tmp_path / "run" / "checkpoints" / f"step-{step}") for step, damage in ((6, truncate), (4, flip), (2, unlist))
    ]
    with pytest.raises(ValueError, match="--resume: no valid checkpoint in") as error:
        pretrain(config)
    for step, reason in zip((6, 4, 2), reasons):
        assert f"skipping checkpoints/step-{step}: {reason}" in str(error.value)
    assert str(error.value).endswith("pass --overwrite to start afresh")


def test_resume_before_the_first_checkpoint_starts_from_the_beginning(small_run, tmp_path):
    config = small_run.with_loop(output=str(tmp_path / "run"), max_steps=3, save_every=100, resume=True)
    with pytest.raises(Killed):
        pretrain(config, Messages(stop_at=2))  # killed at step 2, before any checkpoint
    assert (tmp_path / "run" / "config.yaml").exists() and not (tmp_path / "run" / "checkpoints").exists()
    reporter = Messages()
    result = pretrain(config, reporter)
    assert f"--resume: {tmp_path / 'run'} holds no checkpoint yet: starting from the beginning" in reporter.lines
    assert result.steps == 3
    assert [(r["step"], "loss" in r) for r in records(tmp_path / "run")] == [
        (0, False),
        (1, True),
        (2, True),
        (3, True),
        (3, False),
    ]
