"""``tokenmask study --finetune DATA`` end to end on a tiny model: every model fine-tuned on a user's CSV at label
budgets, seeds, augmentation rates and pre-training shares; the best model kept; killed mid-fine-tuning and resumed;
token labelling on JSON lines; a resume's forecast from the pace its machine measured."""

from __future__ import annotations

import csv
import json
import random
import re
import sys
from pathlib import Path

import pytest
from test_study_cli import fingerprint, kill_when_logged
from transformers import BertConfig, BertForMaskedLM

from tokenmask.cli.main import main
from tokenmask.experiments.downstream import check_finetune_length
from tokenmask.experiments.study import study_config
from tokenmask.train.models import resolve_checkpoint

WORDS = {"good": ["great", "wonderful", "superb", "lovely"], "bad": ["awful", "dreadful", "boring", "weak"]}
FILLER = ["the", "play", "was", "and", "a", "scene", "king", "queen"]


@pytest.fixture(scope="module")
def labelled(tmp_path_factory):
    """A user's labelled CSVs: 90 training and 30 held-out reviews, two labels told apart by their words."""
    folder = tmp_path_factory.mktemp("labelled")
    rng = random.Random(0)
    rows = []
    for i in range(120):
        label = "good" if i % 2 else "bad"
        words = rng.choices(WORDS[label], k=2) + rng.choices(FILLER, k=6)
        rng.shuffle(words)
        rows.append({"review": " ".join(words), "verdict": label})
    for name, part in (("train.csv", rows[:90]), ("eval.csv", rows[90:])):
        with (folder / name).open("w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, ["review", "verdict"])
            writer.writeheader()
            writer.writerows(part)
    return folder / "train.csv", folder / "eval.csv"


def downstream_argv(corpus: Path, tokenizer: Path, labelled: tuple[Path, Path], output: Path, *extra: str) -> list[str]:
    train, held_out = labelled
    return [
        "study", str(corpus), "--output", str(output), "--tokenizer", str(tokenizer), "--preset", "bert-tiny",
        "--strategies", "token", "--rates", "0.15", "--max-steps", "8", "--save-every", "4", "--eval-every", "4",
        "--batch-size", "4", "--max-length", "32", "--cpu", "--finetune", str(train), "--finetune-eval", str(held_out),
        "--text-column", "review", "--label-column", "verdict", "--label-budgets", "20,all", "--finetune-seeds", "2",
        "--augment-rates", "0,0.1", "--pretrain-fractions", "0.5,1", "--finetune-max-steps", "3",
        "--finetune-batch-size", "8", *extra,
    ]  # fmt: skip


def test_every_model_is_fine_tuned_on_the_users_csv_and_the_best_one_kept(
    corpus_and_tokenizer, labelled, tmp_path, capsys, one_thread
):
    corpus, tokenizer = corpus_and_tokenizer
    output = tmp_path / "study"
    assert main(downstream_argv(corpus, tokenizer, labelled, output)) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "train: 90 examples" in printed and "validation: 30 examples" in printed
    assert "each model fine-tuned at 2 label budgets x 2 augmentation rates x 2 seeds, 3 steps each" in printed
    assert "about " in printed and " for 26 cells (measured here: pre-training " in printed  # the forecast, measured first
    study = json.loads((output / "study.json").read_text())
    assert study["complete"] and len(study["cells"]) == 2 + 8 + 16
    tuned = [cell for cell in study["cells"] if cell.get("role") == "finetune"]
    for cell in tuned:
        assert cell["steps"] == 3 and list(cell["scores"]) == ["clean", "typo-0.1", "delete-0.2", "unk-0.2"]
        assert cell["examples"] == (20 if cell["size"] == "20" else 90)
        assert all(0.0 <= value <= 1.0 for scores in cell["scores"].values() for value in scores.values())
    tokens = {(c["point"], c["fraction"]): c["pretrain_tokens"] for c in tuned}
    assert tokens == {("baseline", 0.0): 0, ("token-0.15-bert", 0.5): 4 * 4 * 32, ("token-0.15-bert", 1.0): 8 * 4 * 32}
    snapshot = output / "cells" / "token-0.15-bert-seed0" / "pretrain" / "snapshots" / "fraction-0.5"
    half = next(c for c in tuned if c["fraction"] == 0.5)
    from tokenmask.experiments.downstream import finetune_folder

    results = json.loads((output / finetune_folder(half) / "results.json").read_text())
    assert results["config"]["model"] == str(snapshot) and results["config"]["augment_rate"] == half["augment"]
    # the same seed draws the same sample, whichever model it fine-tunes: the pairs are paired
    assert {json.loads((output / finetune_folder(c) / "results.json").read_text())["config"]["seed"] for c in tuned} == {0, 1}
    best = study["best_model"]
    assert best["value"] == max(c["scores"]["clean"]["macro_f1"] for c in tuned) and best["folder"] == "best-model"
    card = (output / "best-model" / "README.md").read_text()
    assert card.startswith("---\n") and "## How this model was chosen" in card and best["name"] in card
    assert (output / "best-model" / "model.safetensors").exists()
    assert not [c for c in tuned if (output / finetune_folder(c) / "model").exists()]  # only the best one stays
    assert study["downstream"]["primary"] == "macro_f1"
    assert (output / "report.html").exists()


def test_a_study_killed_mid_fine_tuning_resumes_it_from_its_checkpoint(
    corpus_and_tokenizer, labelled, tmp_path, capsys, one_thread
):
    corpus, tokenizer = corpus_and_tokenizer
    output = tmp_path / "study"
    argv = downstream_argv(corpus, tokenizer, labelled, output, "--no-estimate", "--label-budgets", "all", "--finetune-seeds",
                           "1", "--augment-rates", "0", "--pretrain-fractions", "1", "--finetune-max-steps", "30")  # fmt: skip
    baseline = output / "cells" / "baseline-seed0" / "tune" / "fraction-0" / "size-all" / "augment-0" / "seed-0"
    killed = output / "cells" / "token-0.15-bert-seed0" / "tune" / "fraction-1" / "size-all" / "augment-0" / "seed-0"
    kill_when_logged([sys.executable, "-m", "tokenmask", *argv], killed, steps=15, log=tmp_path / "killed.log")
    assert (baseline / "cell.json").exists() and not (killed / "cell.json").exists()
    before = fingerprint(baseline)
    assert main([*argv, "--resume"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "3 finished before, kept" in printed and printed.count("resuming from ") == 1
    kept = {name: seen for name, seen in before.items() if not name.startswith("model/")}
    assert fingerprint(baseline) == kept  # untouched, but for its model: only the best one stays
    records = [json.loads(line) for line in (killed / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if "loss" in r] == list(range(1, 31))  # each step once
    assert json.loads((output / "study.json").read_text())["complete"]
    finished = fingerprint(killed)
    assert main([*argv, "--resume", "--finetune-seeds", "2"]) == 0  # one more seed: two more fine-tunings
    printed = " ".join(capsys.readouterr().out.split())
    assert (
        "4 finished before, kept" in printed and "the plan changed along its axes (finetune (seeds)): 2 cells to run" in printed
    )
    study = json.loads((output / "study.json").read_text())
    assert study["complete"] and sorted(c["seed"] for c in study["cells"] if c.get("role") == "finetune") == [0, 0, 1, 1]
    assert {k: v for k, v in fingerprint(killed).items() if not k.startswith("model/")} == {
        k: v for k, v in finished.items() if not k.startswith("model/")
    }  # the finished seed is kept as it was
    kept = json.loads((output / "best-model" / "tokenmask.json").read_text())
    assert kept == study["best_model"] and (output / "best-model" / "model.safetensors").exists()
    assert f"By `tokenmask study`: {kept['how']}." in (output / "best-model" / "README.md").read_text()


def test_a_token_labelling_study_on_json_lines_goes_by_span_f1(corpus_and_tokenizer, tagged_jsonl, tmp_path, capsys, one_thread):
    corpus, tokenizer = corpus_and_tokenizer
    output = tmp_path / "study"
    argv = [
        "study", str(corpus), "--output", str(output), "--tokenizer", str(tokenizer), "--preset", "bert-tiny",
        "--strategies", "token", "--rates", "0.15", "--max-steps", "4", "--batch-size", "4", "--max-length", "32", "--cpu",
        "--no-estimate", "--finetune", str(tagged_jsonl), "--task", "tokens", "--label-budgets", "50",
        "--finetune-seeds", "2", "--finetune-max-steps", "3", "--finetune-batch-size", "8",
    ]  # fmt: skip
    assert main(argv) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "task tokens" in printed and "held-out span_f1 " in printed
    study = json.loads((output / "study.json").read_text())
    tuned = [cell for cell in study["cells"] if cell.get("role") == "finetune"]
    assert study["complete"] and len(tuned) == 4 and {c["examples"] for c in tuned} == {50}
    for cell in tuned:  # no corrupted copies: a deleted word would leave its tag without a word
        assert list(cell["scores"]) == ["clean"] and set(cell["scores"]["clean"]) >= {"accuracy", "span_f1"}
    downstream = study["downstream"]
    assert downstream["primary"] == "span_f1" and downstream["sets"] == ["clean"]
    compared = [row for row in downstream["against_baseline"] if row["paired"] and row["metric"] == "span_f1"]
    assert len(compared) == 1 and compared[0]["paired"]["n"] == 2
    assert study["best_model"]["metric"] == "span_f1"
    assert study["best_model"]["value"] == max(c["scores"]["clean"]["span_f1"] for c in tuned)
    verdict = (output / "report.html").read_text().split("<p>", 1)[1].split("</p>", 1)[0]
    # the metric is named whichever verdict the tiny numbers reach ("raised span-F1 by", "on span-F1: …")
    assert verdict.startswith("At 50 labels, ") and re.search(r"\bspan-F1\b", verdict) and "macro-F1" not in verdict


def test_a_resume_forecasts_with_the_pace_its_machine_measured_and_times_it_again_elsewhere(
    corpus_and_tokenizer, labelled, tmp_path, capsys, one_thread, monkeypatch
):
    corpus, tokenizer = corpus_and_tokenizer
    output = tmp_path / "study"
    argv = downstream_argv(corpus, tokenizer, labelled, output, "--label-budgets", "20", "--finetune-seeds", "1",
                           "--augment-rates", "0", "--pretrain-fractions", "1")  # fmt: skip
    assert main(argv) == 0
    assert " for 4 cells (measured here: pre-training " in " ".join(capsys.readouterr().out.split())  # timed: a new study
    saved = json.loads((output / "pace.json").read_text())
    from tokenmask.experiments.pace import this_machine

    assert saved["machine"] == this_machine() and saved["finetune"]["step"] > 0
    assert main([*argv, "--resume", "--finetune-seeds", "2"]) == 0  # two more fine-tunings, on the machine that timed it
    printed = " ".join(capsys.readouterr().out.split())
    assert f" for 2 cells (measured here on {saved['measured']}: " in printed
    assert json.loads((output / "pace.json").read_text()) == saved  # kept, not timed again

    monkeypatch.setattr("tokenmask.experiments.pace.this_machine", lambda: "another processor, 16 cores + NVIDIA H200")
    assert main([*argv, "--resume", "--finetune-seeds", "3"]) == 0  # the study moved: its pace is measured again
    printed = " ".join(capsys.readouterr().out.split())
    assert " for 2 cells (measured here: fine-tuning " in printed and "measured here on" not in printed
    assert json.loads((output / "pace.json").read_text())["machine"] == "another processor, 16 cores + NVIDIA H200"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--finetune", "missing.csv"], "missing.csv"),
        (["--finetune", "builtin", "--label-budgets", "0"], "label budgets must be whole numbers >= 1 or 'all'; got 0"),
        (["--finetune", "builtin", "--robustness-sets", "typo"], "--robustness-sets: expected KIND=RATE"),
    ],
)
def test_bad_fine_tuning_input_exits_2_with_one_line_and_no_study(tmp_path, capsys, extra, message, monkeypatch):
    monkeypatch.chdir(tmp_path)
    output = tmp_path / "study"
    assert main(["study", "--output", str(output), "--max-steps", "1", "--strategies", "token", "--no-estimate", *extra]) == 2
    error = capsys.readouterr().err
    assert error.startswith("tokenmask study: error: ") and message in error and error.count("\n") == 1
    assert not (output / "study.json").exists()


def test_a_label_budget_beyond_the_training_examples_is_refused(labelled, tmp_path, capsys):
    train, held_out = labelled
    output = tmp_path / "study"
    argv = ["study", "--output", str(output), "--max-steps", "1", "--strategies", "token", "--no-estimate",
            "--finetune", str(train), "--finetune-eval", str(held_out), "--text-column", "review", "--label-column", "verdict",
            "--label-budgets", "20,100"]  # fmt: skip
    assert main(argv) == 2
    assert "--label-budgets 100 is more than the 90 training examples: give at most 90, or all" in capsys.readouterr().err
    assert not (output / "study.json").exists()


def test_fine_tuning_longer_than_the_init_checkpoints_positions_is_refused_before_any_cell(
    corpus_and_tokenizer, labelled, bert_tokenizer, tmp_path, capsys
):
    corpus, _ = corpus_and_tokenizer
    train, held_out = labelled
    short = tmp_path / "short"  # a checkpoint with positions for 48 tokens
    BertForMaskedLM(
        BertConfig(vocab_size=len(bert_tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                   intermediate_size=64, max_position_embeddings=48)
    ).save_pretrained(short)  # fmt: skip
    bert_tokenizer.save_pretrained(short)
    capsys.readouterr()
    output = tmp_path / "study"
    argv = ["study", str(corpus), "--output", str(output), "--init", str(short), "--max-length", "32", "--max-steps", "1",
            "--strategies", "token", "--finetune", str(train), "--finetune-eval", str(held_out), "--text-column", "review",
            "--label-column", "verdict", "--label-budgets", "20", "--cpu"]  # fmt: skip
    assert main([*argv, "--finetune-max-length", "64"]) == 2
    error = capsys.readouterr().err
    assert error == f"tokenmask study: error: --finetune-max-length 64 is over the 48 positions of {short}: give 48 or less\n"
    assert not output.exists()
    check_finetune_length(resolve_checkpoint(str(short)), study_config({"output": "o", "max_length": 32}).base, 48)  # fits


def test_mlm_against_rtd_is_one_study_scored_downstream(corpus_and_tokenizer, labelled, tmp_path, capsys, one_thread):
    corpus, tokenizer = corpus_and_tokenizer
    output = tmp_path / "study"
    argv = downstream_argv(corpus, tokenizer, labelled, output, "--objectives", "mlm,rtd", "--no-estimate")
    argv = [*argv[: argv.index("--preset") + 1], "electra-tiny", *argv[argv.index("--preset") + 2 :]]
    argv[argv.index("--label-budgets") + 1], argv[argv.index("--augment-rates") + 1] = "all", "0"
    argv[argv.index("--pretrain-fractions") + 1] = "1"
    assert main(argv) == 0
    study = json.loads((output / "study.json").read_text())
    trained = {c["point"]: c for c in study["cells"] if c.get("role") == "pretrain"}
    assert set(trained) == {"token-0.15-bert", "rtd-token-0.15-bert"}
    rtd_run = output / "cells" / "rtd-token-0.15-bert-seed0" / "pretrain"
    assert (rtd_run / "generator" / "config.json").is_file()  # the rtd cell trained a detector; its model is the discriminator
    assert json.loads((rtd_run / "model" / "config.json").read_text())["architectures"] == ["ElectraForPreTraining"]
    tuned = [c for c in study["cells"] if c.get("role") == "finetune"]
    assert sorted((c["point"], c.get("objective")) for c in tuned) == sorted(
        [("baseline", None)] * 2 + [("token-0.15-bert", "mlm")] * 2 + [("rtd-token-0.15-bert", "rtd")] * 2
    )
    downstream = study["downstream"]
    (row,) = [r for r in downstream["objective"] if r["set"] == "clean" and r["metric"] == "macro_f1"]
    assert row["point"] == "rtd-token-0.15-bert" and row["against"]["point"] == "token-0.15-bert" and len(row["values"]) == 2
    report = (output / "report.html").read_text(encoding="utf-8")
    assert "Replaced-token detection against the masked LM" in report and "Against the masked LM with the same masking" in report
    assert "Objectives mlm, rtd x strategies token x rates 0.15" in report and "scored by its generator" in report
