"""Checkpoints: a Hugging Face model folder plus the training state, written atomically.

The folder is written under a temporary name and renamed into place, so a crash never leaves
a half-written checkpoint that looks whole. The training state holds tensors and plain
numbers only and loads with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

STATE_FILE = "training_state.pt"


def save_checkpoint(
    folder: Path,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    state: dict[str, Any],
) -> Path:
    """Write ``model`` (safetensors), ``tokenizer`` and ``state`` to ``folder``, atomically.

    An existing ``folder`` is replaced only once the new one is complete.
    """
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    temporary = folder.parent / f".{folder.name}.partial-{os.getpid()}"
    shutil.rmtree(temporary, ignore_errors=True)
    model.save_pretrained(temporary, safe_serialization=True)
    tokenizer.save_pretrained(temporary)
    torch.save(state, temporary / STATE_FILE)
    previous = folder.parent / f".{folder.name}.previous-{os.getpid()}"
    if folder.exists():
        folder.rename(previous)
    temporary.rename(folder)
    shutil.rmtree(previous, ignore_errors=True)
    return folder


def load_state(folder: Path) -> dict[str, Any]:
    """The training state of a checkpoint, without unpickling arbitrary objects."""
    return torch.load(Path(folder) / STATE_FILE, map_location="cpu", weights_only=True)
