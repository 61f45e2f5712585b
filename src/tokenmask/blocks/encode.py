"""Texts to examples: token ids plus word ids from the fast tokenizer, ready for a collator."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TypedDict

from transformers import PreTrainedTokenizerBase

from tokenmask.blocks.pack import batched
from tokenmask.text.phrases import Phrases, encode_with_phrases


class _Tokens(TypedDict):
    input_ids: list[int]
    """Token ids, special tokens included."""
    id: int
    """A stable example id: its masks are keyed on it."""


class EncodedExample(_Tokens, total=False):
    """A text encoded for a collator: ``input_ids`` and ``id`` always, ``word_ids`` from a fast tokenizer."""

    word_ids: list[int]
    """Word index per token, -1 on special tokens."""
    merged_word_ids: list[int]
    """With phrases: word ids with each phrase (PMI n-gram, term) merged into one word."""
    term_mask: list[int]
    """With phrases: 1 on tokens inside a term occurrence."""


def encode_texts(
    texts: Sequence[str],
    tokenizer: PreTrainedTokenizerBase,
    *,
    max_length: int | None = None,
    first_id: int = 0,
    phrases: Phrases | None = None,
) -> list[EncodedExample]:
    """Encode texts into collator examples: ``input_ids``, ``word_ids`` (-1 on special tokens)
    and ``id`` (``first_id``, ``first_id + 1``, … so masks are stable).

    Word ids come from the fast tokenizer's ``word_ids()``; with a slow tokenizer the
    examples carry none and word-based strategies fall back to the collator's table. With
    ``phrases`` (a fast tokenizer), examples also carry ``merged_word_ids`` and ``term_mask``.
    """
    if phrases is not None:
        return _encode_phrased(texts, tokenizer, phrases, max_length=max_length, first_id=first_id)
    encoding = tokenizer(
        list(texts),
        truncation=max_length is not None,
        max_length=max_length,
        add_special_tokens=True,
    )
    examples = []
    for row, ids in enumerate(encoding["input_ids"]):
        example: EncodedExample = {"input_ids": ids, "id": first_id + row}
        if getattr(tokenizer, "is_fast", False):
            example["word_ids"] = [-1 if w is None else w for w in encoding.word_ids(row)]
        examples.append(example)
    return examples


def _encode_phrased(
    texts: Sequence[str], tokenizer: PreTrainedTokenizerBase, phrases: Phrases, *, max_length: int | None, first_id: int
) -> list[EncodedExample]:
    """:func:`encode_texts` with phrases, found in what is kept of each text."""
    encoded = encode_with_phrases(list(texts), tokenizer, phrases, add_special_tokens=True, max_length=max_length)
    examples = []
    for row, (ids, word_ids, columns) in enumerate(encoded):
        example: EncodedExample = {
            "input_ids": ids,
            "id": first_id + row,
            "word_ids": [-1 if w is None else w for w in word_ids],
            "merged_word_ids": columns.merged_word_ids,
            "term_mask": columns.term_mask,
        }
        examples.append(example)
    return examples


def encode_lazily(
    texts: Iterable[str],
    tokenizer: PreTrainedTokenizerBase,
    *,
    max_length: int | None = None,
    batch_size: int = 256,
    phrases: Phrases | None = None,
) -> Iterator[EncodedExample]:
    """:func:`encode_texts` over a stream, ``batch_size`` texts at a time; ids count from 0."""
    first_id = 0
    for chunk in batched(texts, batch_size):
        yield from encode_texts(chunk, tokenizer, max_length=max_length, first_id=first_id, phrases=phrases)
        first_id += len(chunk)
