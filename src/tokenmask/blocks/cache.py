"""The on-disk cache of packed blocks: where it lives, what a key covers, how an entry appears.

An entry is a folder ``ROOT/blocks/KEY`` whose name is a hash of everything its blocks
depend on (the corpus, the tokenizer, the settings, :data:`FORMAT_VERSION`). It is built
under a temporary name next to it and renamed into place when complete, so a crash never
leaves a half entry that looks whole (only a ``.building-*`` folder, which is never read).
A disk that fills up on the way gives :class:`CacheDiskFull`: one line that says where, how
much the entry needs and what is left, instead of the writer's error.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokenmask.blocks.pack import frame_ids
from tokenmask.files import follow_umask

if TYPE_CHECKING:  # annotations only: importing transformers would slow `tokenmask --help`
    from transformers import PreTrainedTokenizerBase

    from tokenmask.blocks.shard import ChunkCounts

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
    the class and the start / separator ids the packer uses. Not the backend's truncation and
    padding: the last call that asked for them leaves them set (windows of a question, say), and
    encoding sets its own."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(type(tokenizer).__name__.encode("utf-8"))
    digest.update(json.dumps(frame_ids(tokenizer)).encode("utf-8"))
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        definition = {k: v for k, v in json.loads(backend.to_str()).items() if k not in ("truncation", "padding")}
        digest.update(json.dumps(definition, sort_keys=True).encode("utf-8"))
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
    follow_umask(staging)  # mkdtemp made it 0700: the cache is as readable as the user's other files
    try:
        os.rename(staging, entry)
    except OSError:
        if not (entry / complete_marker).is_file():
            raise
        shutil.rmtree(staging, ignore_errors=True)
    return entry


# What writers say when the disk fills: OSError with ENOSPC / EDQUOT (Python, pyarrow's
# "[errno 28]", tokenizers), or the text alone (safetensors' "No space left on device (os error 28)").
_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
_FULL_MESSAGES = ("No space left on device", "os error 28", "Disk quota exceeded")
_BYTES_PER_CHARACTER = 1.1
"""What an entry takes per character of text before a finished chunk says better: about 4
bytes a token (uint16 ids, int16 word ids), about 4 characters a token in English (the
bundled plays: 1.07; twice that where the ids need int32)."""


class CacheDiskFull(OSError):
    """Building a block cache entry ran out of disk space; the partial entry is gone, complete ones untouched."""

    def __init__(self, entry: Path | None, parent: Path, *, written: int, needed: int | None, cause: BaseException) -> None:
        free = shutil.disk_usage(parent).free if parent.exists() else 0
        said = cause.strerror if isinstance(cause, OSError) and cause.strerror else str(cause)  # without "[Errno 28]"
        first = said.splitlines()[0] if said else type(cause).__name__
        space = (
            f"{_size(written)} written" if needed is None else f"it needs about {_size(needed)}, {_size(written)} of it written"
        )
        space += f", {_size(free)} free there now"
        if entry is not None:
            where = f"writing the block cache entry {entry}"
            then = (
                "The partial entry was removed, entries already there are untouched, and the cache is rebuilt on the "
                "next run: free some space and run again, or put the cache elsewhere with --cache-dir"
            )
        else:
            where = f"writing the blocks in {parent} (a temporary folder: no cache)"
            then = "The partial blocks were removed: free some space and run again, or set TMPDIR to a larger disk"
        super().__init__(errno.ENOSPC, f"the disk is full: {where} failed ({space}; the writer said: {first}). {then}")

    def __str__(self) -> str:  # the message alone, without OSError's "[Errno 28]"
        return str(self.strerror)

    @classmethod
    def of(
        cls, error: BaseException, *, entry: Path | None, staging: Path | None, done: Sequence[ChunkCounts], size: int | None
    ) -> CacheDiskFull | None:
        """The full disk that ``error`` (raised while ``staging`` was made or written) means, or None.

        The entry's size is estimated from ``size`` (the corpus's characters, or its files'
        bytes) at the bytes a character took in the chunks ``done``.
        """
        if not says_disk_full(error):
            return None
        parent = staging.parent if staging is not None else entry.parent if entry is not None else Path(tempfile.gettempdir())
        written = sum(f.stat().st_size for f in staging.rglob("*") if f.is_file()) if staging and staging.exists() else 0
        characters = sum(c.characters for c in done)
        ratio = sum(c.bytes_written for c in done) / characters if characters else _BYTES_PER_CHARACTER
        needed = max(written, round(size * ratio)) if size is not None else None
        return cls(entry, parent, written=written, needed=needed, cause=error)


def says_disk_full(error: BaseException) -> bool:
    """Whether ``error`` says the disk is full: ENOSPC / EDQUOT, or a message that names it
    (the block cache's writers, and the checkpoint writers of :mod:`tokenmask.train.checkpoint`)."""
    if isinstance(error, OSError) and error.errno in _FULL_ERRNOS:
        return True
    return any(text in str(error) for text in _FULL_MESSAGES)


def _size(count: int) -> str:
    """``_size(3 * 2**20) -> "3.0 MiB"``; KiB below 1 MiB, GiB from 1 GiB on."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count / 2**10:.1f} KiB"
