"""The pre-training corpus as fixed-length blocks on disk, with a deterministic train/validation split.

Documents are read in one streaming pass and cut into chunks; each chunk is split by a hash of
each document's text (so the split does not depend on order or number), encoded in batches and
packed into blocks of its own (:mod:`tokenmask.blocks.shard`), in ``num_proc`` processes
(:mod:`tokenmask.blocks.workers`): the blocks are the same whatever that number. The shard
files are Arrow, read back memory-mapped as one sequence per side (:mod:`tokenmask.blocks.store`).
Entries are cached by a key over the corpus, the tokenizer and the settings
(:mod:`tokenmask.blocks.cache`): the second call with the same key tokenizes nothing.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Iterable, Sized
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: importing transformers would slow `tokenmask --help`
    from transformers import PreTrainedTokenizerBase

    from tokenmask.text.phrases import Phrases

from tokenmask.blocks.cache import (
    CacheDiskFull,
    cache_key,
    default_cache_root,
    publish,
    staging_folder,
    texts_fingerprint,
    tokenizer_fingerprint,
)
from tokenmask.blocks.entry import META_FILE, PretrainBlocks, read_entry
from tokenmask.blocks.pack import PackingCounts
from tokenmask.blocks.progress import EncodingProgress
from tokenmask.blocks.shard import SIDES, ChunkCounts, ChunkJob, document_chunks, is_validation, shard_path
from tokenmask.blocks.workers import default_num_proc, packed_chunks
from tokenmask.files import write_json
from tokenmask.text.byte_checks import MAX_LINE_BYTES, ReadStats
from tokenmask.text.corpus import DEFAULT_BOUNDARY, DocumentBoundary, expand_paths, fingerprint_sources, read_documents


def build_blocks(
    texts: Iterable[str],
    tokenizer: PreTrainedTokenizerBase,
    *,
    block_length: int,
    validation_share: float,
    cache_dir: str | Path | None = None,
    use_cache: bool = True,
    progress: bool | None = None,
    batch_size: int = 1000,
    num_proc: int | None = None,
    phrases: Phrases | None = None,
) -> PretrainBlocks:
    """Split documents, pack each side into blocks of ``block_length`` tokens.

    Every token of every non-empty document is kept (the last block of each side may be
    shorter). Validation block ids start after the training ones, so ids are unique.

    Args:
        texts: the documents. A list or tuple is looked up in the cache by a hash of its
            texts; any other iterable is read once, as a stream, and not cached (use
            :func:`corpus_blocks` to cache a corpus on disk without reading it first).
        tokenizer: a fast tokenizer (word ids come from it).
        block_length: tokens per block, frame tokens included.
        validation_share: share of documents held out, in [0, 1).
        cache_dir: cache root; None is ``$TOKENMASK_CACHE`` or ``~/.cache/tokenmask``.
        use_cache: False builds in a temporary folder, neither reading nor writing the cache.
        progress: show a progress bar on stderr; None shows it when stderr is a terminal.
        batch_size: texts encoded per tokenizer call.
        num_proc: processes that encode (None: one per core; 1: this process, no pool). The
            blocks are the same whatever it is, and the cache key does not cover it.
        phrases: PMI n-grams and terms to find; blocks then carry ``merged_word_ids`` and
            ``term_mask`` (:class:`~tokenmask.blocks.pack.Block`), and the cache key covers them.

    Raises:
        ValueError: bad settings, no text, or too little for training.
        CacheDiskFull: the disk filled up while the blocks were written (an ``OSError``).
    """
    _check_settings(block_length, validation_share, batch_size, num_proc)
    key = None
    if use_cache and isinstance(texts, (list, tuple)):
        source = {"texts": texts_fingerprint(texts), "count": len(texts)}
        key = cache_key(_key_settings(source, tokenizer, block_length, validation_share, phrases))
    total = len(texts) if isinstance(texts, Sized) else None
    return _cached_or_built(
        lambda: iter(texts),
        tokenizer,
        key=key,
        root=_root(cache_dir),
        block_length=block_length,
        validation_share=validation_share,
        progress=progress,
        total=total,
        batch_size=batch_size,
        num_proc=num_proc,
        size=sum(map(len, texts)) if isinstance(texts, (list, tuple)) else None,
        phrases=phrases,
    )


def corpus_blocks(
    paths: Iterable[str | Path],
    tokenizer: PreTrainedTokenizerBase,
    *,
    block_length: int,
    validation_share: float,
    boundary: DocumentBoundary = DEFAULT_BOUNDARY,
    text_field: str = "text",
    split: str | None = None,
    strict: bool = False,
    max_line_bytes: int = MAX_LINE_BYTES,
    cache_dir: str | Path | None = None,
    use_cache: bool = True,
    progress: bool | None = None,
    batch_size: int = 1000,
    num_proc: int | None = None,
    phrases: Phrases | None = None,
) -> PretrainBlocks:
    """:func:`build_blocks` for a corpus on disk, streamed, cached by its files' identity.

    The cache key covers each file's path, size and modification time (not its contents,
    so a cache hit reads nothing), the tokenizer, ``block_length``, ``validation_share``,
    ``boundary``, ``text_field``, ``split``, ``strict`` and ``max_line_bytes``. Change a file and
    the entry is rebuilt. Lines with bytes that are not UTF-8 are counted in the blocks
    (``invalid_utf8``) and in the entry, so a cache hit reports them too.

    Args:
        paths: files, folders and globs (:func:`tokenmask.text.corpus.expand_paths`).
        boundary: where a document of a text file ends (``"paragraph"``: at a blank line),
            as :func:`tokenmask.text.corpus.read_documents` reads; so do ``text_field``,
            ``split``, ``strict`` and ``max_line_bytes``.
        text_field: the text field of JSON records, column of CSV/Parquet files and datasets.
        split: for a ``DatasetDict`` folder, the split to read.
        strict: refuse bytes that are not UTF-8 instead of replacing them.
        max_line_bytes: longest line of a text or JSON Lines file.
        tokenizer: encodes the documents; block_length, validation_share, batch_size,
            use_cache, cache_dir, num_proc and phrases are those of :func:`build_blocks`.

    Raises:
        FileNotFoundError: a path matches nothing.
        ValueError: bad settings, a source that cannot be read (see ``read_documents``), no text.
        CacheDiskFull: the disk filled up while the blocks were written (an ``OSError``).
    """
    _check_settings(block_length, validation_share, batch_size, num_proc)
    sources = expand_paths(paths)
    files = fingerprint_sources(sources)
    key = None
    if use_cache:
        source = {"files": files, "boundary": boundary, "text_field": text_field, "split": split,
                  "strict": strict, "max_line_bytes": max_line_bytes}  # fmt: skip
        key = cache_key(_key_settings(source, tokenizer, block_length, validation_share, phrases))
    stats = ReadStats()
    reading = dict(boundary=boundary, text_field=text_field, split=split, strict=strict, max_line_bytes=max_line_bytes)
    return _cached_or_built(
        lambda: read_documents(sources, **reading, stats=stats), tokenizer,  # type: ignore[arg-type]  # the keywords above
        key=key, root=_root(cache_dir), block_length=block_length, validation_share=validation_share,
        progress=progress, total=None, batch_size=batch_size, num_proc=num_proc, size=sum(size for _, size, _ in files),
        stats=stats, phrases=phrases,
    )  # fmt: skip


def _check_settings(block_length: int, validation_share: float, batch_size: int, num_proc: int | None) -> None:
    if block_length < 2:
        raise ValueError(f"block_length must be at least 2; got {block_length}")
    if not 0.0 <= validation_share < 1.0:
        raise ValueError(f"validation_share must be in [0, 1); got {validation_share}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1; got {batch_size}")
    if num_proc is not None and num_proc < 1:
        raise ValueError(f"num_proc must be at least 1; got {num_proc}")


def _root(cache_dir: str | Path | None) -> Path:
    return Path(cache_dir) if cache_dir is not None else default_cache_root()


def _key_settings(
    source: dict[str, Any],
    tokenizer: PreTrainedTokenizerBase,
    block_length: int,
    validation_share: float,
    phrases: Phrases | None,
) -> dict[str, Any]:
    settings = {
        "source": source,
        "tokenizer": tokenizer_fingerprint(tokenizer),
        "block_length": block_length,
        "validation_share": validation_share,
    }
    if phrases is not None:  # absent otherwise, so that the keys of plain blocks stay what they were
        settings["phrases"] = phrases.fingerprint()
    return settings


def _cached_or_built(
    documents: Callable[[], Iterable[str]],
    tokenizer: PreTrainedTokenizerBase,
    *,
    key: str | None,
    root: Path,
    block_length: int,
    validation_share: float,
    progress: bool | None,
    total: int | None,
    batch_size: int,
    num_proc: int | None,
    size: int | None,
    stats: ReadStats | None = None,
    phrases: Phrases | None = None,
) -> PretrainBlocks:
    """Load the entry ``key`` when it exists; else build it (in a staging folder) and publish it.

    Without a key, build in a temporary folder, map the files and delete the folder (on
    POSIX the mapped files live on until the blocks are freed). ``size`` is the corpus's
    size in characters (or bytes of its files) when known: what a full disk's message
    estimates the entry's size from.

    Raises:
        CacheDiskFull: the disk filled up; the staging folder is removed first.
    """
    entry = root / "blocks" / key if key is not None else None
    if entry is not None and (entry / META_FILE).is_file():
        return read_entry(entry, cache=str(entry), from_cache=True)
    done: list[ChunkCounts] = []
    staging = None
    try:
        staging = staging_folder(entry.parent if entry is not None else None)
        job = ChunkJob(
            staging, tokenizer, phrases, block_length=block_length, validation_share=validation_share, batch_size=batch_size
        )
        with EncodingProgress(enabled=_show_progress(progress), total=total) as bar:
            _write_entry(
                documents(), job, num_proc=num_proc or default_num_proc(), progress=bar, stats=stats or ReadStats(), done=done
            )
    except BaseException as error:
        full = CacheDiskFull.of(error, entry=entry, staging=staging, done=done, size=size)  # before the clean-up frees space
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        if full is not None:
            raise full from error
        raise
    if entry is None:
        blocks = read_entry(staging, cache=None, from_cache=False)
        shutil.rmtree(staging, ignore_errors=True)
        return blocks
    return read_entry(publish(staging, entry, complete_marker=META_FILE), cache=str(entry), from_cache=False)


def _show_progress(progress: bool | None) -> bool:
    return sys.stderr.isatty() if progress is None else progress


def _write_entry(
    documents: Iterable[str],
    job: ChunkJob,
    *,
    num_proc: int,
    progress: EncodingProgress,
    stats: ReadStats,
    done: list[ChunkCounts],
) -> None:
    """Read, split, encode and pack the documents, chunk by chunk, into shard files in
    ``job.folder``; shift their ids into one numbering; ``meta.json`` last.

    ``stats`` is the reader's count of repaired lines (complete once ``documents`` is read);
    ``done`` receives each chunk's counts as it completes.

    Raises:
        ValueError: nothing to train on (the message says why: no text at all, or none on
            the training side).
    """
    read = tokens = 0  # of the chunks done

    def within_chunk(documents: int, chunk_tokens: int) -> None:
        progress.update(documents=read + documents, tokens=tokens + chunk_tokens)

    for counts in packed_chunks(document_chunks(documents), job, num_proc=num_proc, progress=within_chunk):
        done.append(counts)
        read, tokens = read + counts.documents_read, tokens + counts.text_tokens
        progress.update(documents=read, tokens=tokens)
    sides = {side: _merged([c.sides[side] for c in done]) for side in SIDES}
    empty = sum(c.empty_documents for c in done)
    if sides["train"].blocks == 0:
        raise ValueError(_no_training_text(read, empty, sides["validation"].documents))
    _place_ids(job.folder, done)
    meta = {
        "block_length": job.block_length, "empty_documents": empty, **asdict(_merged(list(sides.values()))),
        "invalid_utf8": stats.invalid_utf8, "first_invalid_utf8": stats.first_invalid,
        "phrases": job.phrases is not None, "shards": [[c.sides[side].blocks for side in SIDES] for c in done],
    }  # fmt: skip
    write_json(job.folder / META_FILE, meta)


def _place_ids(folder: Path, done: list[ChunkCounts]) -> None:
    """Number the blocks of all shards in order, training blocks first: each shard's ids,
    written from 0, move up by the blocks of the shards before it (a pass over the id columns only)."""
    from tokenmask.blocks.store import shift_ids  # pyarrow: not on the import path of `tokenmask --help`

    offset = 0
    for side in SIDES:
        for counts in done:
            if counts.sides[side].blocks:
                shift_ids(shard_path(folder, side, counts.index), offset)
            offset += counts.sides[side].blocks


def _no_training_text(read: int, empty: int, validation: int) -> str:
    """Why there is no training block: ``"... no text for training: 3 documents read, all empty or blank"``."""
    if read == 0:
        return "the corpus holds no text for training: no document at all (empty files, or only blank lines)"
    if validation == 0:
        return f"the corpus holds no text for training: {read:,} documents read, all empty, blank or without a token"
    which = "the only document" if validation == 1 else f"all {validation:,} documents"
    return (
        f"the corpus holds no text for training: {which} with text went to the validation side "
        "(give more documents, or a lower --validation-share)"
    )


def _merged(counts: list[PackingCounts]) -> PackingCounts:
    return PackingCounts(**{name: sum(getattr(c, name) for c in counts) for name in PackingCounts.__dataclass_fields__})


def held_out_lines(texts: Iterable[str], validation_share: float, count: int) -> list[str]:
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
