"""The pre-training corpus as fixed-length blocks on disk, with a deterministic train/validation split.

Documents are split by a hash of their text (so the split does not depend on their order or
number), encoded in batches and packed into blocks (:class:`tokenmask.blocks.pack.BlockPacker`)
in one streaming pass, written to Arrow files and read back memory-mapped
(:mod:`tokenmask.blocks.store`). Entries are cached by a key over the corpus, the tokenizer and
the settings (:mod:`tokenmask.blocks.cache`): the second call with the same key tokenizes nothing.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from collections.abc import Callable, Iterable, Sized
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: importing transformers would slow `tokenmask --help`
    from transformers import PreTrainedTokenizerBase

    from tokenmask.text.phrases import Phrases

from tokenmask.blocks.cache import (
    cache_key,
    default_cache_root,
    publish,
    staging_folder,
    texts_fingerprint,
    tokenizer_fingerprint,
)
from tokenmask.blocks.entry import META_FILE, PretrainBlocks, read_entry
from tokenmask.blocks.pack import BlockPacker, PackingCounts, batched, encode_documents, frame_ids
from tokenmask.blocks.pack import encode_chunk as _encode_chunk
from tokenmask.blocks.progress import EncodingProgress
from tokenmask.text.byte_checks import MAX_LINE_BYTES, ReadStats
from tokenmask.text.corpus import DocumentBoundary, expand_paths, fingerprint_sources, read_documents

_SIDES = ("train", "validation")


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
    cache_dir: str | Path | None = None,
    use_cache: bool = True,
    progress: bool | None = None,
    batch_size: int = 1000,
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
        phrases: PMI n-grams and terms to find; blocks then carry ``merged_word_ids`` and
            ``term_mask`` (:class:`~tokenmask.blocks.pack.Block`), and the cache key covers them.

    Raises:
        ValueError: bad settings, no text, or too little for training.
    """
    _check_settings(block_length, validation_share, batch_size)
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
        phrases=phrases,
    )


def corpus_blocks(
    paths: Iterable[str | Path],
    tokenizer: PreTrainedTokenizerBase,
    *,
    block_length: int,
    validation_share: float,
    boundary: DocumentBoundary = "paragraph",
    text_field: str = "text",
    split: str | None = None,
    strict: bool = False,
    max_line_bytes: int = MAX_LINE_BYTES,
    cache_dir: str | Path | None = None,
    use_cache: bool = True,
    progress: bool | None = None,
    batch_size: int = 1000,
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
        boundary / text_field / split / strict / max_line_bytes: how documents are read
            (:func:`tokenmask.text.corpus.read_documents`); ``boundary`` defaults to
            ``"paragraph"`` (a document per paragraph of text files).
        Others: as in :func:`build_blocks`.

    Raises:
        FileNotFoundError: a path matches nothing.
        ValueError: bad settings, a source that cannot be read (see ``read_documents``), no text.
    """
    _check_settings(block_length, validation_share, batch_size)
    sources = expand_paths(paths)
    key = None
    if use_cache:
        source = {"files": fingerprint_sources(sources), "boundary": boundary, "text_field": text_field, "split": split,
                  "strict": strict, "max_line_bytes": max_line_bytes}  # fmt: skip
        key = cache_key(_key_settings(source, tokenizer, block_length, validation_share, phrases))
    stats = ReadStats()
    reading = dict(boundary=boundary, text_field=text_field, split=split, strict=strict, max_line_bytes=max_line_bytes)
    return _cached_or_built(
        lambda: read_documents(sources, **reading, stats=stats), tokenizer,  # type: ignore[arg-type]  # the keywords above
        key=key, root=_root(cache_dir), block_length=block_length, validation_share=validation_share,
        progress=progress, total=None, batch_size=batch_size, stats=stats, phrases=phrases,
    )  # fmt: skip


def _check_settings(block_length: int, validation_share: float, batch_size: int) -> None:
    if block_length < 2:
        raise ValueError(f"block_length must be at least 2; got {block_length}")
    if not 0.0 <= validation_share < 1.0:
        raise ValueError(f"validation_share must be in [0, 1); got {validation_share}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1; got {batch_size}")


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
    stats: ReadStats | None = None,
    phrases: Phrases | None = None,
) -> PretrainBlocks:
    """Load the entry ``key`` when it exists; else build it (in a staging folder) and publish it.

    Without a key, build in a temporary folder, map the files and delete the folder (on
    POSIX the mapped files live on until the blocks are freed).
    """
    entry = root / "blocks" / key if key is not None else None
    if entry is not None and (entry / META_FILE).is_file():
        return read_entry(entry, cache=str(entry), from_cache=True)
    staging = staging_folder(entry.parent if entry is not None else None)
    try:
        with EncodingProgress(enabled=_show_progress(progress), total=total) as bar:
            _write_entry(
                documents(),
                tokenizer,
                staging,
                block_length=block_length,
                validation_share=validation_share,
                batch_size=batch_size,
                progress=bar,
                stats=stats or ReadStats(),
                phrases=phrases,
            )
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
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
    tokenizer: PreTrainedTokenizerBase,
    folder: Path,
    *,
    block_length: int,
    validation_share: float,
    batch_size: int,
    progress: EncodingProgress,
    stats: ReadStats,
    phrases: Phrases | None = None,
) -> None:
    """One pass: read, split, encode and pack the documents into ``folder``; ``meta.json`` last.

    ``stats`` is the reader's count of repaired lines (complete once ``documents`` is read).

    Raises:
        ValueError: nothing to train on (the message says why: no text at all, or none on
            the training side).
    """
    from tokenmask.blocks.store import BlockWriter  # pyarrow: not on the import path of `tokenmask --help`

    start, separator = frame_ids(tokenizer)
    with_phrases = phrases is not None
    packers = {
        side: BlockPacker(block_length=block_length, start=start, separator=separator, phrases=with_phrases) for side in _SIDES
    }
    read = empty = 0
    with (
        BlockWriter(folder / "train.arrow", phrases=with_phrases) as train,
        BlockWriter(folder / "validation.part", phrases=with_phrases) as validation,
    ):
        writers = {"train": train, "validation": validation}
        for chunk in batched(documents, batch_size):
            texts = [text for text in chunk if text.strip()]
            read, empty = read + len(chunk), empty + len(chunk) - len(texts)
            sides = ["validation" if is_validation(text, validation_share) else "train" for text in texts]
            for side, (ids, word_ids, columns) in zip(sides, _encoded(texts, tokenizer, phrases)):
                writers[side].write(packers[side].add(ids, word_ids, columns))
            progress.update(documents=read, tokens=sum(p.counts.text_tokens for p in packers.values()))
        for side in _SIDES:
            writers[side].write(packers[side].finish())
    if packers["train"].counts.blocks == 0:
        raise ValueError(_no_training_text(read, empty, packers["validation"].counts.documents))
    _offset_ids(folder / "validation.part", folder / "validation.arrow", packers["train"].counts.blocks, with_phrases)
    meta = {
        "block_length": block_length, "empty_documents": empty, **_merged(packers),
        "invalid_utf8": stats.invalid_utf8, "first_invalid_utf8": stats.first_invalid,
    }  # fmt: skip
    (folder / META_FILE).write_text(json.dumps(meta, indent=2), encoding="utf-8")


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


def _encoded(texts: list[str], tokenizer: PreTrainedTokenizerBase, phrases: Phrases | None) -> list[tuple[Any, Any, Any]]:
    """Each document's ``(ids, word ids, phrase columns or None)``; plain blocks go through
    :func:`encode_documents` (looked up here, so tests may count its calls)."""
    if phrases is None:
        return [(ids, word_ids, None) for ids, word_ids in encode_documents(texts, tokenizer)]
    return _encode_chunk(texts, tokenizer, phrases)


def _offset_ids(part: Path, path: Path, offset: int, phrases: bool) -> None:
    """Copy the validation blocks with ids after the training ones (known only at the end)."""
    from tokenmask.blocks.store import BlockWriter, read_blocks

    with BlockWriter(path, ids_offset=offset, phrases=phrases) as writer:
        writer.write(read_blocks(part))
    part.unlink()


def _merged(packers: dict[str, BlockPacker]) -> dict[str, int]:
    counts = [p.counts for p in packers.values()]
    return {name: sum(getattr(c, name) for c in counts) for name in PackingCounts.__dataclass_fields__}


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
