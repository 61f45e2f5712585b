"""The GPU benchmark's tiny CPU mode runs, so that the script is ready when a GPU is lent."""

from __future__ import annotations

import json
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
