"""The final model folders through the command line: clean Hugging Face folders with a model card.

After a tiny ``pretrain`` and a tiny ``finetune``, OUTPUT/model (and fine-tuning's OUTPUT/best)
hold exactly what the model and tokenizer save themselves (config, safetensors weights,
tokenizer files) and README.md; the card's
front matter is valid YAML for the Hub, its numbers are those of metrics.jsonl, and the folder
loads with the Auto class and pipeline the card names. Training state stays in checkpoints/.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
from pathlib import Path

import pytest
import yaml
from transformers import (
    AutoModelForMaskedLM,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    AutoTokenizer,
    pipeline,
)

from tokenmask.cli.main import main
from tokenmask.train.checkpoint import MANIFEST_FILE, STATE_FILE


def clean_files(folder: Path, scratch: Path, auto: type) -> list[str]:
    """What a clean model folder holds: the files its model and tokenizer save themselves (config,
    safetensors weights; transformers 4.x adds generation_config.json), and the card."""
    auto.from_pretrained(folder, local_files_only=True).save_pretrained(scratch, safe_serialization=True)
    AutoTokenizer.from_pretrained(folder).save_pretrained(scratch)
    files = sorted({"README.md", *(p.name for p in scratch.iterdir())})
    assert {"config.json", "model.safetensors"} <= set(files) and not [f for f in files if f.endswith((".pt", ".bin", ".pkl"))]
    return files


def front_matter(card: str) -> dict:
    assert card.startswith("---\n"), card[:80]
    return yaml.safe_load(card.split("---\n")[1])


def records(output: Path) -> list[dict]:
    return [json.loads(line) for line in (output / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]


def shown(metrics: dict[str, float]) -> list[str]:
    """The card's table rows of ``metrics`` (floats with 4 decimals)."""
    return [f"| {name} | {value:.4f} |" for name, value in metrics.items() if isinstance(value, float)]


def modes(folder: Path) -> dict[str, set[str]]:
    """``{"0o640": {"model/model.safetensors", ...}, "0o750": {...}}``: what is under ``folder``, by permission bits."""
    found: dict[str, set[str]] = {}
    for path in (folder, *folder.rglob("*")):
        found.setdefault(oct(stat.S_IMODE(path.stat().st_mode)), set()).add(path.relative_to(folder).as_posix())
    return found


@pytest.fixture
def group_umask():
    """Runs the test under umask 027: what tokenmask writes must be 0640 (files) and 0750 (folders)."""
    before = os.umask(0o027)
    yield
    os.umask(before)


def test_pretrain_model_folder_is_clean_with_a_card(tmp_path, lines, group_umask):
    corpus = tmp_path / "plays.txt"
    corpus.write_text("\n\n".join(" ".join(lines[i : i + 6]) for i in range(0, 240, 6)), encoding="utf-8")
    out = tmp_path / "out"
    argv = [
        "pretrain", str(corpus), "--output", str(out), "--preset", "bert-tiny", "--max-steps", "3", "--batch-size", "2",
        "--max-length", "32", "--eval-every", "2", "--eval-blocks", "4", "--save-every", "2", "--no-demo",
    ]  # fmt: skip
    assert main(argv) == 0
    written = modes(out)  # every file and folder of the run follows the umask, weights and checkpoints included
    assert set(written) == {"0o640", "0o750"} and "model/model.safetensors" in written["0o640"], written
    assert {"checkpoints/step-2/model.safetensors", "metrics.png", "config.yaml"} <= written["0o640"]
    folder = out / "model"
    assert sorted(p.name for p in folder.iterdir()) == clean_files(folder, tmp_path / "saved", AutoModelForMaskedLM)
    assert {STATE_FILE, MANIFEST_FILE} <= {
        p.name for p in (out / "checkpoints" / "step-2").iterdir()
    }  # resumable state lives here
    card = (folder / "README.md").read_text(encoding="utf-8")
    meta = front_matter(card)
    assert (meta["library_name"], meta["pipeline_tag"]) == ("transformers", "fill-mask") and "tokenmask" in meta["tags"]
    final = [r for r in records(out) if "eval_loss" in r][-1]
    assert final["step"] == 3
    assert shown({k[len("eval_") :]: final[k] for k in ("eval_loss", "eval_perplexity", "eval_accuracy")}) == [
        line for line in card.splitlines() if line.startswith(("| loss ", "| perplexity ", "| accuracy "))
    ]
    assert f"- 3 optimizer steps on {final['tokens']:,} training tokens" in card
    assert shlex.join(["tokenmask", *argv]) in card  # the command, as typed
    assert f"- data: {corpus}: " in card and "- started from a new bert-tiny (random weights)" in card
    assert "AutoModelForMaskedLM.from_pretrained(path)" in card and 'pipeline("fill-mask", model=path)' in card
    AutoModelForMaskedLM.from_pretrained(folder, local_files_only=True)
    fill = pipeline("fill-mask", model=str(folder))
    assert len(fill(f"to be or not to {fill.tokenizer.mask_token}")) == 5


@pytest.mark.parametrize(
    "task, tag, auto",
    [
        ("classify", "text-classification", AutoModelForSequenceClassification),
        ("tokens", "token-classification", AutoModelForTokenClassification),
    ],
)
def test_finetune_model_and_best_folders_are_clean_with_cards(
    task, tag, auto, tiny_mlm_folder, reviews_csv, tagged_jsonl, tmp_path, group_umask
):
    data, out = reviews_csv if task == "classify" else tagged_jsonl, tmp_path / "out"
    argv = [
        "finetune", str(data), "--task", task, "--model", str(tiny_mlm_folder), "--output", str(out), "--max-steps", "4",
        "--eval-every", "2", "--batch-size", "16", "--max-length", "32", "--lr", "5e-3",
    ]  # fmt: skip
    assert main(argv) == 0
    written = modes(out)
    assert set(written) == {"0o640", "0o750"} and {"model/model.safetensors", "best/model.safetensors"} <= written["0o640"]
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    logged = records(out)
    final, best_step = [r for r in logged if "eval_loss" in r][-1], results["best"]["step"]
    best_tokens = next((r["tokens"] for r in logged if r["step"] == best_step and "loss" in r), 0)  # 0 at step 0
    expected = {
        "model": ({k: final[f"eval_{k}"] for k in results["best"] if k != "step"}, final["step"], final["tokens"]),
        "best": ({k: v for k, v in results["best"].items() if k != "step"}, best_step, best_tokens),
    }
    for name, (metrics, step, tokens) in expected.items():
        folder = out / name
        assert sorted(p.name for p in folder.iterdir()) == clean_files(folder, tmp_path / f"saved-{name}", auto), name
        card = (folder / "README.md").read_text(encoding="utf-8")
        assert front_matter(card)["pipeline_tag"] == tag
        assert set(shown(metrics)) <= set(card.splitlines()) and len(shown(metrics)) >= 3, name
        assert f"- {step:,} optimizer steps on {tokens:,} training tokens" in card, name
        assert shlex.join(["tokenmask", *argv]) in card
        assert f"{auto.__name__}.from_pretrained(path)" in card and f'pipeline("{tag}", model=path)' in card
        assert auto.from_pretrained(folder, local_files_only=True).config.id2label == dict(enumerate(results["labels"]))
    assert (
        f"At step {results['best']['step']:,}, the run's best evaluation by {results['metric']}"
        in (out / "best" / "README.md").read_text()
    )
