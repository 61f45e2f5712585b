"""Packing documents into fixed-length blocks, as pre-training wants: no padding, word ids kept.

``[CLS] doc1 [SEP] doc2 [SEP] …`` (or the tokenizer's own ``<s> … </s>``): documents are joined
with the separator and cut at the block length; a document that does not fit continues in
the next block. Word ids are renumbered per block (from 0) so that two documents never share
one. :class:`BlockPacker` takes encoded documents one at a time and counts every token;
:func:`pack_texts` runs it over a stream of texts.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:  # annotations only: importing transformers would slow `tokenmask --help`
    from transformers import PreTrainedTokenizerBase

    from tokenmask.text.phrases import PhraseColumns, Phrases


class _BlockTokens(TypedDict):
    input_ids: list[int]
    """Exactly ``block_length`` token ids (the last block of a corpus may be shorter)."""
    word_ids: list[int]
    """Word index per token, from 0 in each block; -1 on frame (start and separator) tokens."""
    id: int
    """The block's number (0, 1, …): its masks are keyed on it."""


class Block(_BlockTokens, total=False):
    """A packed pre-training block, as the collators and the block store take it.

    Blocks packed with phrases (PMI n-grams, terms: :mod:`tokenmask.text.phrases`) also carry
    ``merged_word_ids`` and ``term_mask``.
    """

    merged_word_ids: list[int]
    """Word ids with each phrase merged into one word, numbered like ``word_ids``."""
    term_mask: list[int]
    """1 on tokens inside a term occurrence."""


def frame_ids(tokenizer: PreTrainedTokenizerBase) -> tuple[int | None, int | None]:
    """``(start, separator)``: the ids that open a block and close a document (either may be None)."""
    start = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
    separator = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
    return start, separator


def encode_documents(texts: list[str], tokenizer: PreTrainedTokenizerBase) -> list[tuple[list[int], list[int | None]]]:
    """One batch of texts to ``(ids, word ids)`` pairs, without special tokens.

    A fast tokenizer encodes the batch in parallel (Rust threads, unless
    ``TOKENIZERS_PARALLELISM=false``).
    """
    if not texts:
        return []
    encoding = tokenizer(texts, add_special_tokens=False, verbose=False)
    return [(ids, encoding.word_ids(row)) for row, ids in enumerate(encoding["input_ids"])]


@dataclass
class PackingCounts:
    """Running counts of a packer: what went in, what came out."""

    documents: int = 0
    """Documents packed (with at least one token)."""
    tokenless_documents: int = 0
    """Documents that the tokenizer turned into no token at all: nothing to pack."""
    text_tokens: int = 0
    """Tokens the tokenizer produced for the documents."""
    frame_tokens: int = 0
    """Start and separator tokens the packer added."""
    blocks: int = 0
    block_tokens: int = 0
    """Tokens in the blocks: text tokens kept plus frame tokens."""


class BlockPacker:
    """Packs encoded documents into blocks of ``block_length`` tokens, one document at a time.

    ``add`` returns the blocks a document completed; ``finish`` the last, shorter one. Blocks
    are ``{"input_ids", "word_ids", "id"}`` (ids count blocks from 0; word id -1 on frame tokens).

    With ``start=1, separator=2, block_length=5``: ``add([7, 8], [0, 1])`` -> ``[]``;
    ``add([9, 6], [0, 0])`` (one word, two pieces) ->
    ``[{"input_ids": [1, 7, 8, 2, 9], "word_ids": [-1, 0, 1, -1, 2], "id": 0}]``;
    ``finish()`` -> ``[{"input_ids": [1, 6, 2], "word_ids": [-1, 0, -1], "id": 1}]``.

    With ``phrases=True`` every ``add`` brings the document's
    :class:`~tokenmask.text.phrases.PhraseColumns`, and blocks carry them too.

    Raises:
        ValueError: ``block_length`` too small to hold the frame tokens and one token.
    """

    def __init__(self, *, block_length: int, start: int | None, separator: int | None, phrases: bool = False) -> None:
        frame = (start is not None) + (separator is not None)
        if block_length < frame + 1:
            raise ValueError(f"block_length must be at least {frame + 1}; got {block_length}")
        self.block_length = block_length
        self.start, self.separator = start, separator
        self.phrases = phrases
        self.counts = PackingCounts()
        self._next_word = 0
        self._open()

    def _open(self) -> None:
        self._ids: list[int] = [] if self.start is None else [self.start]
        self._words: list[int] = [] if self.start is None else [-1]
        self._merged: list[int] = list(self._words)
        self._terms: list[int] = [0] * len(self._words)

    def add(self, ids: list[int], word_ids: list[int | None], phrases: PhraseColumns | None = None) -> list[Block]:
        """Append one document; return the blocks it completed (often none)."""
        if not ids:
            self.counts.tokenless_documents += 1
            return []
        if self.phrases != (phrases is not None):
            raise ValueError("a packer made with phrases=True takes phrase columns with every document, and only then")
        words = [self._next_word + (w if w is not None else 0) for w in word_ids]
        merged = words if phrases is None else [self._next_word + max(w, 0) for w in phrases.merged_word_ids]
        terms = [0] * len(ids) if phrases is None else list(phrases.term_mask)
        self._next_word = max(words) + 1
        self.counts.documents += 1
        self.counts.text_tokens += len(ids)
        if self.separator is not None:
            ids, words, merged, terms = ids + [self.separator], words + [-1], merged + [-1], terms + [0]
            self.counts.frame_tokens += 1
        done, position = [], 0
        while position < len(ids):
            room = self.block_length - len(self._ids)
            self._ids.extend(ids[position : position + room])
            self._words.extend(words[position : position + room])
            self._merged.extend(merged[position : position + room])
            self._terms.extend(terms[position : position + room])
            position += room
            if len(self._ids) == self.block_length:
                done.append(self._close())
        return done

    def finish(self) -> list[Block]:
        """The last block, if it holds more than its start token; the packer is then empty."""
        if len(self._ids) > (self.start is not None):
            return [self._close()]
        return []

    def _close(self) -> Block:
        base = next((w for w in self._words if w >= 0), 0)
        block: Block = {
            "input_ids": self._ids,
            "word_ids": [w - base if w >= 0 else -1 for w in self._words],
            "id": self.counts.blocks,
        }
        if self.phrases:  # numbered like the word ids; a phrase begun in the previous block merges from the first word
            block["merged_word_ids"] = [max(m, base) - base if w >= 0 else -1 for w, m in zip(self._words, self._merged)]
            block["term_mask"] = self._terms
        self.counts.blocks += 1
        self.counts.block_tokens += len(self._ids)
        self.counts.frame_tokens += self.start is not None
        self._open()
        return block


def pack_texts(
    texts: Iterable[str],
    tokenizer: PreTrainedTokenizerBase,
    *,
    block_length: int,
    batch_size: int = 256,
    phrases: Phrases | None = None,
) -> Iterator[Block]:
    """Yield blocks ``{"input_ids", "word_ids", "id"}`` (:class:`Block`) of exactly ``block_length`` tokens.

    Texts are encoded ``batch_size`` at a time. The last, partial block is yielded too
    (shorter). Ids count blocks from 0. With ``phrases``, blocks carry ``merged_word_ids`` and
    ``term_mask`` too.

    Raises:
        ValueError: ``block_length`` too small to hold the framing tokens and one token.
    """
    start, separator = frame_ids(tokenizer)
    packer = BlockPacker(block_length=block_length, start=start, separator=separator, phrases=phrases is not None)
    for chunk in batched(texts, batch_size):
        for ids, word_ids, columns in encode_chunk(chunk, tokenizer, phrases):
            yield from packer.add(ids, word_ids, columns)
    yield from packer.finish()


def encode_chunk(
    texts: list[str], tokenizer: PreTrainedTokenizerBase, phrases: Phrases | None
) -> list[tuple[list[int], list[int | None], PhraseColumns | None]]:
    """:func:`encode_documents`, with each document's phrase columns when ``phrases`` are given (else None)."""
    if phrases is None:
        return [(ids, word_ids, None) for ids, word_ids in encode_documents(texts, tokenizer)]
    from tokenmask.text.phrases import encode_with_phrases

    return list(encode_with_phrases(texts, tokenizer, phrases))


def batched(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    """Lists of ``size`` items (the last may be shorter): ``batched(range(5), 2) -> [0, 1], [2, 3], [4]``.

    The project's one batching helper, for any iterable (streams included): Python 3.12's
    ``itertools.batched`` gives tuples and is not in 3.10.
    """
    chunk: list[Any] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
