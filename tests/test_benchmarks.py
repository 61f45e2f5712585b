"""The benchmarks' tiny modes run, so that the scripts cannot rot: the GPU one on the CPU (ready when a GPU
is lent), the block cache one on a 1.5 MiB corpus."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_gpu_benchmark_runs_tiny_on_the_cpu(tmp_path):
    out = tmp_path / "gpu.json"
    command = [
        sys.executable,
        str(ROOT / "benchmarks" / "gpu.py"),
        "--tiny",
        "--device",
        "cpu",
        "--steps",
        "5",
        "--json",
        str(out),
    ]
    finished = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert finished.returncode == 0, finished.stderr[-3000:]
    result = json.loads(out.read_text())
    assert [c["model"] for c in result["cases"]] == ["bert-tiny", "modernbert-tiny"]
    for case in result["cases"]:
        assert case["tokens_per_s"] > 0 and case["hf_tokens_per_s"] > 0
        assert 0 < case["mask_share"] < 1 and case["mask_gtok_per_s"] > 0
        assert case["mfu"] is None  # no known peak for a CPU: no made-up MFU
        # 6 N + attention + head: at least 6 x the encoder's parameters of a 2-layer, 128-wide model
        assert case["flops_per_token"] > 6 * 2 * 12 * 128 * 128
    assert f"{case['model']} x {case['length']}" in finished.stdout
    assert [(r["documents"], r["compile"]) for r in result["recipe"]] == [(False, False), (True, False)]
    assert all(r["tokens_per_s"] > 0 for r in result["recipe"]) and "304k tokens/s per H100" in finished.stdout


def test_the_recipe_and_unpadded_benchmarks_run_tiny(tmp_path):
    for script, argv in (
        ("recipe.py", [str(tmp_path / "recipe"), "--tiny", "--pretrain-seeds", "1", "--seeds", "1"]),
        ("unpadded.py", ["--tiny"]),
    ):
        out = tmp_path / f"{script}.json"
        command = [sys.executable, str(ROOT / "benchmarks" / script), *argv, "--json", str(out)]
        finished = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=tmp_path)
        assert finished.returncode == 0, finished.stdout[-2000:] + finished.stderr[-3000:]
        result = json.loads(out.read_text())
        if script == "recipe.py":
            assert list(result["arms"]) == ["blocks", "documents", "phases", "both"]
            assert all(len(arm["finetune_accuracy"]) == 1 for arm in result["arms"].values())
        else:
            assert result["cases"][0]["seconds_per_step"]["unpadded"] > 0


def test_the_cache_benchmark_runs_tiny(tmp_path, tmp_path_factory):
    out = tmp_path / "corpus.json"
    command = [sys.executable, str(ROOT / "benchmarks" / "corpus.py"), "--tiny", "--json", str(out)]
    # a short folder: multiprocessing's forkserver puts a socket under TMPDIR, and a Unix socket's
    # path is limited to 107 bytes (a test's own tmp_path, under xdist's worker folder, is too long)
    scratch = tmp_path_factory.mktemp("tmp")
    env = {**os.environ, "TMPDIR": str(scratch)}  # where the corpus is written, then deleted
    finished = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    assert finished.returncode == 0, finished.stderr[-3000:]
    result = json.loads(out.read_text())
    single, one, two = result["rows"]
    assert (single["one_thread"], one["num_proc"], two["num_proc"]) == (True, 1, 2) and one["shard_files"] > 10
    assert single["blocks_sha256"] == one["blocks_sha256"]
    assert one["blocks_sha256"] == two["blocks_sha256"] and one["text_tokens"] == two["text_tokens"] > 300_000
    for row in (one, two):
        assert row["tokens_per_s"] > 0 and 4.0 < row["bytes_per_token"] < 4.5  # uint16 ids and int16 word ids, and offsets
        assert row["main_peak_mib"] > 50 and row["tree_pss_mib"] > 50
    assert one["processes"] == 1 and two["processes"] >= 3  # the build, the fork server, the workers
    assert "same blocks" in finished.stdout and " NO" not in finished.stdout
    assert list(scratch.iterdir()) == []  # the corpus is deleted


def test_the_question_answering_benchmark_runs_tiny(tmp_path):
    """Both sides of benchmarks/qa.py on 64 SQuAD questions for a few seconds each, scored on 4."""
    out = tmp_path / "qa.json"
    command = [sys.executable, str(ROOT / "benchmarks" / "qa.py"), "--tiny", "--json", str(out)]
    finished = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert finished.returncode == 0, finished.stderr[-3000:]
    result = json.loads(out.read_text())
    for side in ("ours", "hf"):
        assert result[side]["steps"] >= 1 and 0 <= result[side]["exact_match"] <= result[side]["f1"] <= 100
    assert "HF Trainer (run_qa.py)" in finished.stdout
