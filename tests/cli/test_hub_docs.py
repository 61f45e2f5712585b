"""The commands of docs/hub.md ("Start from a Hub checkpoint"), run as written, through a Hub cache.

Tiny checkpoints stand in for ``FacebookAI/roberta-base`` and ``answerdotai/ModernBERT-base``
under those very ids in the session's Hugging Face cache (``HF_HUB_OFFLINE=1``); the page's
placeholders (``corpus/``, ``heldout/``, ``train.csv``, ``dev.csv``, ``runs/``) become small real
files, and training gets a few steps. Blocks marked ``<!-- not run: REASON -->`` need the Hub or GPUs.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from hub_checkpoints import lay_out_cache
from tokenmask.cli.main import main

PAGE = Path(__file__).resolve().parents[2] / "docs" / "hub.md"
STAND_INS = {"FacebookAI/roberta-base": "roberta", "answerdotai/ModernBERT-base": "modernbert"}
"""Hub id on the page -> the family whose tiny checkpoint is laid out under that id."""
SHORT = {
    "pretrain": shlex.split("--max-steps 2 --batch-size 2 --max-length 32 --eval-blocks 2 --no-demo --report-to none"),
    "finetune": shlex.split("--max-steps 2 --batch-size 4 --max-length 32 --report-to none"),
    "evaluate": shlex.split("--max-length 32 --max-blocks 2"),
}
"""Appended to each command (a later flag wins): a few steps of tiny batches."""


def page_commands() -> list[tuple[str, str | None]]:
    """``(command line, reason)`` for each line of the page's bash blocks, in order; the reason is
    that of the block's ``<!-- not run: REASON -->`` mark, or None."""
    blocks = re.findall(r"(<!-- not run: (.*?) -->\n)?```bash\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.DOTALL)
    return [(line.strip(), reason or None) for _, reason, code in blocks for line in code.splitlines() if line.strip()]


def test_only_what_needs_the_hub_or_gpus_is_left_unrun():
    unrun = [(line.split()[0], reason) for line, reason in page_commands() if reason]
    assert unrun == [("hf", "needs the Hub (huggingface_hub's own command line)"), ("accelerate", "needs 8 GPUs")]
    assert all(line.startswith(("tokenmask ", "HF_HUB_OFFLINE=1 tokenmask ")) for line, reason in page_commands() if not reason)


@pytest.fixture(scope="module")
def stand_ins(hub_cache):
    for repo, family in STAND_INS.items():
        lay_out_cache(hub_cache.home, repo, hub_cache.snapshot(hub_cache.families[family]))
    return hub_cache


def test_the_page_runs_as_written(stand_ins, tmp_path, lines, reviews_csv, capsys):
    corpus, heldout = tmp_path / "corpus", tmp_path / "heldout"
    for folder, start in ((corpus, 0), (heldout, 600)):
        folder.mkdir()
        text = "\n\n".join(" ".join(lines[i : i + 6]) for i in range(start, start + 600, 6))
        (folder / "part.txt").write_text(text, encoding="utf-8")
    places = {
        "corpus/": f"{corpus}/",
        "heldout/": f"{heldout}/",
        "train.csv": str(reviews_csv),
        "dev.csv": str(reviews_csv),
        "runs/": f"{tmp_path}/runs/",
    }
    ran = []
    for line, reason in page_commands():
        if reason:
            continue
        argv = [
            next((word.replace(k, v, 1) for k, v in places.items() if word.startswith(k)), word) for word in shlex.split(line)
        ]
        argv = argv[argv.index("tokenmask") + 1 :]  # HF_HUB_OFFLINE=1 is the session's setting already
        assert main([*argv, *SHORT.get(argv[0], [])]) == 0, line
        ran.append(argv[0])
        capsys.readouterr()
    assert ran == ["pretrain", "pretrain", "pretrain", "evaluate", "evaluate", "finetune", "finetune"]
    # the runs name the commit each Hub id stood for, for replay and on the card
    for run, repo in (("roberta-domain", "FacebookAI/roberta-base"), ("modernbert-domain", "answerdotai/ModernBERT-base")):
        settings = yaml.safe_load((tmp_path / "runs" / run / "config.yaml").read_text(encoding="utf-8"))
        commit = (stand_ins.home / "hub" / f"models--{repo.replace('/', '--')}" / "refs" / "main").read_text()
        assert settings["init"] == repo and settings["revision"] == commit
        card = (tmp_path / "runs" / run / "model" / "README.md").read_text(encoding="utf-8")
        assert f"base_model: {repo}" in card and commit in card
