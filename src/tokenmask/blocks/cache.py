"""The on-disk cache of packed blocks: where it lives, what a key covers, how an entry appears.

An entry is a folder ``ROOT/blocks/KEY`` whose name is a hash of everything its blocks
depend on (the corpus, the tokenizer, the settings, :data:`FORMAT_VERSION`). It is built
under a temporary name next to it and renamed into place when complete, so a crash never
leaves a half entry that looks whole (only a ``.building-*`` folder, which is never read).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokenmask.blocks.pack import frame_ids

if TYPE_CHECKING:  # annotations only: importing transformers would slow `tokenmask --help`
    from transformers import PreTrainedTokenizerBase

FORMAT_VERSION = 3
"""Bumped whenever the blocks or the entry layout change, so old entries are never read
(3: chunks packed on their own, in shard files; entries of 2, one file a side, are rebuilt)."""

CACHE_ENV = "TOKENMASK_CACHE"


def default_cache_root() -> Path:
    """``$TOKENMASK_CACHE``, else ``~/.cache/tokenmask``."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "tokenmask")


def cache_key(settings: Mapping[str, Any]) -> str:
    """A 32-hex-digit hash of JSON-serialisable ``settings`` (key order does not matter)."""
    text = json.dumps({**settings, "format_version": FORMAT_VERSION}, sort_keys=True)
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


def tokenizer_fingerprint(tokenizer: PreTrainedTokenizerBase) -> str:
    """A hash of what decides the encoding: the full fast-tokenizer definition (vocabulary,
    merges, normalizer, pre-tokenizer, added tokens) or, for a slow one, its vocabulary; plus
    the class and the start / separator ids the packer uses."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(type(tokenizer).__name__.encode("utf-8"))
    digest.update(json.dumps(frame_ids(tokenizer)).encode("utf-8"))
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        digest.update(backend.to_str().encode("utf-8"))
    else:
        digest.update(json.dumps(sorted(tokenizer.get_vocab().items())).encode("utf-8"))
    return digest.hexdigest()


def texts_fingerprint(texts: Iterable[str]) -> str:
    """A hash of a sequence of texts, in order (each length-prefixed, so boundaries count)."""
    digest = hashlib.blake2b(digest_size=16)
    for text in texts:
        data = text.encode("utf-8", errors="surrogatepass")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


def staging_folder(parent: Path | None) -> Path:
    """A new empty folder to build an entry in: under ``parent`` (created if needed), so that
    the final rename stays on one file system, or in the system's temporary folder."""
    if parent is not None:
        parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=".building-", dir=parent))


def publish(staging: Path, entry: Path, *, complete_marker: str) -> Path:
    """Rename the finished ``staging`` folder to ``entry``; return ``entry``.

    When another process published the same entry first (its ``complete_marker`` file
    exists), keep theirs and delete ours: both were built from the same inputs.

    Raises:
        OSError: ``entry`` exists but is not a complete entry.
    """
    try:
        os.rename(staging, entry)
    except OSError:
        if not (entry / complete_marker).is_file():
            raise
        shutil.rmtree(staging, ignore_errors=True)
    return entry
