"""Trackers in their offline modes (W&B offline, MLflow on a local folder), and one that fails to start.

TensorBoard's events are read back in tests/train/test_loop.py. These trackers are in the
``dev`` extra, so ``make test`` runs every test here.
"""

from __future__ import annotations

import json

import pytest
from accelerate import Accelerator

from tokenmask.cli.main import main
from tokenmask.recipes.config import PretrainConfig
from tokenmask.recipes.pretrain import pretrain
from tokenmask.settings import build


@pytest.fixture(scope="module")
def corpus(plays_file):
    return plays_file(800)


def run(corpus, output, report_to):
    settings = dict(
        output=str(output), corpus=(str(corpus),), preset="bert-tiny", max_steps=4, batch_size=4, eval_every=2,
        eval_blocks=4, max_length=32, report_to=report_to,
    )  # fmt: skip
    pretrain(build(PretrainConfig, settings))
    records = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
    return {r["step"]: r["loss"] for r in records if "loss" in r}


def test_mlflow_on_a_local_folder_gets_every_step(corpus, tmp_path, monkeypatch):
    pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlruns").as_uri())
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 prefers a database; a folder is what works offline
    losses = run(corpus, tmp_path / "run", "mlflow")
    (metrics,) = (tmp_path / "mlruns").glob("*/*/metrics")
    logged = [line.split() for line in (metrics / "loss").read_text().splitlines()]  # "timestamp value step"
    assert {int(step): float(value) for _, value, step in logged} == losses
    assert [line.split()[2] for line in (metrics / "eval_accuracy").read_text().splitlines()] == ["0", "2", "4"]
    assert (metrics.parent / "params" / "preset").read_text() == "bert-tiny"  # the run's settings, as its config


def test_wandb_offline_writes_a_run_to_sync_later(corpus, tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    run(corpus, tmp_path / "run", "wandb")
    (log,) = (tmp_path / "wandb").glob("offline-run-*/run-*.wandb")
    written = log.read_bytes()  # W&B's own binary record log: the metrics' names and the settings are in it as text
    assert all(name.encode() in written for name in ("eval_accuracy", "eval_perplexity", "data_seconds", "bert-tiny"))


def test_a_tracker_that_fails_to_start_stops_the_run_before_it_writes(corpus, tmp_path, monkeypatch, capsys):
    def refuse(self, project, config=None, init_kwargs=None):
        raise RuntimeError("api key not configured\nsecond line")

    monkeypatch.setattr(Accelerator, "init_trackers", refuse)
    argv = ["pretrain", str(corpus), "--output", str(tmp_path / "run"), "--preset", "bert-tiny", "--max-steps", "2", "--no-demo"]
    assert main(argv) == 2
    assert "--report-to tensorboard: a tracker failed to start: api key not configured" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
