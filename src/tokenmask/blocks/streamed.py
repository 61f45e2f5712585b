"""Blocks packed on the fly from a document stream, a chunk at a time (``--streaming``).

The stream is cut into *chunks* of whole documents, about ``chunk_characters`` of text each,
and each chunk is packed on its own (:func:`~tokenmask.blocks.pack.pack_texts`): its blocks
depend on its documents only. So chunks can be packed by any number of worker processes, and a
run resumes at a chunk after reading (not tokenizing) the documents before it. Unlike the block
cache (:mod:`tokenmask.blocks.build`) there is no pre-pass: the first blocks come as soon as the
first chunk is read. Each chunk ends in a shorter block, as each side of the cache does.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tokenmask.blocks.pack import Block, pack_texts
from tokenmask.blocks.shard import is_validation

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from tokenmask.text.phrases import Phrases
    from tokenmask.text.streaming import DocumentStream

CHUNK_ID_STRIDE = 1 << 32
"""A block's id is ``chunk uid * CHUNK_ID_STRIDE + its number in the chunk``: unique in a run."""
HELD_OUT_IDS = 1 << 62
"""Ids of evaluation blocks start here, apart from every training block's."""
MAX_HELD_OUT_READ = 200_000
"""Documents read at most from the stream's start to find validation documents."""


@dataclass(frozen=True)
class StreamChunk:
    """Documents of one chunk of a rank's stream: the ``index``-th chunk of ``epoch``, starting
    at the stream's document ``first_document`` (counting blank and held-out ones too)."""

    epoch: int
    index: int
    first_document: int
    texts: list[str] = field(repr=False)
    """The chunk's training documents: non-blank and not held out."""


def stream_chunks(
    stream: DocumentStream,
    *,
    characters: int,
    validation_share: float | None,
    epoch: int = 0,
    index: int = 0,
    first_document: int = 0,
) -> Iterator[StreamChunk]:
    """The chunks of ``stream``, epoch after epoch, forever, from chunk ``index`` of ``epoch``
    (which starts at document ``first_document``: the ones before are read and passed over).

    A chunk closes after the document that brings its text to ``characters`` or more, and at
    the end of an epoch. Documents are held out for validation by a hash of their text
    (:func:`~tokenmask.blocks.shard.is_validation`) when ``validation_share`` is given.

    Raises:
        ValueError: a whole epoch of the stream holds no training text.
    """
    while True:
        texts: list[str] = []
        size, number = 0, first_document
        for text in stream.documents(skip=first_document):
            number += 1
            if text.strip() and not (validation_share and is_validation(text, validation_share)):
                texts.append(text)
                size += len(text)
            if size >= characters:
                yield StreamChunk(epoch, index, first_document, texts)
                texts, size, index, first_document = [], 0, index + 1, number
        if texts:
            yield StreamChunk(epoch, index, first_document, texts)
        elif index == 0:  # no chunk at all in this epoch (a chunk closes only once it holds text)
            raise ValueError(
                "the corpus holds no text for training: every document read is blank"
                + (" or held out for validation (lower --validation-share, or give --eval-corpus)" if validation_share else "")
            )
        epoch, index, first_document = epoch + 1, 0, 0


def chunk_blocks(
    chunk: StreamChunk,
    tokenizer: PreTrainedTokenizerBase,
    *,
    block_length: int,
    uid: int,
    phrases: Phrases | None = None,
) -> list[Block]:
    """The blocks of ``chunk``, with ids ``uid * CHUNK_ID_STRIDE + 0, 1, ...``.

    ``uid`` must be unique in the run whatever the epoch (the masks of an epoch come from the
    ids): e.g. ``chunk.index * world + rank``.
    """
    blocks = list(pack_texts(chunk.texts, tokenizer, block_length=block_length, phrases=phrases))
    for block in blocks:
        block["id"] += uid * CHUNK_ID_STRIDE
    return blocks


def held_out_blocks(
    stream: DocumentStream,
    tokenizer: PreTrainedTokenizerBase,
    *,
    block_length: int,
    count: int,
    validation_share: float | None,
    phrases: Phrases | None = None,
) -> list[Block]:
    """The first ``count`` blocks of the documents at the stream's start that are held out for
    validation (all non-blank ones with ``validation_share=None``, as for an evaluation corpus).

    Reads at most :data:`MAX_HELD_OUT_READ` documents. Ids start at :data:`HELD_OUT_IDS`.

    Raises:
        ValueError: none of the documents read is held out.
    """
    texts: list[str] = []
    size, needed, read = 0, count * block_length * 8, 0  # ~4 characters a token, twice over
    for text in stream.documents():
        if read == MAX_HELD_OUT_READ or size >= needed:
            break
        read += 1
        if text.strip() and (validation_share is None or is_validation(text, validation_share)):
            texts.append(text)
            size += len(text)
    blocks = list(pack_texts(texts, tokenizer, block_length=block_length, phrases=phrases))[:count]
    if not blocks and validation_share is None:
        raise ValueError("the evaluation corpus holds no text")
    if not blocks:
        raise ValueError(
            f"no document held out for validation among the first {read:,} of the stream: "
            "raise --validation-share or give --eval-corpus"
        )
    for block in blocks:
        block["id"] += HELD_OUT_IDS
    return blocks
