"""Fixtures of the study's command-line tests (test_study_cli.py, test_study_downstream.py)."""

from __future__ import annotations

import pytest

from tokenmask.text.tokenizer import train_tokenizer


@pytest.fixture
def one_thread():
    """Train in this process on one thread: two threads beside other work on 2 cores are several times slower."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def corpus_and_tokenizer(tmp_path_factory, lines):
    """300 lines of Shakespeare in 50 paragraphs and a 400-token WordPiece vocabulary (small, fast cells)."""
    folder = tmp_path_factory.mktemp("study-data")
    corpus = folder / "plays.txt"
    corpus.write_text("\n\n".join(" ".join(lines[i : i + 6]) for i in range(0, 300, 6)), encoding="utf-8")
    tokenizer = folder / "tokenizer"
    train_tokenizer(lines[:2000], kind="wordpiece", vocab_size=400).save_pretrained(tokenizer)
    return corpus, tokenizer
