"""A finished entry of pre-training blocks: what it holds (:class:`PretrainBlocks`) and how it is read back.

:mod:`tokenmask.blocks.build` writes entries (a pair of Arrow shard files per chunk of the
corpus, :mod:`tokenmask.blocks.shard`, and a ``meta.json`` written last that counts their
blocks); this module opens them, memory-mapped, one sequence per side (:mod:`tokenmask.blocks.store`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenmask.blocks.shard import SIDES, shard_path
from tokenmask.text.byte_checks import ReadStats

META_FILE = "meta.json"
"""The entry's counts, written last: an entry without it is not whole."""


@dataclass(frozen=True)
class PretrainBlocks:
    """Training and validation blocks (``input_ids``, ``word_ids``, ``id``) and what was kept.

    ``train`` and ``validation`` are :class:`~tokenmask.blocks.store.BlockSequence` s
    (memory-mapped Arrow) or lists: ``len``, ``x[i]`` and ``x[a:b]`` work on both.
    """

    train: Sequence[dict[str, Any]]
    validation: Sequence[dict[str, Any]]
    documents: int
    """Documents packed into blocks."""
    tokens: int
    """Tokens in all blocks: the kept text tokens plus the start / separator tokens."""
    block_length: int
    empty_documents: int
    """Documents read that were empty or white space only: skipped."""
    tokenless_documents: int
    """Non-blank documents the tokenizer turned into no token at all: skipped."""
    text_tokens: int
    """Tokens the tokenizer produced for the documents packed."""
    frame_tokens: int
    """Start and separator tokens the packer added."""
    invalid_utf8: int = 0
    """Lines (or records) read whose bytes that are not UTF-8 were replaced by U+FFFD."""
    first_invalid_utf8: str | None = None
    """Where the first of them is: ``"a.txt:3"``."""
    cache: str | None = None
    """The cache entry the blocks live in, or None (not cached)."""
    from_cache: bool = False
    """Whether that entry existed already (nothing was tokenized)."""

    @property
    def documents_read(self) -> int:
        return self.documents + self.empty_documents + self.tokenless_documents

    @property
    def kept_tokens(self) -> int:
        """Text tokens in the blocks; equal to ``text_tokens`` unless tokens were dropped."""
        return self.tokens - self.frame_tokens

    def describe(self) -> str:
        """One line: documents read and skipped, tokens produced and kept, blocks, cache.

        The bundled plays: ``"781 documents read, 0 empty skipped: 1,148,735 tokens, all kept,
        in 8,849 training and 203 validation blocks of 128 (+9,833 start/separator tokens);
        cached in ~/.cache/tokenmask/blocks/7a16…"``; a corpus with bad bytes adds
        ``", 3 lines with invalid UTF-8 replaced (first: a.txt:2)"`` after the skipped ones.
        """
        skipped = f"{self.empty_documents:,} empty skipped"
        if self.tokenless_documents:
            skipped += f", {self.tokenless_documents:,} without any token skipped"
        if self.invalid_utf8:
            stats = ReadStats(invalid_utf8=self.invalid_utf8, first_invalid=self.first_invalid_utf8)
            skipped += f", {stats.describe()}"
        dropped = self.text_tokens - self.kept_tokens
        kept = "all kept" if dropped == 0 else f"{self.kept_tokens:,} kept, {dropped:,} DROPPED"
        text = (
            f"{self.documents_read:,} documents read, {skipped}: {self.text_tokens:,} tokens, {kept}, "
            f"in {len(self.train):,} training and {len(self.validation):,} validation blocks of "
            f"{self.block_length} (+{self.frame_tokens:,} start/separator tokens)"
        )
        if self.cache is not None:
            text += f"; {'loaded from' if self.from_cache else 'cached in'} {self.cache}"
        return text


def read_entry(folder: Path, *, cache: str | None, from_cache: bool) -> PretrainBlocks:
    """The blocks of a finished entry ``folder`` (its ``meta.json`` and Arrow files), memory-mapped."""
    from tokenmask.blocks.store import BlockSequence  # pyarrow: not on the import path of `tokenmask --help`

    meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
    sides = {
        side: BlockSequence.open(
            *[shard_path(folder, side, index) for index, blocks in enumerate(meta["shards"]) if blocks[number]],
            phrases=meta["phrases"],
        )
        for number, side in enumerate(SIDES)
    }
    return PretrainBlocks(
        train=sides["train"],
        validation=sides["validation"].like(sides["train"]),  # no validation block: the same column types, empty
        documents=meta["documents"],
        tokens=meta["block_tokens"],
        block_length=meta["block_length"],
        empty_documents=meta["empty_documents"],
        tokenless_documents=meta["tokenless_documents"],
        text_tokens=meta["text_tokens"],
        frame_tokens=meta["frame_tokens"],
        invalid_utf8=meta["invalid_utf8"],
        first_invalid_utf8=meta["first_invalid_utf8"],
        cache=cache,
        from_cache=from_cache,
    )
