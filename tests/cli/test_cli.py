"""The command line: demo, JSON output, statistics, and clean errors (exit code 2)."""

import json
import math
import subprocess
import sys

import pytest
import torch

from tokenmask.cli.main import main


def test_mask_demo_on_the_bundled_text(capsys):
    assert main(["mask", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "original" in out and "[MASK]" in out and "targets in" in out


def test_mask_json_is_consistent(capsys):
    assert (
        main(
            [
                "mask",
                "To be, or not to be, that is the question",
                "--json",
                "--strategy",
                "whole_word",
                "--mlm-probability",
                "0.4",
            ]
        )
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["settings"]["strategy"] == "whole_word"
    (example,) = data["examples"]
    assert example["tokens"][0] == "[CLS]" and example["tokens"][-1] == "[SEP]"
    for token, new, outcome, label in zip(example["tokens"], example["inputs"], example["outcomes"], example["labels"]):
        assert (label == -100) == (outcome == "none")
        if outcome == "mask":
            assert new == "[MASK]"
        if outcome in ("none", "keep"):
            assert new == token


def test_mask_a_file_with_another_tokenizer(tmp_path, capsys):
    path = tmp_path / "in.txt"
    path.write_text("Now is the winter of our discontent\nMade glorious summer by this sun of York\n", encoding="utf-8")
    assert main(["mask", "--file", str(path), "--tokenizer", "roberta-gpt2", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["examples"]) == 2 and data["examples"][0]["tokens"][0] == "<s>"


def test_stats_json_reports_rates_with_intervals(capsys):
    assert main(["stats", "--max-tokens", "30000", "--strategy", "span", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["special_tokens_hit"] == 0 and data["protected_ids_drawn"] == 0
    assert data["tokens"] >= 30000
    units, tokens = data["rates"][0], data["rates"][1]
    assert units["name"] == "selected units" and units["ci99"][0] <= units["rate"] <= units["ci99"][1]
    assert tokens["name"] == "selected tokens" and abs(tokens["rate"] - 0.15) < 0.03
    assert data["unit_length_kind"] == "words" and len(data["unit_lengths"]) == 10


def test_stats_table(capsys, tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("\n".join(json.dumps({"body": f"line number {i} of a small corpus"}) for i in range(200)), encoding="utf-8")
    assert main(["stats", str(corpus), "--text-field", "body", "--no-pack"]) == 0
    out = capsys.readouterr().out
    assert "200 sequences" in out and "special tokens selected: 0" in out
    # the "selected" row: count, share, interval, configured 0.1500
    row = next(line for line in out.splitlines() if "selected" in line and "0.1500" in line)
    share = float(row.split("│")[3])
    assert 0.12 < share < 0.30  # short lines: the floor of one target raises the share above 0.15


@pytest.mark.parametrize(
    "argv, message",
    [
        (["mask", "x", "--mlm-probability", "1.5"], "mlm_probability must be in (0, 1]"),
        (["mask", "x", "--mask-replace-prob", "0.9", "--random-replace-prob", "0.3"], "must be <= 1"),
        (["mask", "x", "--tokenizer", "/no/such/tokenizer"], "neither a folder, a built-in name"),
        (["mask", "--file", "/no/such/file.txt"], "no such file"),
        (["stats", "/no/such/corpus"], "no such file"),
        (["mask", "x", "--file", "y.txt"], "not both"),
    ],
)
def test_errors_exit_2_with_one_clear_line(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_console_script_errors_without_traceback():
    result = subprocess.run(
        [sys.executable, "-m", "tokenmask", "mask", "hello", "--strategy", "nonsense"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2 and "invalid choice" in result.stderr and "Traceback" not in result.stderr
    result = subprocess.run([sys.executable, "-m", "tokenmask", "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "stats" in result.stdout


def test_help_imports_neither_torch_nor_transformers():
    code = "import sys; from tokenmask.cli.main import build_parser; build_parser(); print(sorted({'torch', 'transformers'} & set(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stdout + result.stderr


@pytest.mark.parametrize("kind", ["wordpiece", "bpe", "unigram"])
def test_tokenizer_train_saves_a_folder_that_loads_and_masks(kind, tmp_path, capsys):
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(f"line {i} of a small corpus about kings and queens" for i in range(300)), encoding="utf-8")
    out = tmp_path / kind
    assert main(["tokenizer", "train", str(corpus), "--output", str(out), "--kind", kind, "--vocab-size", "120"]) == 0
    assert "saved to" in capsys.readouterr().out
    assert main(["mask", "kings and queens", "--tokenizer", str(out), "--json", "--strategy", "whole_word"]) == 0
    example = json.loads(capsys.readouterr().out)["examples"][0]
    assert example["tokens"][0] == "[CLS]" and example["tokens"][-1] == "[SEP]"
    assert any(outcome != "none" for outcome in example["outcomes"])
    assert main(["tokenizer", "train", str(corpus), "--output", str(out), "--vocab-size", "10"]) == 2


def test_pretrain_continues_from_minilm(tmp_path, capsys, lines):
    from safetensors.torch import load_file
    from transformers import AutoModelForMaskedLM

    from tokenmask.text.resources import minilm_dir

    corpus = tmp_path / "plays.txt"
    corpus.write_text("\n\n".join(" ".join(lines[i : i + 4]) for i in range(0, 400, 4)), encoding="utf-8")
    out = tmp_path / "run"
    argv = [
        "pretrain",
        str(corpus),
        "--init",
        "minilm",
        "--output",
        str(out),
        "--max-steps",
        "1",
        "--batch-size",
        "2",
        "--max-length",
        "32",
        "--eval-blocks",
        "2",
        "--validation-share",
        "0.2",
        "--lr",
        "1e-4",
        "--no-demo",
    ]
    assert main(argv) == 0
    assert "trained 1 steps" in capsys.readouterr().out
    model = AutoModelForMaskedLM.from_pretrained(out / "model", local_files_only=True)
    assert (model.config.num_hidden_layers, model.config.hidden_size) == (6, 384)
    # one small step away from the real encoder, not from a random one (std 0.02)
    start = load_file(minilm_dir() / "model.safetensors")["embeddings.word_embeddings.weight"]
    assert torch.allclose(model.bert.embeddings.word_embeddings.weight.detach(), start, atol=1e-3)
    assert main(["evaluate", "minilm", str(corpus), "--max-length", "32", "--max-blocks", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["targets"] > 0


def test_evaluate_pseudo_perplexity(tmp_path, capsys, lines, bert_tokenizer):
    from tokenmask.train.presets import build_model

    folder = tmp_path / "model"
    torch.manual_seed(0)
    build_model("bert-tiny", vocab_size=len(bert_tokenizer), max_length=32, pad_token_id=0).save_pretrained(folder)
    bert_tokenizer.save_pretrained(folder)
    corpus = tmp_path / "lines.txt"
    corpus.write_text("\n\n".join(lines[:60]), encoding="utf-8")
    argv = ["evaluate", str(folder), str(corpus), "--max-length", "32", "--max-blocks", "4"]
    assert main([*argv, "--json"]) == 0
    assert "pseudo_perplexity" not in json.loads(capsys.readouterr().out)
    assert main([*argv, "--json", "--pseudo-perplexity", "--max-tokens", "40"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["scored_tokens"] == 40 and report["targets"] > 0
    # an untrained model: about as unsure as a uniform guess over the 30,522 ids
    assert report["pseudo_perplexity"] == pytest.approx(math.exp(-report["pseudo_log_likelihood"] / 40))
    assert 5_000 < report["pseudo_perplexity"] < 100_000
    assert main([*argv, "--pseudo-perplexity", "--max-tokens", "40"]) == 0
    assert "pseudo-perplexity" in capsys.readouterr().out
    assert main([*argv, "--pseudo-perplexity", "--max-tokens", "0"]) == 2
    assert "max_tokens must be >= 1; got 0" in capsys.readouterr().err
