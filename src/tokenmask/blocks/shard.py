"""One chunk of a corpus packed on its own into shard files: the unit of parallel encoding.

The document stream is cut into chunks of about :data:`CHUNK_CHARACTERS` characters (whole
documents; a cut that depends on the documents only), and each chunk is split by hash,
encoded and packed by packers of its own into ``train-K.arrow`` and ``validation-K.arrow``,
with block ids from 0. So the blocks are the same whether one process packs the chunks in turn
or many pack them at once (:mod:`tokenmask.blocks.workers`); :mod:`tokenmask.blocks.build`
shifts the ids into place once every chunk is counted. A chunk's last block on each side may
be shorter, as the corpus's last block always could.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokenmask.blocks.pack import BlockPacker, PackingCounts, batched, encode_documents, frame_ids

if TYPE_CHECKING:  # annotations only: importing transformers would slow `tokenmask --help`
    from transformers import PreTrainedTokenizerBase

    from tokenmask.text.phrases import Phrases

SIDES = ("train", "validation")

CHUNK_CHARACTERS = 8 * 2**20
"""Characters of text a chunk holds at least (its last document crosses the line), about 2M
tokens. Large enough that the bundled plays (4.4M characters) are one chunk and the blocks a
chunk boundary leaves shorter are a few in 10,000; small enough that ``2 × processes`` chunks
in flight stay a small part of memory. The blocks depend on it: :data:`tokenmask.blocks.cache.FORMAT_VERSION`
changes with it."""


def is_validation(text: str, share: float) -> bool:
    """Deterministic document-level split: a hash of the text below ``share``."""
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little") / 2**64 < share


def document_chunks(documents: Iterable[str]) -> Iterator[list[str]]:
    """Consecutive lists of whole documents, each closed by the document that brings it to
    :data:`CHUNK_CHARACTERS` characters or more (the last may hold fewer); streamed.

    With a chunk size of 10: ``["abcdef", "ghij", "kl", "m"] -> ["abcdef", "ghij"], ["kl", "m"]``.
    """
    size = CHUNK_CHARACTERS  # read at each call, so a test can make chunks small
    chunk: list[str] = []
    characters = 0
    for text in documents:
        chunk.append(text)
        characters += len(text)
        if characters >= size:
            yield chunk
            chunk, characters = [], 0
    if chunk:
        yield chunk


def shard_path(folder: Path, side: str, index: int) -> Path:
    """Where chunk ``index`` keeps the blocks of ``side``: ``folder/train-00003.arrow``."""
    return folder / f"{side}-{index:05d}.arrow"


@dataclass(frozen=True)
class ChunkJob:
    """What packing a chunk needs besides its texts: sent once to each worker process."""

    folder: Path
    """Where the shard files go (the entry's staging folder)."""
    tokenizer: PreTrainedTokenizerBase
    phrases: Phrases | None
    block_length: int
    validation_share: float
    batch_size: int
    """Texts encoded per tokenizer call."""


@dataclass
class ChunkCounts:
    """What one chunk held and became: its packers' counts, by side, and what was read."""

    index: int
    documents_read: int = 0
    empty_documents: int = 0
    """Documents that were empty or white space only: skipped."""
    characters: int = 0
    bytes_written: int = 0
    """Size of the chunk's shard files."""
    sides: dict[str, PackingCounts] = field(default_factory=lambda: {side: PackingCounts() for side in SIDES})

    @property
    def text_tokens(self) -> int:
        return sum(counts.text_tokens for counts in self.sides.values())


def pack_chunk(job: ChunkJob, index: int, texts: list[str], *, progress: Callable[[int, int], None] | None = None) -> ChunkCounts:
    """Split, encode and pack chunk ``index`` into its two shard files (a side without blocks
    leaves no file); ids count each side's blocks from 0.

    ``progress(documents, tokens)`` is called after each encoded batch with the chunk's totals.
    """
    from tokenmask.blocks.store import BlockWriter  # pyarrow: not on the import path of `tokenmask --help`

    start, separator = frame_ids(job.tokenizer)
    with_phrases = job.phrases is not None
    packers = {
        side: BlockPacker(block_length=job.block_length, start=start, separator=separator, phrases=with_phrases) for side in SIDES
    }
    counts = ChunkCounts(index, characters=sum(map(len, texts)), sides={side: packers[side].counts for side in SIDES})
    paths = {side: shard_path(job.folder, side, index) for side in SIDES}
    writers = {
        side: BlockWriter(paths[side], phrases=with_phrases, vocab_size=len(job.tokenizer), block_length=job.block_length)
        for side in SIDES
    }  # the narrowest column types the vocabulary and the block length allow
    with writers["train"], writers["validation"]:
        for batch in batched(texts, job.batch_size):
            kept = [text for text in batch if text.strip()]
            counts.documents_read += len(batch)
            counts.empty_documents += len(batch) - len(kept)
            sides = ["validation" if is_validation(text, job.validation_share) else "train" for text in kept]
            for side, (ids, word_ids, columns) in zip(sides, encoded(kept, job.tokenizer, job.phrases)):
                writers[side].write(packers[side].add(ids, word_ids, columns))
            if progress is not None:
                progress(counts.documents_read, counts.text_tokens)
        for side in SIDES:
            writers[side].write(packers[side].finish())
    for side in SIDES:
        if packers[side].counts.blocks == 0:
            paths[side].unlink()
        else:
            counts.bytes_written += paths[side].stat().st_size
    return counts


def encoded(texts: list[str], tokenizer: PreTrainedTokenizerBase, phrases: Phrases | None) -> list[tuple[Any, Any, Any]]:
    """Each document's ``(ids, word ids, phrase columns or None)``; plain blocks go through
    :func:`encode_documents` (looked up here, so tests may count its calls)."""
    if phrases is None:
        return [(ids, word_ids, None) for ids, word_ids in encode_documents(texts, tokenizer)]
    from tokenmask.blocks.pack import encode_chunk

    return encode_chunk(texts, tokenizer, phrases)
