"""A Hub commit, once chosen, stays: through a resume after the branch moved, a study's baseline,
and a replay; permission to run a repository's code is given on the command line, every time.

Through the session's Hub cache (``hub_cache``, ``HF_HUB_OFFLINE=1``), in-process, tiny runs.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from hub_checkpoints import lay_out_cache
from tokenmask.cli.main import main

TINY = ["--max-length", "32", "--batch-size", "2", "--report-to", "none", "--cpu", "--precision", "fp32", "--eval-blocks", "2"]


def settings(run: Path) -> dict:
    return yaml.safe_load((run / "config.yaml").read_text(encoding="utf-8"))


def test_a_resumed_run_keeps_the_commit_it_started_from_when_the_branch_moves(hub_cache, plays_file, tmp_path, capsys):
    repo, bert = "tokenmask-test/moving", hub_cache.families["bert"]
    first = lay_out_cache(hub_cache.home, repo, hub_cache.snapshot(bert))  # main -> the bert weights
    run = tmp_path / "run"
    argv = ["pretrain", str(plays_file(600, 6)), "--init", repo, "--output", str(run), *TINY, "--save-every", "2", "--no-demo"]
    assert main([*argv, "--max-steps", "2"]) == 0
    moved = lay_out_cache(hub_cache.home, repo, hub_cache.snapshot(bert, "v1"))  # main moves on to other weights
    assert moved != first and settings(run)["revision"] == first
    capsys.readouterr()
    assert main([*argv, "--max-steps", "4", "--resume"]) == 0
    assert settings(run)["revision"] == first  # not the commit main stands for now
    assert f"continuing {repo} (Hub revision {first})" in " ".join(capsys.readouterr().out.split())
    assert first in (run / "model" / "README.md").read_text(encoding="utf-8")


def test_remote_code_runs_through_the_demo_and_a_resume_but_a_replay_must_ask_again(hub_cache, plays_file, tmp_path, capsys):
    run = tmp_path / "run"
    argv = [
        "pretrain",
        str(plays_file(600, 6)),
        "--init",
        hub_cache.remote_code,
        "--output",
        str(run),
        *TINY,
        "--save-every",
        "2",
    ]
    assert main([*argv, "--max-steps", "2", "--trust-remote-code"]) == 0  # the fill-mask demo opens the saved model too
    assert "answer among the top 3 guesses" in capsys.readouterr().out
    assert main([*argv, "--max-steps", "3", "--resume", "--trust-remote-code", "--no-demo"]) == 0
    saved = settings(run)
    assert saved["init"] == hub_cache.remote_code and "trust_remote_code" not in saved
    capsys.readouterr()
    assert main(["pretrain", "--config", str(run / "config.yaml"), "--output", str(tmp_path / "replay"), "--no-demo"]) == 2
    assert "unless you give --trust-remote-code" in capsys.readouterr().err and not (tmp_path / "replay").exists()


def test_a_study_fine_tunes_its_baseline_at_the_commit_of_its_cells(hub_cache, plays_file, tmp_path):
    repo = hub_cache.families["bert"]
    v1 = hub_cache.commits[repo]["v1"]
    recipe = tmp_path / "pretrain.yaml"
    recipe.write_text(yaml.safe_dump({"max_steps": 1, "max_length": 32, "batch_size": 2, "report_to": "none", "cpu": True,
                                      "precision": "fp32", "eval_blocks": 2}))  # fmt: skip
    tuning = tmp_path / "finetune.yaml"
    tuning.write_text("max_steps: 1\nbatch_size: 2\n")
    argv = [
        "study", str(plays_file(600, 6)), "--init", repo, "--revision", "v1", "--output", str(tmp_path / "study"),
        "--strategies", "token", "--rates", "0.15", "--pretrain-config", str(recipe), "--finetune", "builtin",
        "--finetune-config", str(tuning), "--finetune-seeds", "1", "--robustness-sets", "none",
    ]  # fmt: skip
    assert main(argv) == 0
    cells = tmp_path / "study" / "cells"
    pretrained = [settings(folder / "pretrain") for folder in cells.iterdir() if (folder / "pretrain").is_dir()]
    tuned = {folder.name: settings(next((folder / "tune").rglob("seed-0"))) for folder in cells.iterdir()}
    assert pretrained and set(tuned) == {"baseline-seed0", "token-0.15-bert-seed0"}
    assert {cell["revision"] for cell in pretrained} == {v1} and {cell["init"] for cell in pretrained} == {repo}
    baseline = tuned["baseline-seed0"]
    assert (baseline["model"], baseline["revision"]) == (repo, v1)  # --init itself, at the same commit
    assert tuned["token-0.15-bert-seed0"]["revision"] is None  # a cell's model is a folder
    assert settings(tmp_path / "study")["revision"] == v1
