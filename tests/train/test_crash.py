"""Crashes: a pre-training killed (SIGKILL) at random moments and resumed each time ends bit-identical.

Both objectives: masked LM, and replaced-token detection (whose generator samples and whose
second model must come back exactly too); and today's recipe (documents apart, masking-rate
phases, a batch-size warm-up, a decay run from another run's checkpoint).

The runs go through the command line in subprocesses, as a preemption script would drive
them: every start of the killed run passes ``--resume`` (the first one finds no run yet).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import tokenmask

STEPS = 40  # of 4 blocks of 32 tokens: corpus_and_tokenizer (conftest.py) has 155, so the run crosses an epoch
KILLS = 3  # each start costs ~10 s of imports on 2 cores: the test's time is mostly starts


OBJECTIVES = {
    "mlm": ["--preset", "bert-tiny", "--decay", "0.5"],  # warm-up/stable/decay: the peak until step 20
    "rtd": ["--preset", "electra-tiny", "--objective", "rtd"],
    "rtd-modernbert": ["--preset", "modernbert-tiny", "--objective", "rtd"],  # its discriminator is tokenmask's own module
    # today's recipe: documents apart, 30% then 15% masking, a batch growing from 1 to 2 micro-batches over
    # 1,000 tokens (8 steps), and a 1 - sqrt decay run from a stable run's checkpoint (made first, below)
    "recipe-2025": [
        "--preset", "modernbert-tiny", "--packing", "documents", "--mlm-probability", "0.3", "--mlm-phases", "0.5:0.15",
        "--grad-accum", "2", "--batch-warmup-tokens", "1000", "--schedule", "sqrt", "--decay-from", "STABLE",
    ],
}  # fmt: skip


def command(corpus: Path, tokenizer: Path, output: Path, objective: str = "mlm") -> list[str]:
    stable = str(output.parent / "stable" / "checkpoints" / "step-3")
    return [
        sys.executable, "-m", "tokenmask", "pretrain", str(corpus), "--output", str(output),
        "--tokenizer", str(tokenizer), *[stable if flag == "STABLE" else flag for flag in OBJECTIVES[objective]],
        "--max-steps", str(STEPS), "--save-every", "3",
        "--eval-every", "10", "--batch-size", "4", "--max-length", "32", "--cpu", "--no-demo", "--seed", "7",
        "--no-cache",  # the runs go side by side: no shared block cache to race on
    ]  # fmt: skip


def environment() -> dict[str, str]:
    """This checkout's tokenmask; one thread each (two runs share the cores; oversubscribed
    threads are ~10x slower here); unbuffered, wide output, so a killed run's messages survive."""
    source = str(Path(tokenmask.__file__).resolve().parents[1])
    existing = os.environ.get("PYTHONPATH")
    return {
        **os.environ,
        "PYTHONPATH": source + (os.pathsep + existing if existing else ""),
        "OMP_NUM_THREADS": "1",
        "PYTHONUNBUFFERED": "1",
        "COLUMNS": "200",
    }


def logged_steps(output: Path) -> int:
    """The highest training step in OUTPUT/metrics.jsonl (a half-written last line is skipped)."""
    steps = [0]
    path = output / "metrics.jsonl"
    for line in path.read_text(encoding="utf-8").splitlines() if path.exists() else []:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if "loss" in record:
            steps.append(record["step"])
    return max(steps)


def records(output: Path) -> list[dict]:
    return [json.loads(line) for line in (output / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_killed_and_resumed_run_ends_bit_identical(corpus_and_tokenizer, tmp_path, objective):
    corpus, tokenizer = corpus_and_tokenizer
    env, rng, cut = environment(), random.Random(2024), tmp_path / "cut"
    running: list[subprocess.Popen] = []

    def start(argv: list[str], name: str) -> subprocess.Popen:
        with (tmp_path / f"{name}.log").open("w") as log:
            running.append(subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT))
        return running[-1]

    try:
        if objective == "recipe-2025":  # the stable run the decay starts from: 3 steps of the plain recipe
            stable = [*command(corpus, tokenizer, tmp_path / "stable"), "--preset", "modernbert-tiny"]
            stable[stable.index("--max-steps") + 1] = "3"
            assert start(stable, "stable").wait(timeout=300) == 0, (tmp_path / "stable.log").read_text()
        whole = start(command(corpus, tokenizer, tmp_path / "whole", objective), "whole")  # side by side with the killed one
        kills, reached = [], 0
        for attempt in range(KILLS):
            process = start([*command(corpus, tokenizer, cut, objective), "--resume"], f"cut-{attempt}")
            # run past every step logged before (so each start makes progress), then die at a random moment
            target, deadline = reached + rng.randint(1, 8), time.monotonic() + 300
            while logged_steps(cut) < target and process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(rng.uniform(0.0, 0.4))
            if process.poll() is None:
                process.kill()  # SIGKILL: no handler, no flush, no clean-up
                kills.append(logged_steps(cut))
            process.wait(timeout=60)
            reached = max(reached, logged_steps(cut))
        last = start([*command(corpus, tokenizer, cut, objective), "--resume"], f"cut-{KILLS}")
        assert last.wait(timeout=300) == 0, (tmp_path / f"cut-{KILLS}.log").read_text()
        assert whole.wait(timeout=300) == 0, (tmp_path / "whole.log").read_text()
    finally:
        for process in running:
            if process.poll() is None:
                process.kill()
                process.wait()
    outputs = [(tmp_path / f"cut-{attempt}.log").read_text() for attempt in range(KILLS + 1)]
    assert len(kills) >= KILLS - 1, f"killed after steps {kills}: the runs ended before the kills"
    assert "holds no checkpoint yet: starting from the beginning" in outputs[0]
    assert any("resuming from" in text for text in outputs[1:]), outputs

    detection = objective.startswith("rtd")
    for folder in ("model", "generator") if detection else ("model",):
        expected = load_file(tmp_path / "whole" / folder / "model.safetensors")
        got = load_file(cut / folder / "model.safetensors")
        assert expected.keys() == got.keys()
        for name, tensor in expected.items():
            assert torch.equal(tensor, got[name]), f"{folder}: {name} differs after kills at steps {kills}"
    training = [(r["step"], r["loss"]) for r in records(cut) if "loss" in r]
    assert [step for step, _ in training] == list(range(1, STEPS + 1))  # each step once, in order
    assert training == [(r["step"], r["loss"]) for r in records(tmp_path / "whole") if "loss" in r]
    scores = ("eval_loss", "eval_detector_accuracy", "eval_detector_recall") if detection else ("eval_loss",)
    evaluations = [(r["step"], *(r[k] for k in scores)) for r in records(cut) if "eval_loss" in r]
    assert evaluations == [(r["step"], *(r[k] for k in scores)) for r in records(tmp_path / "whole") if "eval_loss" in r]
    assert [step for step, *_ in evaluations] == [0, 10, 20, 30, 40]
    assert not list(cut.glob("**/.*partial*")) and not list(cut.glob("**/.*previous*"))
