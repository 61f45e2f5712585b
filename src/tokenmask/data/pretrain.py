"""The pre-training corpus as fixed-length blocks, with a deterministic train/validation split.

Documents are split by a hash of their text (so the split does not depend on their order or
number), then each side is packed into blocks (:func:`tokenmask.data.blocks.pack_texts`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: importing transformers would slow `tokenmask --help`
    from transformers import PreTrainedTokenizerBase

from tokenmask.data.blocks import pack_texts

DEFAULT_VALIDATION_SHARE = 0.02
"""Share of documents held out by default (``pretrain`` and ``evaluate`` agree on it)."""


@dataclass(frozen=True)
class PretrainBlocks:
    """Training and validation blocks (``input_ids``, ``word_ids``, ``id``) and counts."""

    train: list[dict[str, Any]]
    validation: list[dict[str, Any]]
    documents: int
    tokens: int

    def describe(self) -> str:
        return (
            f"{self.documents:,} documents, {self.tokens:,} tokens in {len(self.train):,} training "
            f"and {len(self.validation):,} validation blocks"
        )


def is_validation(text: str, share: float) -> bool:
    """Deterministic document-level split: a hash of the text below ``share``."""
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little") / 2**64 < share


def build_blocks(
    texts: Iterable[str],
    tokenizer: PreTrainedTokenizerBase,
    *,
    block_length: int,
    validation_share: float,
) -> PretrainBlocks:
    """Split documents, pack each side into blocks of ``block_length`` tokens.

    Every token of every non-empty document is kept (the last block of each side may be
    shorter). Validation block ids start after the training ones, so ids are unique.

    Raises:
        ValueError: no text, or too little for both sides.
    """
    train_texts: list[str] = []
    validation_texts: list[str] = []
    for text in texts:
        if text.strip():
            (validation_texts if is_validation(text, validation_share) else train_texts).append(text)
    if not train_texts:
        raise ValueError("the corpus holds no text for training")
    train = list(pack_texts(train_texts, tokenizer, block_length=block_length))
    validation = list(pack_texts(validation_texts, tokenizer, block_length=block_length))
    for offset, block in enumerate(validation):
        block["id"] = len(train) + offset
    tokens = sum(len(b["input_ids"]) for b in train + validation)
    return PretrainBlocks(train, validation, len(train_texts) + len(validation_texts), tokens)


def held_out_lines(texts: Sequence[str], validation_share: float, count: int) -> list[str]:
    """A few sentences from validation documents, for a fill-mask demo."""
    lines = []
    for text in texts:
        if is_validation(text, validation_share):
            for sentence in text.replace("?", ".").replace("!", ".").split(". "):
                words = sentence.split()
                if 6 <= len(words) <= 14:
                    lines.append(" ".join(words).rstrip(".") + ".")
                    break
        if len(lines) == count:
            break
    return lines
