"""Fill-mask with a trained checkpoint: ``[MASK]`` or ``<mask>`` in, ranked tokens out; the demo's guesses."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from transformers import pipeline

from tokenmask.hub import HubConfig
from tokenmask.text.token_tables import require_mask_token
from tokenmask.train.models import load_model_with_notes, saved_tokenizer
from tokenmask.train.names import Checkpoint, refuse_discriminator, resolve_checkpoint
from tokenmask.use.config import FillConfig
from tokenmask.use.evaluate import inference_device

_MASK_SPELLINGS = re.compile(r"\[MASK\]|<mask>", re.IGNORECASE)


def load_fill_mask(model: str | Path | Checkpoint, *, hub: HubConfig = HubConfig()):
    """A ``pipeline("fill-mask")`` on a checkpoint (a folder or a Hub id:
    :func:`~tokenmask.train.names.resolve_checkpoint`), on the GPU when there is one.

    Raises:
        ValueError: the checkpoint has no masked-LM head (its guesses would be random; a
            replaced-token discriminator: the message names its generator), its
            tokenizer has no mask token, or more ids than the model has embeddings.
    """
    checkpoint = resolve_checkpoint(model, hub=hub)
    refuse_discriminator(checkpoint, "fill masks")
    tokenizer = saved_tokenizer(checkpoint)
    require_mask_token(tokenizer)
    loaded = load_model_with_notes(checkpoint, vocab_size=len(tokenizer), max_length=None)
    if loaded.new_head:
        raise ValueError(
            f"{checkpoint.name} has no masked-LM head (a sentence encoder or a classifier?): its guesses would be "
            f"random; pre-train it first (tokenmask pretrain --init {checkpoint.name})"
        )
    return pipeline("fill-mask", model=loaded.model, tokenizer=tokenizer, device=inference_device())


def fill_mask(fill, text: str, *, top_k: int = 5) -> list[list[dict[str, Any]]]:
    """Predictions for each mask in ``text``; ``[MASK]`` and ``<mask>`` both work.

    Returns one list per mask of ``{"token": str, "score": float}``, best first.

    Raises:
        ValueError: no mask in the text.
    """
    mask = fill.tokenizer.mask_token
    text = _MASK_SPELLINGS.sub(mask, text)
    if mask not in text:
        raise ValueError(f"the text has no mask: write [MASK] (or {mask}) where a word is missing")
    results = fill(text, top_k=top_k)
    if results and isinstance(results[0], dict):  # one mask: the pipeline returns a flat list
        results = [results]
    return [[{"token": r["token_str"].strip(), "score": float(r["score"])} for r in per_mask] for per_mask in results]


def predict_masks(config: FillConfig) -> list[list[dict[str, Any]]]:
    """``tokenmask fill``: :func:`fill_mask` of ``config.text`` (its words joined by spaces) with ``config.model``.

    Raises:
        ValueError: a bad checkpoint folder, or no mask in the text.
    """
    return fill_mask(load_fill_mask(config.model, hub=config.hub), " ".join(config.text), top_k=config.top_k)


def fill_demo(fill, lines: Sequence[str], *, top_k: int = 3) -> list[dict[str, Any]]:
    """Hide one word of each line (:func:`demo_word`) and ask ``fill`` for its ``top_k`` guesses.

    Returns one record per line: ``{"masked": str, "answer": str, "guesses": [{"token", "score"}...],
    "hit": bool}``, where ``hit`` says the answer (lower-cased) is among the guesses.
    """
    records = []
    for line in lines:
        words = line.split()
        target = demo_word(words, line)
        hidden = words[target].strip(".,;:!?'\"")
        masked = " ".join(w.replace(hidden, "[MASK]", 1) if i == target else w for i, w in enumerate(words))
        guesses = fill_mask(fill, masked, top_k=top_k)[0]
        answer = hidden.lower()
        records.append({"masked": masked, "answer": answer, "guesses": guesses, "hit": answer in [g["token"] for g in guesses]})
    return records


def demo_word(words: Sequence[str], line: str) -> int:
    """Index of the word a demo hides: a hash of the line picks among the alphabetic words.

    The word is not chosen to flatter the model, and the same line hides the same word on
    every run. ``["To", "be,", "or"]`` -> one of 0, 1, 2.
    """
    candidates = [i for i, w in enumerate(words) if w.strip(".,;:!?'\"").isalpha()] or list(range(len(words)))
    digest = int.from_bytes(hashlib.blake2b(line.encode("utf-8"), digest_size=4).digest(), "little")
    return candidates[digest % len(candidates)]
