"""Fine-tuning fixtures: a tiny random BERT folder and small labelled data sets (written once per session)."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import pytest
import torch
from transformers import BertConfig, BertForMaskedLM

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
            tags = (
                ["B-PER"] + ["I-PER"] * (len(person) - 1) + ["O"] + ["B-LOC"] + ["I-LOC"] * (len(city) - 1) + ["O"]
            )
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
