"""Packing texts into fixed-length blocks, as pre-training wants: no padding, word ids kept.

``[CLS] doc1 [SEP] doc2 [SEP] …`` (or the tokenizer's own ``<s> … </s>``): documents are joined
with the separator and cut at the block length; a document that does not fit continues in
the next block. Word ids are renumbered per block so that two documents never share one.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: importing transformers would slow `tokenmask --help`
    from transformers import PreTrainedTokenizerBase


def _frame_ids(tokenizer: PreTrainedTokenizerBase) -> tuple[int | None, int | None]:
    start = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
    separator = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
    return start, separator


def pack_texts(
    texts: Iterable[str],
    tokenizer: PreTrainedTokenizerBase,
    *,
    block_length: int,
    batch_size: int = 256,
) -> Iterator[dict[str, Any]]:
    """Yield blocks ``{"input_ids", "word_ids", "id"}`` of exactly ``block_length`` tokens.

    The last, partial block is yielded too (shorter). Ids count blocks from 0.

    Raises:
        ValueError: ``block_length`` too small to hold the framing tokens and one token.
    """
    start, separator = _frame_ids(tokenizer)
    frame = (start is not None) + (separator is not None)
    if block_length < frame + 1:
        raise ValueError(f"block_length must be at least {frame + 1}; got {block_length}")
    ids: list[int] = [] if start is None else [start]
    words: list[int] = [] if start is None else [-1]
    next_word, block_id = 0, 0

    def encoded(chunk: list[str]) -> Iterator[tuple[list[int], list[int | None]]]:
        encoding = tokenizer(chunk, add_special_tokens=False)
        for row, row_ids in enumerate(encoding["input_ids"]):
            yield row_ids, encoding.word_ids(row)

    def chunks() -> Iterator[list[str]]:
        chunk: list[str] = []
        for text in texts:
            chunk.append(text)
            if len(chunk) == batch_size:
                yield chunk
                chunk = []
        if chunk:
            yield chunk

    for chunk in chunks():
        for doc_ids, doc_words in encoded(chunk):
            if not doc_ids:
                continue
            doc_word_ids = [next_word + (w if w is not None else 0) for w in doc_words]
            next_word = max(doc_word_ids) + 1
            tokens = doc_ids + ([] if separator is None else [separator])
            token_words = doc_word_ids + ([] if separator is None else [-1])
            for token, word in zip(tokens, token_words):
                ids.append(token)
                words.append(word)
                if len(ids) == block_length:
                    yield {"input_ids": ids, "word_ids": words, "id": block_id}
                    block_id += 1
                    ids = [] if start is None else [start]
                    words = [] if start is None else [-1]
    if len(ids) > (start is not None):
        yield {"input_ids": ids, "word_ids": words, "id": block_id}
