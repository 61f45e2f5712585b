"""``tokenmask pretrain --objective rtd`` from the command line: the discriminator fine-tunes, embeds and
its card says what it is; the generator fills masks and evaluates."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from transformers import (
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    ElectraForMaskedLM,
    ElectraForPreTraining,
)

from tokenmask.cli.main import main

TINY = ["--max-length", "32", "--batch-size", "2", "--max-steps", "2", "--report-to", "none", "--cpu"]


@pytest.fixture(scope="module")
def detection_run(corpus_and_tokenizer, tmp_path_factory):
    corpus, tokenizer = corpus_and_tokenizer
    output = tmp_path_factory.mktemp("rtd") / "run"
    argv = [
        "pretrain", str(corpus), "--tokenizer", str(tokenizer), "--preset", "electra-tiny", "--objective", "rtd",
        "--output", str(output), "--max-steps", "6", "--eval-every", "3", "--save-every", "3", "--batch-size", "4", "--max-length", "32",
        "--report-to", "none", "--cpu",
    ]  # fmt: skip
    assert main(argv) == 0  # with the fill-mask demo, on the generator
    return output


def detection_argv(corpus, tokenizer, output, *extra):
    return [
        "pretrain", str(corpus), "--tokenizer", str(tokenizer), "--preset", "electra-tiny", "--output", str(output),
        "--max-steps", "2", "--save-every", "1", "--batch-size", "4", "--max-length", "32", "--report-to", "none",
        "--cpu", "--no-demo", *extra,
    ]  # fmt: skip


def test_the_run_writes_a_discriminator_and_a_generator(detection_run, capsys):
    records = [json.loads(line) for line in (detection_run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    evaluations = [r for r in records if "eval_loss" in r]
    assert [r["step"] for r in evaluations] == [0, 3, 6]
    for record in evaluations:  # the generator's fixed-mask scores and the discriminator's at fixed replacements
        assert 0 <= record["eval_accuracy"] <= 1 and 0 <= record["eval_detector_recall"] <= 1
        assert record["eval_detector_replaced"] > 0 and record["eval_detector_tokens"] > record["eval_detector_replaced"]
    assert isinstance(ElectraForPreTraining.from_pretrained(detection_run / "model"), ElectraForPreTraining)
    model_card = (detection_run / "model" / "README.md").read_text(encoding="utf-8")
    generator_card = (detection_run / "generator" / "README.md").read_text(encoding="utf-8")
    assert "The discriminator of a replaced-token detection run" in model_card and "`../generator`" in model_card
    assert "ElectraForPreTraining" in model_card and "ModernBERT" not in model_card
    assert "| precision |" in model_card and "| perplexity |" not in model_card
    assert "pipeline_tag: fill-mask" in generator_card and "| perplexity |" in generator_card
    assert not (detection_run / "model" / "generator").exists()


def test_the_generator_fills_and_evaluates(detection_run, corpus_and_tokenizer, capsys):
    corpus, _ = corpus_and_tokenizer
    assert main(["fill", str(detection_run / "generator"), "the [MASK] of the play", "--json"]) == 0
    (guesses,) = json.loads(capsys.readouterr().out)["predictions"]
    assert len(guesses) == 5
    assert (
        main(["evaluate", str(detection_run / "generator"), str(corpus), "--max-length", "32", "--max-blocks", "2", "--json"])
        == 0
    )
    assert json.loads(capsys.readouterr().out)["targets"] > 0


def test_the_discriminator_fine_tunes_and_embeds(detection_run, reviews_csv, tagged_jsonl, short_texts, tmp_path, capsys):
    argv = ["finetune", str(reviews_csv), "--task", "classify", "--model", str(detection_run / "model")]
    assert main([*argv, "--output", str(tmp_path / "classify"), *TINY, "--validation-share", "0.05"]) == 0
    classifier = AutoModelForSequenceClassification.from_pretrained(tmp_path / "classify" / "model")
    assert type(classifier).__name__ == "ElectraForSequenceClassification"
    argv = ["finetune", str(tagged_jsonl), "--task", "tokens", "--model", str(detection_run / "model")]
    assert main([*argv, "--output", str(tmp_path / "tag"), *TINY]) == 0
    tagger = AutoModelForTokenClassification.from_pretrained(tmp_path / "tag" / "model")
    assert type(tagger).__name__ == "ElectraForTokenClassification"
    assert (
        main(["embed", str(detection_run / "model"), "--input", str(short_texts), "--output", str(tmp_path / "vectors.npy")]) == 0
    )
    assert np.load(tmp_path / "vectors.npy").shape == (3, 128)


def test_a_discriminator_continues_with_a_new_generator(detection_run, corpus_and_tokenizer, tmp_path, capsys):
    corpus, _ = corpus_and_tokenizer
    argv = ["pretrain", str(corpus), "--init", str(detection_run / "model"), "--objective", "rtd", "--output", str(tmp_path)]
    assert (
        main([*argv, "--max-steps", "2", "--batch-size", "4", "--max-length", "32", "--report-to", "none", "--cpu", "--no-demo"])
        == 0
    )
    out = " ".join(capsys.readouterr().out.split())  # the reporter wraps lines
    assert "by replaced-token detection with the continued-pretraining recipe" in out
    assert f"continuing {detection_run / 'model'}'s discriminator with a new generator 0.25 as wide" in out
    before, after = (load_file(folder / "model.safetensors") for folder in (detection_run / "model", tmp_path / "model"))
    # the recipe's head-only warm-up (30 steps): the encoder stays as it was, the detection head learns
    assert torch.equal(
        before["electra.encoder.layer.1.output.dense.weight"], after["electra.encoder.layer.1.output.dense.weight"]
    )
    assert torch.equal(before["electra.embeddings.word_embeddings.weight"], after["electra.embeddings.word_embeddings.weight"])
    assert not torch.equal(before["discriminator_predictions.dense.weight"], after["discriminator_predictions.dense.weight"])
    generator = ElectraForMaskedLM.from_pretrained(tmp_path / "generator")
    assert generator.config.hidden_size == 32 and generator.config.embedding_size == 128


def test_masked_lm_uses_of_a_discriminator_name_its_generator(detection_run, corpus_and_tokenizer, tmp_path, capsys):
    corpus, _ = corpus_and_tokenizer
    model = str(detection_run / "model")
    for argv in (["fill", model, "the [MASK] of the play"], ["evaluate", model, str(corpus), "--max-blocks", "2"]):
        assert main(argv) == 2
        assert f"{model} is a replaced-token discriminator, not a masked LM: it cannot" in capsys.readouterr().err
    argv = ["pretrain", str(corpus), "--init", "minilm", "--objective", "rtd", "--max-steps", "1", "--no-demo"]
    assert main([*argv, "--output", str(tmp_path / "out"), "--max-length", "32", "--cpu"]) == 2
    assert not (tmp_path / "out").exists()  # nothing written
    assert "--objective rtd continues ELECTRA discriminators" in capsys.readouterr().err


def test_a_finished_run_resumed_keeps_its_generator_and_the_other_objective_is_refused(corpus_and_tokenizer, tmp_path, capsys):
    corpus, tokenizer = corpus_and_tokenizer
    output = tmp_path / "run"
    assert main(detection_argv(corpus, tokenizer, output, "--objective", "rtd")) == 0
    first = load_file(output / "generator" / "model.safetensors")
    assert main(detection_argv(corpus, tokenizer, output, "--objective", "rtd", "--resume")) == 0  # nothing to train
    again = load_file(output / "generator" / "model.safetensors")
    assert first.keys() == again.keys() and all(torch.equal(first[k], again[k]) for k in first)
    assert not list(output.glob(".generator*")) and not (output / "model" / "generator").exists()
    capsys.readouterr()
    assert main(detection_argv(corpus, tokenizer, output, "--resume")) == 2  # forgot --objective rtd
    assert "was written by a replaced-token detection run: resume it with --objective rtd" in capsys.readouterr().err
    # the settings of detection are refused without it; --overwrite with a masked LM leaves no old generator
    assert main(detection_argv(corpus, tokenizer, tmp_path / "mlm", "--rtd-weight", "10")) == 2
    assert "--rtd-weight is a setting of replaced-token detection" in capsys.readouterr().err
    assert main(detection_argv(corpus, tokenizer, output, "--overwrite")) == 0
    assert (output / "model").is_dir() and not (output / "generator").exists()
    assert main(detection_argv(corpus, tokenizer, output, "--objective", "rtd", "--resume")) == 2
    assert "was written by a masked-LM run: resume it without --objective rtd" in capsys.readouterr().err


def test_a_generator_is_not_continued_as_a_discriminator_and_a_checkpoint_names_its_own(
    detection_run, corpus_and_tokenizer, tmp_path, capsys
):
    corpus, _ = corpus_and_tokenizer
    argv = [
        "pretrain",
        str(corpus),
        "--init",
        str(detection_run / "generator"),
        "--objective",
        "rtd",
        "--output",
        str(tmp_path / "o"),
    ]
    assert main([*argv, "--max-steps", "1", "--max-length", "32", "--cpu", "--no-demo"]) == 2
    assert "is an ELECTRA generator (a masked LM): --objective rtd continues a discriminator" in capsys.readouterr().err
    (step,) = [p for p in (detection_run / "checkpoints").iterdir() if p.name == "step-6"]
    assert main(["fill", str(step), "the [MASK] of the play"]) == 2
    assert f"use its generator, {step / 'generator'}" in capsys.readouterr().err


def test_a_modernbert_detector_trains_and_its_parts_serve(corpus_and_tokenizer, reviews_csv, tmp_path, capsys):
    # the default preset (modernbert-tiny): its body and a linear head, a one-layer generator as wide
    corpus, tokenizer = corpus_and_tokenizer
    output = tmp_path / "run"
    argv = [*detection_argv(corpus, tokenizer, output, "--objective", "rtd", "--eval-every", "2")]
    argv[argv.index("electra-tiny")] = "modernbert-tiny"
    assert main(argv) == 0
    assert "by replaced-token detection (a generator as wide with 1 of 2 layers," in " ".join(capsys.readouterr().out.split())
    records = [json.loads(line) for line in (output / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [r["eval_detector_tokens"] > r["eval_detector_replaced"] > 0 for r in records if "eval_loss" in r] == [True, True]
    assert json.loads((output / "model" / "config.json").read_text(encoding="utf-8"))["architectures"] == ["ModernBertModel"]
    assert {"detection.weight", "head.dense.weight"} <= load_file(output / "model" / "model.safetensors").keys()
    card = (output / "model" / "README.md").read_text(encoding="utf-8")
    assert "ModernBERT's body and prediction head with one linear layer" in card and "ElectraForPreTraining" not in card
    assert main(["fill", str(output / "generator"), "the [MASK] of the play", "--json"]) == 0
    capsys.readouterr()
    assert main(["fill", str(output / "model"), "the [MASK] of the play"]) == 2
    assert f"use its generator, {output / 'generator'}" in capsys.readouterr().err
    argv = ["finetune", str(reviews_csv), "--task", "classify", "--model", str(output / "model")]
    assert main([*argv, "--output", str(tmp_path / "classify"), *TINY, "--validation-share", "0.05"]) == 0
    classifier = AutoModelForSequenceClassification.from_pretrained(tmp_path / "classify" / "model")
    assert type(classifier).__name__ == "ModernBertForSequenceClassification"
