"""``tokenmask study`` end to end on tiny models: killed (SIGKILL) mid-cell and resumed against two jobs
never stopped; the starting model alone over augmentation values; bad input; replay."""

from __future__ import annotations

import csv
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

import tokenmask
from tokenmask.cli.main import main
from tokenmask.experiments.stats import Paired
from tokenmask.experiments.study import study_config

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


@pytest.fixture(scope="module")
def recipes(tmp_path_factory, corpus_and_tokenizer):
    """The two recipes' settings files: 24 pre-training steps of bert-tiny, 4 fine-tuning steps."""
    folder = tmp_path_factory.mktemp("recipes")
    _, tokenizer = corpus_and_tokenizer
    pretraining = {"preset": "bert-tiny", "tokenizer": str(tokenizer), "max_steps": 24, "save_every": 4, "eval_every": 8,
                   "batch_size": 4, "max_length": 32, "cpu": True, "seed": 3, "strategy": "span", "output": "ignored"}  # fmt: skip
    tuning = {"max_steps": 4, "batch_size": 8, "text_column": "review", "label_column": "verdict", "model": "ignored"}
    (folder / "pretrain.yaml").write_text(yaml.safe_dump(pretraining))
    (folder / "finetune.yaml").write_text(yaml.safe_dump(tuning))
    return folder / "pretrain.yaml", folder / "finetune.yaml"


def study_argv(corpus, recipes, labelled, output: Path, *extra: str) -> list[str]:
    return [
        "study", str(corpus), "--output", str(output), "--pretrain-config", str(recipes[0]), "--finetune-config",
        str(recipes[1]), "--strategies", "token,whole_word", "--rates", "0.15", "--finetune", str(labelled[0]),
        "--finetune-eval", str(labelled[1]), "--label-budgets", "20,all", "--finetune-seeds", "2", *extra,
    ]  # fmt: skip


def environment() -> dict[str, str]:
    """This checkout's tokenmask, one thread (the test's process trains beside it), unbuffered."""
    source = str(Path(tokenmask.__file__).resolve().parents[1])
    existing = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": source + (os.pathsep + existing if existing else ""), "OMP_NUM_THREADS": "1",
            "PYTHONUNBUFFERED": "1"}  # fmt: skip


def kill_when_logged(argv: list[str], metrics: Path, *, steps: int, log: Path) -> None:
    """Start ``argv`` and SIGKILL it once ``metrics`` holds ``steps`` training steps: no handler, no clean-up."""
    with log.open("w") as written:
        process = subprocess.Popen(argv, env=environment(), stdout=written, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 240
        while process.poll() is None and time.monotonic() < deadline:
            if metrics.exists() and metrics.read_text(encoding="utf-8").count('"loss"') >= steps:
                break
            time.sleep(0.02)
        assert process.poll() is None, log.read_text()
        process.kill()
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def comparable(record: dict) -> dict:
    """A record without what depends on the clock or the output folder; floats to 6 digits (threads may differ)."""

    def rounded(value):
        if isinstance(value, float):
            return round(value, 6)
        if isinstance(value, dict):
            return {k: rounded(v) for k, v in value.items() if k not in ("minutes", "seconds")}
        return [rounded(v) for v in value] if isinstance(value, list) else value

    return rounded(record)


def test_a_study_killed_mid_cell_and_resumed_records_what_two_jobs_never_stopped_do(
    corpus_and_tokenizer, recipes, labelled, tmp_path, capsys, one_thread
):
    corpus, _ = corpus_and_tokenizer
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    assert main([*study_argv(corpus, recipes, labelled, straight), "--jobs", "2"]) == 0
    expected = json.loads((straight / "study.json").read_text())
    assert expected["complete"] and len(expected["cells"]) == 3 * (1 + 2 * 2)  # baseline and 2 cells, each + 4 fine-tunings
    names = [c["name"] for c in expected["cells"]]
    assert names[:2] == ["baseline-seed3", "baseline-seed3/fraction-0/size-20/augment-0/tune-seed-0"]
    assert names[5] == "token-0.15-bert-seed3" and names[10] == "whole_word-0.15-bert-seed3"
    capsys.readouterr()

    argv = [sys.executable, "-m", "tokenmask", *study_argv(corpus, recipes, labelled, killed)]
    second = killed / "cells" / "whole_word-0.15-bert-seed3" / "pretrain" / "metrics.jsonl"
    kill_when_logged(argv, second, steps=9, log=tmp_path / "killed.log")
    assert main([*study_argv(corpus, recipes, labelled, killed), "--resume"]) == 0
    printed = capsys.readouterr().out
    assert "cell 11/15 whole_word-0.15-bert-seed3: started" in printed and "cell 1/15" not in printed
    assert printed.count("resuming from ") == 1  # the interrupted cell continues from its checkpoint
    record = json.loads((killed / "study.json").read_text())
    assert comparable(record) == comparable(expected)

    tuned = [c for c in record["cells"] if c.get("role") == "finetune"]
    assert {c["examples"] for c in tuned} == {20, 90} and {c["steps"] for c in tuned} == {4}
    assert all(list(c["scores"]) == ["clean", "typo-0.1", "delete-0.2", "unk-0.2"] for c in tuned)
    pretrained = [c for c in record["cells"] if c.get("role") == "pretrain"]
    assert [c["steps"] for c in pretrained] == [24, 24] and len({c["common"]["targets"] for c in pretrained}) == 1
    rows = record["downstream"]["against_baseline"]
    judged = [r for r in rows if r["set"] == "clean" and r["metric"] == "macro_f1" and r["paired"]]
    assert len(judged) == 4 and all(r["paired"]["n"] == 2 for r in judged)  # 2 points x 2 budgets, 2 seeds each
    assert not any((killed / c["folder"] / "model").exists() for c in tuned)  # removed once complete
    page = (killed / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 2 and "whole_word-0.15-bert" in page


def test_the_starting_model_alone_over_augmentation_values_keeps_the_best(tiny_mlm_folder, reviews_csv, tmp_path, one_thread):
    tuning = tmp_path / "finetune.yaml"
    tuning.write_text("max_steps: 4\nbatch_size: 8\ngroup_by: movie\n")
    output = tmp_path / "study"
    argv = ["study", "--output", str(output), "--init", str(tiny_mlm_folder), "--strategies", "none", "--finetune",
            str(reviews_csv), "--finetune-config", str(tuning), "--label-budgets", "40", "--finetune-seeds", "2",
            "--augment-rates", "0,adaptive-0.1", "--robustness-sets", "none", "--keep-best"]  # fmt: skip
    assert main(argv) == 0
    record = json.loads((output / "study.json").read_text())
    assert [c["name"] for c in record["cells"]][1:3] == [
        "baseline-seed0/fraction-0/size-40/augment-0/tune-seed-0",
        "baseline-seed0/fraction-0/size-40/augment-adaptive-0.1/tune-seed-0",
    ]
    rows = [r for r in record["downstream"]["augmentation"] if r["metric"] == "macro_f1"]
    assert [(r["augment"], r["against"]["augment"], r["paired"]["n"]) for r in rows] == [("adaptive-0.1", "0", 2)]
    f1 = {(c["augment"], c["seed"]): c["scores"]["clean"]["macro_f1"] for c in record["cells"] if c.get("scores")}
    expected = Paired.of([f1["adaptive-0.1", seed] - f1["0", seed] for seed in (0, 1)])  # paired on the seed
    assert (rows[0]["paired"]["mean"], rows[0]["paired"]["verdict"]) == (pytest.approx(expected.mean), expected.verdict)
    best = record["best"]
    assert (output / "best-model" / "config.json").exists() and best["metric"] == "macro_f1"
    assert best["value"] == max(c["scores"]["clean"]["macro_f1"] for c in record["cells"] if c.get("scores"))
    assert (output / "report.html").read_text().count("data:image/png;base64,") == 1
    replay = yaml.safe_load((output / "config.yaml").read_text())  # names the study's own copy of each recipe
    assert replay["finetune_config"] == str((output / "finetune.yaml").resolve())
    assert yaml.safe_load((output / "finetune.yaml").read_text())["group_by"] == "movie"


def test_a_token_labelling_study_goes_by_span_f1_without_corrupted_sets(tiny_mlm_folder, tagged_jsonl, tmp_path, one_thread):
    tuning = tmp_path / "finetune.yaml"
    tuning.write_text("task: tokens\nmax_steps: 3\nbatch_size: 8\n")
    output = tmp_path / "study"
    argv = ["study", "--output", str(output), "--init", str(tiny_mlm_folder), "--strategies", "none", "--finetune",
            str(tagged_jsonl), "--finetune-config", str(tuning), "--label-budgets", "50", "--finetune-seeds", "2"]  # fmt: skip
    assert main(argv) == 0
    record = json.loads((output / "study.json").read_text())
    tuned = [c for c in record["cells"] if c.get("role") == "finetune"]
    assert len(tuned) == 2 and all(list(c["scores"]) == ["clean"] for c in tuned)  # no corrupted copies of tagged words
    assert record["best"]["metric"] == "span_f1" and record["downstream"]["primary"] == "span_f1"


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--rates", "0.15,1.5"], r"rates must be in (0, 1]; got 1.5"),
        (["--augment-rates", "0,adaptive-0"], "--augment-rates: 'adaptive-0' is neither"),
        (["--strategies", "none", "--finetune", "", "--finetune-eval", ""], "--strategies none pre-trains nothing"),
        (["--finetune", "missing.csv"], "missing.csv"),
        (["--label-budgets", "500"], "--label-budgets 500 is more than the 90 training examples"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_writes_nothing(
    corpus_and_tokenizer, recipes, labelled, tmp_path, capsys, extra, message
):
    corpus, _ = corpus_and_tokenizer
    output = tmp_path / "study"
    argv = study_argv(corpus, recipes, labelled, output, *extra)
    assert main(argv) == 2
    error = capsys.readouterr().err.strip()
    assert message in error and len(error.splitlines()) == 1 and "Traceback" not in error
    assert not (output / "study.json").exists() and not (output / "config.yaml").exists()


def test_a_new_study_that_fails_inside_its_first_cell_leaves_nothing_behind(corpus_and_tokenizer, tmp_path, capsys):
    corpus, _ = corpus_and_tokenizer
    recipe = tmp_path / "pretrain.yaml"
    recipe.write_text(f"preset: bert-tiny\ntokenizer: {tmp_path / 'no-such-tokenizer'}\nmax_steps: 2\n")
    output = tmp_path / "study"
    argv = ["study", str(corpus), "--output", str(output), "--pretrain-config", str(recipe), "--strategies", "token",
            "--rates", "0.15"]  # fmt: skip
    assert main(argv) == 2
    error = capsys.readouterr().err.strip()
    assert "no-such-tokenizer" in error and len(error.splitlines()) == 1
    assert not output.exists() or not any(output.iterdir())  # the corrected command needs no --resume


def test_the_study_replays_from_its_config_yaml_and_reads_the_recipes_files(recipes, tmp_path):
    given = {"output": str(tmp_path / "a"), "pretrain_config": str(recipes[0]), "finetune_config": str(recipes[1]),
             "strategies": "token", "finetune": "builtin", "max_tokens": 5000}  # fmt: skip
    config = study_config(given)
    base, tuning = config.base, config.tuning
    assert (base.preset, base.loop.max_steps, base.loop.max_tokens, base.loop.seed) == ("bert-tiny", 24, 5000, 3)
    assert base.masking.units.strategy == "token" and base.loop.output == ""  # the grid and the cells set these
    assert (tuning.loop.max_steps, tuning.text_column, tuning.model, tuning.max_length) == (4, "review", "minilm", 32)
    from tokenmask.settings import flatten

    assert study_config({**given, "pretrain_fractions": "0.5,1", "max_tokens": None}).snapshots == (0.5,)  # 24 steps
    assert study_config({"output": "o", "finetune": "builtin", "pretrain_fractions": "0.5,1"}).base.loop.max_tokens == 1_000_000
    replayed = study_config({**flatten(config), "output": str(tmp_path / "b")})
    assert flatten(replayed) == {**flatten(config), "output": str(tmp_path / "b")}
    assert replayed.base == base and replayed.tuning == tuning


@pytest.fixture(scope="module")
def squad_files(tmp_path_factory):
    """Slices of SQuAD as a user's files: 30 training and 10 held-out questions (JSON lines), and their pairs."""
    from tokenmask.labelled.questions import read_questions, squad_file

    folder = tmp_path_factory.mktemp("squad")
    train, dev = read_questions(squad_file("train"))[:30], read_questions(squad_file("dev"))[:10]
    for name, questions in (("qa-train", train), ("qa-dev", dev)):
        rows = [{"question": q.question, "context": q.context, "answers": [{"text": a.text, "answer_start": a.start}
                 for a in q.answers]} for q in questions]  # fmt: skip
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        pairs = [{"query": q.question, "positive": q.context} for q in questions]
        (folder / f"{name.replace('qa', 'pairs')}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in pairs))
    return folder


def test_a_question_answering_study_pairs_each_pretraining_with_the_baseline_by_f1(
    corpus_and_tokenizer, recipes, squad_files, tmp_path, one_thread
):
    corpus, _ = corpus_and_tokenizer
    tuning = tmp_path / "finetune.yaml"
    tuning.write_text("max_steps: 3\nbatch_size: 8\n")
    output = tmp_path / "study"
    argv = ["study", str(corpus), "--output", str(output), "--pretrain-config", str(recipes[0]), "--finetune-config",
            str(tuning), "--strategies", "token", "--task", "qa", "--finetune", str(squad_files / "qa-train.jsonl"),
            "--finetune-eval", str(squad_files / "qa-dev.jsonl"), "--finetune-seeds", "2"]  # fmt: skip
    assert main(argv) == 0
    record = json.loads((output / "study.json").read_text())
    tuned = [c for c in record["cells"] if c.get("role") == "finetune"]
    models = [c for c in record["cells"] if c.get("role") in ("baseline", "pretrain")]
    assert len(models) >= 2 and len(tuned) == 2 * len(models)  # the baseline and each pre-trained model, two seeds each
    assert all(set(c["scores"]["clean"]) == {"exact_match", "f1"} for c in tuned)
    assert record["downstream"]["primary"] == "f1" and record["best"]["metric"] == "f1"
    rows = [r for r in record["downstream"]["against_baseline"] if r["metric"] == "f1" and r["paired"]]
    assert len(rows) == len(models) - 1 and all(len(r["values"]) == 2 for r in rows)  # each against the baseline, by seed


def test_a_retrieval_study_fine_tunes_the_starting_model_by_ndcg(tiny_mlm_folder, squad_files, tmp_path, one_thread):
    tuning = tmp_path / "finetune.yaml"
    tuning.write_text("max_steps: 3\nbatch_size: 8\nmax_length: 64\n")
    output = tmp_path / "study"
    argv = ["study", "--output", str(output), "--init", str(tiny_mlm_folder), "--strategies", "none", "--task", "retrieval",
            "--finetune", str(squad_files / "pairs-train.jsonl"), "--finetune-eval", str(squad_files / "pairs-dev.jsonl"),
            "--finetune-config", str(tuning), "--finetune-seeds", "2"]  # fmt: skip
    assert main(argv) == 0
    record = json.loads((output / "study.json").read_text())
    tuned = [c for c in record["cells"] if c.get("role") == "finetune"]
    assert len(tuned) == 2 and all(set(c["scores"]["clean"]) == {"recall@1", "mrr@10", "ndcg@10"} for c in tuned)
    assert record["best"]["metric"] == "ndcg@10"
