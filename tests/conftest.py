"""Shared fixtures: real tokenizers of three families, tiny trained ones, real text."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

# ruff: noqa: E402 (the environment is set before the imports that read it)
# Before torch, transformers, huggingface_hub or tokenmask is imported: huggingface_hub reads these
# into module constants at import. Tests get a fresh, empty HF_HOME (the hub_cache fixture fills it)
# and no network: never a developer's cache, token or endpoint.
for _name in [name for name in os.environ if name.startswith(("HF_", "HUGGINGFACE_", "HUGGING_FACE_", "TRANSFORMERS_"))]:
    os.environ.pop(_name)
os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="tokenmask-tests-hf-home-")
atexit.register(shutil.rmtree, os.environ["HF_HOME"], ignore_errors=True)
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Under pytest-xdist (`make test` runs `-n auto`, a worker per core), each worker and the runs it starts
# get their share of the cores' threads: torch threads beyond the cores wait on each other.
if "PYTEST_XDIST_WORKER_COUNT" in os.environ:
    os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))

import csv
import json
import random
from pathlib import Path

import pytest
import torch
from transformers import BertConfig, BertForMaskedLM

from tokenmask.text.resources import shakespeare_lines
from tokenmask.text.tokenizer import load_tokenizer, train_tokenizer


@pytest.fixture(scope="session", autouse=True)
def block_cache(tmp_path_factory):
    """Every test caches blocks in one session folder, never in the user's ``~/.cache/tokenmask``."""
    root = tmp_path_factory.mktemp("tokenmask-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TOKENMASK_CACHE", str(root))
        yield root


@pytest.fixture(scope="module")
def datasets_quiet():
    """``datasets``, with its progress bars off while a module's tests run (skipped where it is not installed)."""
    datasets = pytest.importorskip("datasets")
    datasets.disable_progress_bars()
    yield datasets
    datasets.enable_progress_bars()


@pytest.fixture(scope="session")
def lines() -> list[str]:
    """The first 5,000 spoken lines of Shakespeare."""
    return shakespeare_lines(5000)


@pytest.fixture(scope="session")
def plays_file(tmp_path_factory, lines):
    """Writes the first ``count`` of :func:`lines` as paragraphs of ``per`` lines, blank-line
    separated, to a fresh ``plays.txt``; returns its path."""

    def write(count: int, per: int = 8) -> Path:
        path = tmp_path_factory.mktemp("corpus") / "plays.txt"
        path.write_text("\n\n".join(" ".join(lines[i : i + per]) for i in range(0, count, per)), encoding="utf-8")
        return path

    return write


@pytest.fixture(scope="session")
def corpus_and_tokenizer(tmp_path_factory, lines):
    """300 lines of Shakespeare in 50 paragraphs (155 training blocks of 32 tokens) and a 400-token WordPiece
    vocabulary: small, fast runs with small checkpoints (~6 MB), for the crash and study tests."""
    folder = tmp_path_factory.mktemp("crash-data")
    corpus = folder / "plays.txt"
    corpus.write_text("\n\n".join(" ".join(lines[i : i + 6]) for i in range(0, 300, 6)), encoding="utf-8")
    tokenizer = folder / "tokenizer"
    train_tokenizer(lines[:2000], kind="wordpiece", vocab_size=400).save_pretrained(tokenizer)
    return corpus, tokenizer


@pytest.fixture(scope="session")
def short_texts(tmp_path_factory) -> Path:
    """A text file of three lines of Shakespeare, one text per line (for embed and search)."""
    path = tmp_path_factory.mktemp("texts") / "texts.txt"
    path.write_text("to be or not to be\nthe play is the thing\nall the world's a stage\n", encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def bert_tokenizer():
    return load_tokenizer("bert-base-uncased")


@pytest.fixture(scope="session")
def roberta_tokenizer():
    return load_tokenizer("roberta-gpt2")


@pytest.fixture(scope="session")
def trained_tokenizers(lines):
    """Small tokenizers trained here: WordPiece, byte-level BPE and SentencePiece-style Unigram."""
    return {kind: train_tokenizer(lines, kind=kind, vocab_size=400) for kind in ("wordpiece", "bpe", "unigram")}


@pytest.fixture(scope="session")
def tokenizers(bert_tokenizer, roberta_tokenizer, trained_tokenizers):
    """Every tokenizer family we support, by name."""
    return {
        "bert-base-uncased": bert_tokenizer,
        "roberta-gpt2": roberta_tokenizer,
        **{f"trained-{k}": t for k, t in trained_tokenizers.items()},
    }


# Training and fine-tuning fixtures: a tiny random BERT folder and small labelled data sets (written once per session).

GOOD, BAD = ("great", "superb", "moving", "fine"), ("dull", "awful", "boring", "flat")
PEOPLE = (("anna",), ("bob", "stone"), ("carla",), ("dev", "patel"))
CITIES = (("paris",), ("new", "york"), ("lima",), ("oslo",))


def save_tiny_bert(folder: Path, tokenizer) -> Path:
    """A random 1-layer, 32-wide BertForMaskedLM on the real bert-base-uncased vocabulary, with its tokenizer."""
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64
    )
    BertForMaskedLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def write_reviews(path: Path, rows: int = 400) -> Path:
    """A CSV of 'text,label,movie': the label follows from one word (learnable in a few steps)."""
    rng = random.Random(0)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "label", "movie"])
        for i in range(rows):
            label = rng.choice(["pos", "neg"])
            word = rng.choice(GOOD if label == "pos" else BAD)
            writer.writerow([f"the film was {word} and {rng.choice(['long', 'short', 'new'])}", label, f"movie {i % 40}"])
    return path


def write_tagged(path: Path, rows: int = 240) -> Path:
    """JSON Lines of {"tokens", "tags"}: '<person> visited <city> today' with BIO tags."""
    rng = random.Random(1)
    with path.open("w", encoding="utf-8") as handle:
        for _ in range(rows):
            person, city = rng.choice(PEOPLE), rng.choice(CITIES)
            words = [*person, "visited", *city, "today"]
            tags = ["B-PER"] + ["I-PER"] * (len(person) - 1) + ["O"] + ["B-LOC"] + ["I-LOC"] * (len(city) - 1) + ["O"]
            handle.write(json.dumps({"tokens": words, "tags": tags}) + "\n")
    return path


@pytest.fixture(scope="session")
def tiny_mlm_folder(tmp_path_factory, bert_tokenizer) -> Path:
    return save_tiny_bert(tmp_path_factory.mktemp("tiny-bert") / "model", bert_tokenizer)


@pytest.fixture(scope="session")
def reviews_csv(tmp_path_factory) -> Path:
    return write_reviews(tmp_path_factory.mktemp("reviews") / "reviews.csv")


@pytest.fixture(scope="session")
def tagged_jsonl(tmp_path_factory) -> Path:
    return write_tagged(tmp_path_factory.mktemp("tagged") / "tagged.jsonl")


class CrashAfter:
    """A reporter that 'crashes' the run (raises :attr:`Crash`) right after a given step."""

    class Crash(Exception):
        pass

    def __init__(self, step):
        self.at = step

    def message(self, text):
        pass

    def step(self, step, total, loss, tokens_per_s):
        if step == self.at:
            raise CrashAfter.Crash


@pytest.fixture
def crash_after():
    """``crash_after(6)``: a reporter for resume tests; ``pytest.raises(crash_after.Crash)``."""
    return CrashAfter


@pytest.fixture(scope="session")
def hub_cache(tmp_path_factory):
    """Tiny real checkpoints of every encoder family, and a few special repositories, in this
    session's huggingface_hub cache, to load by Hub id offline (a :class:`hub_checkpoints.HubCache`:
    ``hub_cache.families["albert"] == "tokenmask-test/tiny-albert"``, ``hub_cache.commits``, …)."""
    from huggingface_hub import constants

    from hub_checkpoints import build_hub_cache

    home = Path(constants.HF_HOME)
    # the cache must be where huggingface_hub looks: the environment above was read at its import
    assert home == Path(os.environ["HF_HOME"]) and Path(constants.HF_HUB_CACHE) == home / "hub", constants.HF_HUB_CACHE
    assert constants.HF_HUB_OFFLINE
    return build_hub_cache(home, tmp_path_factory.mktemp("hub-checkpoints"))
