"""OUTPUT/config.yaml holds every resolved setting; ``--config OUTPUT/config.yaml --output OTHER`` replays the run."""

from __future__ import annotations

import json

import yaml

from tokenmask.cli.main import main
from tokenmask.hub import NEVER_REPLAYED
from tokenmask.recipes.config import FinetuneConfig, PretrainConfig
from tokenmask.settings import flatten


def losses(output):
    records = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
    return [(r["step"], r.get("loss"), r.get("eval_loss")) for r in records]


def opening(capsys) -> str:
    """What the run printed, white space collapsed (the terminal view wraps long lines)."""
    return " ".join(capsys.readouterr().out.split())


def test_a_pretraining_run_replays_from_its_config_yaml(tmp_path, lines, capsys):
    corpus = tmp_path / "plays.txt"
    corpus.write_text("\n\n".join(" ".join(lines[i : i + 6]) for i in range(0, 900, 6)), encoding="utf-8")
    first, second = tmp_path / "first", tmp_path / "second"
    argv = [
        "pretrain", str(corpus), "--output", str(first), "--preset", "bert-tiny", "--max-steps", "4", "--eval-every", "2",
        "--batch-size", "4", "--max-length", "32", "--strategy", "whole_word", "--lr", "1e-3", "--seed", "5", "--no-demo",
    ]  # fmt: skip
    assert main(argv) == 0
    assert opening(capsys).startswith("pre-training bert-tiny from scratch (lr 0.001, batch 4); stops at 4 steps ")
    saved = yaml.safe_load((first / "config.yaml").read_text())
    assert saved.keys() == flatten(PretrainConfig()).keys() - set(NEVER_REPLAYED)  # every setting, resolved
    assert (saved["corpus"], saved["strategy"], saved["max_steps"], saved["max_time"]) == ([str(corpus)], "whole_word", 4, None)
    assert main(["pretrain", "--config", str(first / "config.yaml"), "--output", str(second), "--no-demo"]) == 0
    assert losses(second) == losses(first) and len(losses(first)) >= 4
    assert yaml.safe_load((second / "config.yaml").read_text()) == {**saved, "output": str(second)}


def test_a_finetuning_run_replays_from_its_config_yaml(tmp_path, tiny_mlm_folder, reviews_csv, capsys):
    first, second = tmp_path / "first", tmp_path / "second"
    argv = [
        "finetune", str(reviews_csv), "--model", str(tiny_mlm_folder), "--output", str(first), "--group-by", "movie",
        "--max-steps", "3", "--eval-every", "2", "--batch-size", "8", "--augment-rate", "0.1", "--seed", "2", "--lr", "1e-3",
    ]  # fmt: skip
    assert main(argv) == 0
    assert opening(capsys).startswith(f"fine-tuning {tiny_mlm_folder} (classify); stops at 3 steps ")
    saved = yaml.safe_load((first / "config.yaml").read_text())
    assert saved.keys() == flatten(FinetuneConfig()).keys() - set(NEVER_REPLAYED) and saved["augment_rate"] == 0.1
    assert main(["finetune", "--config", str(first / "config.yaml"), "--output", str(second)]) == 0
    assert losses(second) == losses(first)
