"""Fixtures of the study's command-line tests (test_study_cli.py, test_study_downstream.py); their corpus and
tokenizer are the root conftest's ``corpus_and_tokenizer``."""

from __future__ import annotations

import pytest


@pytest.fixture
def one_thread():
    """Train in this process on one thread: two threads beside other work on 2 cores are several times slower."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
