"""Shared fixtures: real tokenizers of three families, tiny trained ones, real text."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from tokenmask.data.resources import shakespeare_lines  # noqa: E402
from tokenmask.data.tokenizers import load_tokenizer, train_tokenizer  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def block_cache(tmp_path_factory):
    """Every test caches blocks in one session folder, never in the user's ``~/.cache/tokenmask``."""
    root = tmp_path_factory.mktemp("tokenmask-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TOKENMASK_CACHE", str(root))
        yield root


@pytest.fixture(scope="session")
def lines() -> list[str]:
    """The first 5,000 spoken lines of Shakespeare."""
    return shakespeare_lines(5000)


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
