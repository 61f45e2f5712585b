"""Fine-tuning end to end on a tiny model: outputs, reloading, augmentation only in training, the
divergence watch through the loop, epochs, resume, and clean errors."""

import json
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch
import yaml
from transformers import AutoModelForSequenceClassification, AutoModelForTokenClassification

import tokenmask.recipes.finetune as recipe
import tokenmask.recipes.tasks as tasks
from tokenmask.cli.main import main
from tokenmask.collate.augment import MaskingAugmenter
from tokenmask.recipes.config import FinetuneConfig
from tokenmask.recipes.finetune import finetune, loop_settings
from tokenmask.recipes.finetune_data import load_finetune_data
from tokenmask.settings import build
from tokenmask.text.tokenizer import load_tokenizer
from tokenmask.use.classifier_scores import evaluate_classifier

REAL_LOSS, REAL_EVALUATE = tasks.classifier_loss_sum, tasks.evaluate_classifier


def settings(model, data, output, **overrides):
    values = dict(
        output=str(output), data=(str(data),), model=str(model), max_steps=8, eval_every=4, batch_size=16,
        max_length=32, lr=5e-3, save_every=100,
    )  # fmt: skip
    values.update(overrides)
    if "tags" in str(data) or str(data).endswith(".jsonl"):
        values.setdefault("task", "tokens")
    return build(FinetuneConfig, values)


def records_of(run):
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize(
    "kind, auto, extra",
    [
        ("classify", AutoModelForSequenceClassification, ["--group-by", "movie"]),
        ("tokens", AutoModelForTokenClassification, ["--task", "tokens"]),
    ],
)
def test_cli_finetune_writes_a_model_that_reloads_to_the_same_scores(
    kind, auto, extra, tiny_mlm_folder, reviews_csv, tagged_jsonl, tmp_path, capsys
):
    data = reviews_csv if kind == "classify" else tagged_jsonl
    out = tmp_path / kind
    argv = ["finetune", str(data), "--model", str(tiny_mlm_folder), "--output", str(out), "--max-steps", "8",
            "--eval-every", "4", "--batch-size", "16", "--max-length", "32", "--lr", "5e-3", *extra]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "fine-tuned 8 steps" in printed and "gold \\ predicted" in printed
    for name in ("model", "best", "results.json", "confusion.png", "metrics.png"):
        assert (out / name).exists(), name
    assert (out / "confusion.png").read_bytes().startswith(b"\x89PNG")
    results = json.loads((out / "results.json").read_text())
    metric = "macro_f1" if kind == "classify" else "span_f1"
    assert results["metric"] == metric and results["final"]["step"] == 8 and results["config"]["task"] == kind
    assert results["best"][metric] == max(r[f"eval_{metric}"] for r in records_of(out) if "eval_loss" in r)
    # the saved folders hold the evaluated models: re-evaluating them gives the logged numbers
    config = settings(tiny_mlm_folder, data, out, group_by="movie" if kind == "classify" else None)
    tokenizer = load_tokenizer(out / "model")
    prepared = load_finetune_data(config, tokenizer)
    validation = tasks.validation_batches(prepared.validation, tokenizer, 16)
    for folder, expected in (("model", results["final"]), ("best", results["best"])):
        model = auto.from_pretrained(out / folder, local_files_only=True)
        assert model.config.id2label == dict(enumerate(results["labels"]))
        again = evaluate_classifier(model, validation, task=prepared.task, labels=prepared.labels).metrics()
        assert again["loss"] == pytest.approx(expected["loss"], rel=1e-5), folder
        assert again[metric] == expected[metric], folder
    best_card = (out / "best" / "README.md").read_text(encoding="utf-8")
    assert f"At step {results['best']['step']:,}, the run's best evaluation by {metric}" in best_card


def test_the_saved_model_gives_the_trained_models_logits(tiny_mlm_folder, reviews_csv, tmp_path):
    result = finetune(settings(tiny_mlm_folder, reviews_csv, tmp_path / "run", max_steps=4))
    reloaded = AutoModelForSequenceClassification.from_pretrained(tmp_path / "run" / "model", local_files_only=True)
    ids = torch.tensor([[101, 1996, 2143, 2001, 2307, 102]])
    result.model.eval()
    with torch.no_grad():
        assert torch.equal(result.model(input_ids=ids).logits, reloaded(input_ids=ids).logits)
    assert result.labels == ("neg", "pos") and result.final_step == 4


def spy_runs(monkeypatch, tiny_mlm_folder, data, output, **overrides):
    """Run fine-tuning and keep every training and every evaluation batch."""
    seen = {"train": [], "eval": []}

    def loss(model, batch):
        seen["train"].append({k: v.clone() for k, v in batch.items()})
        return REAL_LOSS(model, batch)

    def evaluate(model, batches, **kwargs):
        seen["eval"].extend(batches)
        return REAL_EVALUATE(model, batches, **kwargs)

    monkeypatch.setattr(tasks, "classifier_loss_sum", loss)
    monkeypatch.setattr(tasks, "evaluate_classifier", evaluate)
    finetune(settings(tiny_mlm_folder, data, output, max_steps=3, eval_every=3, **overrides))
    return seen


@pytest.mark.parametrize("data_name", ["reviews_csv", "tagged_jsonl"])
def test_augmentation_keeps_labels_and_never_reaches_evaluation(
    data_name, tiny_mlm_folder, request, tmp_path, monkeypatch, bert_tokenizer
):
    data = request.getfixturevalue(data_name)
    mask = bert_tokenizer.mask_token_id
    plain = spy_runs(monkeypatch, tiny_mlm_folder, data, tmp_path / "plain")
    masked = spy_runs(monkeypatch, tiny_mlm_folder, data, tmp_path / "masked", augment_rate=0.3, augment_strategy="whole_word")
    assert len(plain["train"]) == len(masked["train"]) == 3
    changed = 0
    for a, b in zip(plain["train"], masked["train"]):  # the same examples in the same order
        assert torch.equal(a["labels"], b["labels"]) and torch.equal(a["attention_mask"], b["attention_mask"])
        differ = a["input_ids"] != b["input_ids"]
        assert (b["input_ids"][differ] == mask).all()  # only [MASK] replacements
        changed += int(differ.sum())
    assert changed > 0.15 * sum(int(b["attention_mask"].sum()) for b in masked["train"])
    assert all(not (batch["input_ids"] == mask).any() for batch in masked["eval"])  # the data holds no [MASK]
    for a, b in zip(plain["eval"], masked["eval"]):
        assert torch.equal(a["input_ids"], b["input_ids"]) and torch.equal(a["labels"], b["labels"])


def test_the_divergence_watch_halves_the_rate_through_the_loop(tiny_mlm_folder, reviews_csv, tmp_path, monkeypatch):
    # Wiring, not judgement (tests/train/test_watch.py judges): validation loss made to rise at every
    # evaluation, training loss to fall. Evaluations at steps 0, 2, ..., 12; the first two set the
    # starting point, then with patience 2 the watch fires at steps 6 and 10: 0.4 -> 0.2 -> 0.1.
    calls = []

    def rising(model, batches, **kwargs):
        calls.append(1)
        return replace(REAL_EVALUATE(model, batches, **kwargs), loss=float(len(calls)))

    monkeypatch.setattr(tasks, "evaluate_classifier", rising)
    monkeypatch.setattr(recipe, "training_loss_between", lambda records, after, upto: 100.0 - upto)
    messages = []
    reporter = SimpleNamespace(message=messages.append, step=lambda *a: None)
    run = tmp_path / "watch"
    config = settings(
        tiny_mlm_folder, reviews_csv, run, max_steps=12, eval_every=2, augment_rate=0.4, augment_adaptive=True, patience=2
    )
    result = finetune(config, reporter)
    assert result.warnings == [
        {"step": 6, "evaluations": 2, "augment_rate": [0.4, 0.2]},
        {"step": 10, "evaluations": 2, "augment_rate": [0.2, 0.1]},
    ]
    assert [m for m in messages if m.startswith("warning")] == [
        "warning: step 6: validation loss rose while training loss fell, 2 evaluations in a row (over-fitting?); augmentation rate 0.4 -> 0.2",
        "warning: step 10: validation loss rose while training loss fell, 2 evaluations in a row (over-fitting?); augmentation rate 0.2 -> 0.1",
    ]
    records = records_of(run)
    rates = [r["augment_rate"] for r in records if "loss" in r]
    assert rates == [0.4] * 6 + [0.2] * 4 + [0.1] * 2
    assert [r["step"] for r in records if r.get("eval_divergence_warning")] == [6, 10]
    assert json.loads((run / "results.json").read_text())["divergence_warnings"] == result.warnings


def test_epochs_become_optimizer_steps():
    config = build(FinetuneConfig, {"output": "o", "epochs": 2, "grad_accum": 2, "batch_size": 16})
    data = SimpleNamespace(train=[{}] * 100)  # 7 micro-batches per epoch (the last one of 4)
    assert loop_settings(config, data).max_steps == 7  # ceil(2 * 7 / 2)
    assert loop_settings(build(FinetuneConfig, {"epochs": 2, "max_steps": 5}), data).max_steps == 5  # the first limit
    assert loop_settings(build(FinetuneConfig, {"max_steps": 5}), data).max_steps == 5


def test_resume_continues_with_the_same_losses(tiny_mlm_folder, reviews_csv, tmp_path, crash_after):
    common = dict(max_steps=10, save_every=4, eval_every=3, augment_rate=0.2, keep_last=1)
    whole = finetune(settings(tiny_mlm_folder, reviews_csv, tmp_path / "whole", **common))
    cut = settings(tiny_mlm_folder, reviews_csv, tmp_path / "cut", **common)
    with pytest.raises(crash_after.Crash):
        finetune(cut, crash_after(6))  # dies after step 6; the newest checkpoint is step 4
    resumed = finetune(cut.with_loop(resume=True))
    losses = [{r["step"]: r["loss"] for r in records_of(tmp_path / run) if "loss" in r} for run in ("whole", "cut")]
    assert losses[0] == losses[1] and len(losses[0]) == 10
    assert [r["step"] for r in records_of(tmp_path / "cut") if "loss" in r] == list(range(1, 11))  # each step once
    for name, value in whole.model.state_dict().items():
        assert torch.equal(value, resumed.model.state_dict()[name]), name
    assert (resumed.best_step, resumed.best) == (whole.best_step, whole.best)
    assert resumed.final.metrics() == whole.final.metrics()
    assert sorted(p.name for p in (tmp_path / "cut" / "checkpoints").iterdir()) == ["step-8"]  # --keep-last 1
    assert (
        f"At step {resumed.best_step:,}, the run's best" in (tmp_path / "cut" / "best" / "README.md").read_text()
    )  # never pruned


def test_resuming_a_finished_run_reports_its_final_evaluation(tiny_mlm_folder, reviews_csv, tmp_path):
    config = settings(tiny_mlm_folder, reviews_csv, tmp_path / "run", max_steps=4, eval_every=2, save_every=2)
    done = finetune(config)
    logged = (tmp_path / "run" / "metrics.jsonl").read_text()
    again = finetune(config.with_loop(resume=True))  # what a preemption script does after the end
    assert again.steps == 4 and again.final.metrics() == done.final.metrics()
    assert (tmp_path / "run" / "metrics.jsonl").read_text() == logged  # nothing trained or logged twice


def test_a_non_finite_step_is_skipped_in_fine_tuning_too(tiny_mlm_folder, reviews_csv, tmp_path, monkeypatch):
    calls = []

    def nan_on_the_second_step(model, batch):
        calls.append(1)
        value = REAL_LOSS(model, batch)
        return value * float("nan") if len(calls) == 2 else value

    monkeypatch.setattr(tasks, "classifier_loss_sum", nan_on_the_second_step)
    result = finetune(settings(tiny_mlm_folder, reviews_csv, tmp_path / "run", max_steps=4, eval_every=2))
    steps = [r for r in records_of(tmp_path / "run") if "loss" in r]
    assert [r["step"] for r in steps if "skipped" in r] == [2]
    evaluations = [r for r in records_of(tmp_path / "run") if "eval_train_loss" in r]
    assert evaluations and all(r["eval_train_loss"] is not None for r in evaluations)  # the window skips the null
    assert result.steps == 4


def test_epochs_count_the_global_batches_each_process_can_share():
    assert recipe.global_batches_per_epoch(13, 2, 3) == 2  # 6 + 6 + 1: a batch of 1 cannot feed 3 processes
    assert recipe.global_batches_per_epoch(15, 2, 3) == 3  # 6 + 6 + 3: one each
    assert recipe.global_batches_per_epoch(12, 2, 3) == 2
    assert recipe.global_batches_per_epoch(13, 4, 1) == 4  # one process keeps the short batch
    with pytest.raises(ValueError, match="2 training examples cannot give each of 3 processes one"):
        recipe.global_batches_per_epoch(2, 2, 3)


def test_a_resumed_tracker_decides_as_the_uninterrupted_one():
    config = build(FinetuneConfig, {"max_steps": 1, "augment_rate": 0.4, "augment_adaptive": True, "patience": 1})
    records = []
    live = recipe._Tracker(config)
    for step, (train, valid) in enumerate([(None, 1.0), (2.0, 0.9), (1.0, 1.0), (0.5, 1.1), (0.4, 1.2)]):
        if train is not None:
            records.append({"step": 2 * step, "loss": train, "targets": 4})
        fields = live.observe(2 * step, {"loss": valid, "accuracy": 0.5, "macro_f1": valid / 2}, records)
        records.append(
            {
                "step": 2 * step,
                "eval_loss": valid,
                "eval_accuracy": 0.5,
                "eval_macro_f1": valid / 2,
                **{f"eval_{k}": v for k, v in fields.items()},
            }
        )
    assert live.rate == 0.05 and [w["step"] for w in live.warnings] == [4, 6, 8]
    replayed = recipe._Tracker(config)
    replayed.replay(records, upto=8)
    assert (replayed.rate, replayed.best, replayed.best_step, replayed.warnings) == (
        live.rate,
        live.best,
        live.best_step,
        live.warnings,
    )
    assert replayed.best == {"loss": 1.2, "accuracy": 0.5, "macro_f1": 0.6}
    early = recipe._Tracker(config)
    early.replay(records, upto=5)  # resumed at step 5: only the evaluations up to it count
    assert early.rate == 0.2 and early.previous_evaluation == 4


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--augment-adaptive"], "give augment_rate > 0 too"),
        (["--best-metric", "span_f1"], "best_metric for task 'classify' must be one of macro_f1, accuracy, loss"),
        (["--task", "tokens", "--max-steps", "1"], "the built-in data (Rotten Tomatoes reviews) is for --task classify"),
        (["--max-steps", "0"], "max_steps must be >= 1"),
        (["--augment-rate", "1.5"], "augment_rate must be in [0, 1)"),
        (["/no/such/data.csv"], "no such file"),
    ],
)
def test_finetune_errors_exit_2_with_one_line(argv, message, tmp_path, capsys):
    assert main(["finetune", "--output", str(tmp_path / "o"), *argv]) == 2
    error = capsys.readouterr().err
    assert message in error and "Traceback" not in error and len(error.strip().splitlines()) == 1


def test_a_missing_column_names_the_columns_there_are(reviews_csv, tiny_mlm_folder, tmp_path, capsys):
    argv = [
        "finetune",
        str(reviews_csv),
        "--model",
        str(tiny_mlm_folder),
        "--output",
        str(tmp_path / "o"),
        "--label-column",
        "stars",
        "--max-steps",
        "1",
    ]
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert "stars" in error and "movie" in error


def test_yaml_config_for_finetune(reviews_csv, tiny_mlm_folder, tmp_path):
    settings_file = tmp_path / "ft.yaml"
    out = tmp_path / "from-yaml"
    settings_file.write_text(
        f"data: {reviews_csv}\nmodel: {tiny_mlm_folder}\noutput: {out}\ngroup-by: movie\nmax_steps: 50\n"
        "batch_size: 16\nmax_length: 32\naugment_rate: 0.1\n",
        encoding="utf-8",
    )
    assert main(["finetune", "--config", str(settings_file), "--max-steps", "2"]) == 0
    resolved = yaml.safe_load((out / "config.yaml").read_text())
    assert resolved["max_steps"] == 2 and resolved["max_time"] is None  # the flag wins; no default time added
    assert resolved["data"] == [str(reviews_csv)] and resolved["group_by"] == "movie" and resolved["augment_rate"] == 0.1


def test_finetune_without_a_limit_gets_the_default_time(monkeypatch, tmp_path):
    seen = {}

    def capture(config, reporter, **keywords):  # keywords: the command line, for the model card
        seen["config"] = config
        raise ValueError("stopped before training")

    monkeypatch.setattr(recipe, "finetune", capture)
    assert main(["finetune", "--output", str(tmp_path / "o")]) == 2
    assert seen["config"].loop.max_time == 9.0 and seen["config"].data == () and seen["config"].model == "minilm"


def test_eval_mode_augmenter_pads_only(bert_tokenizer):
    features = [{"input_ids": [101, 2000, 2001, 102], "labels": 1}, {"input_ids": [101, 2003, 102], "labels": 0}]
    batch = MaskingAugmenter(bert_tokenizer, rate=0.0).eval()(features)
    assert batch["input_ids"].tolist() == [[101, 2000, 2001, 102], [101, 2003, 102, 0]]


def test_the_fine_tuning_api_is_exported():
    import tokenmask
    from tokenmask.recipes import config, finetune, watch

    for module, name in [
        (config, "FinetuneConfig"),
        (finetune, "finetune"),
        (watch, "DivergenceWatch"),
    ]:
        assert getattr(tokenmask, name) is getattr(module, name) and name in tokenmask.__all__


def test_pretrain_then_finetune_its_model_on_given_validation_files(lines, reviews_csv, tmp_path, capsys):
    corpus = tmp_path / "plays.txt"
    corpus.write_text("\n\n".join(" ".join(lines[i : i + 6]) for i in range(0, 600, 6)), encoding="utf-8")
    pretrained = tmp_path / "pretrained"
    argv = ["pretrain", str(corpus), "--output", str(pretrained), "--preset", "bert-tiny", "--max-steps", "2", "--batch-size", "4",
            "--max-length", "32", "--eval-blocks", "4", "--no-demo"]  # fmt: skip
    assert main(argv) == 0
    held_out = tmp_path / "held-out.csv"  # header + 50 rows, without the movie column
    rows = reviews_csv.read_text(encoding="utf-8").splitlines()[:51]
    held_out.write_text("\n".join(",".join(row.split(",")[:2]) for row in rows) + "\n", encoding="utf-8")
    out = tmp_path / "tuned"
    argv = ["finetune", str(reviews_csv), "--eval", str(held_out), "--group-by", "movie", "--model", str(pretrained / "model"),
            "--output", str(out), "--max-steps", "2", "--batch-size", "16", "--max-length", "32"]  # fmt: skip
    assert main(argv) == 0
    printed = " ".join(capsys.readouterr().out.split())  # the console wraps long lines
    assert "validation: 50 examples;" in printed and "train: 400 examples (40 groups)" in printed
    assert "model: new, randomly initialised: bert.pooler.dense.bias, bert.pooler.dense.weight, classifier.bias" in printed
    results = json.loads((out / "results.json").read_text())
    assert sum(map(sum, results["final"]["confusion"])) == 50  # every held-out row scored


def test_unpadded_batches_give_the_padded_runs_evaluations(tiny_mlm_folder, reviews_csv, tmp_path):
    # the evaluation before training (no dropout): the same model on padded and on unpadded batches
    finetune(settings(tiny_mlm_folder, reviews_csv, tmp_path / "padded", max_steps=1))
    finetune(settings(tiny_mlm_folder, reviews_csv, tmp_path / "unpadded", max_steps=1, unpad=True))
    padded, unpadded = (next(r for r in records_of(tmp_path / run) if r["step"] == 0) for run in ("padded", "unpadded"))
    assert padded.keys() == unpadded.keys() and "eval_loss" in padded
    assert unpadded == pytest.approx(padded, rel=1e-5, abs=1e-6)
