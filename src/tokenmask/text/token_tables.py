"""Masking tables from a Hugging Face tokenizer: protected ids, replaceable ids, word starts.

The only bridge between tokenizer objects and :mod:`tokenmask.masking`, which sees arrays.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

import numpy as np
from transformers import PreTrainedTokenizerBase

from tokenmask.masking import VocabTables

# Placeholder entries reserved in a vocabulary (BERT's [unused0]..[unused993], <unused12>…):
# never real text, so never drawn as random replacements.
_PLACEHOLDER = re.compile(r"^(\[unused\d+\]|<unused\d+>)$")


def require_mask_token(tokenizer: PreTrainedTokenizerBase) -> int:
    """The tokenizer's mask token id; ``ValueError`` when it has none."""
    if tokenizer.mask_token is None or tokenizer.mask_token_id is None:
        name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
        raise ValueError(
            f"the tokenizer {name} has no mask token; masked-language "
            "modelling needs one (add it with tokenizer.add_special_tokens({'mask_token': '[MASK]'}))"
        )
    return int(tokenizer.mask_token_id)


def protected_token_ids(tokenizer: PreTrainedTokenizerBase, extra: Iterable[int] = ()) -> list[int]:
    """All special ids: named specials, added special tokens, padding, and ``extra``."""
    ids = set(tokenizer.all_special_ids)
    for token_id, added in tokenizer.added_tokens_decoder.items():
        if added.special:
            ids.add(int(token_id))
    if tokenizer.pad_token_id is not None:
        ids.add(int(tokenizer.pad_token_id))
    ids.update(int(i) for i in extra)
    return sorted(ids)


def tables_from_tokenizer(
    tokenizer: PreTrainedTokenizerBase,
    *,
    protected_ids: Iterable[int] = (),
    replace_counts: np.ndarray | None = None,
) -> VocabTables:
    """Build the masking lookup tables of a tokenizer.

    Args:
        tokenizer: any Hugging Face tokenizer with a mask token.
        protected_ids: further ids never to select (and never to draw).
        replace_counts: ``(len(tokenizer),)`` unigram counts for frequency-weighted random
            replacements; None draws uniformly.

    Raises:
        ValueError: no mask token.
    """
    mask_id = require_mask_token(tokenizer)
    size = len(tokenizer)
    vocab = tokenizer.get_vocab()
    placeholders = [i for token, i in vocab.items() if _PLACEHOLDER.match(token) and i < size]
    return VocabTables.from_ids(
        size,
        mask_token_id=mask_id,
        protected_ids=protected_token_ids(tokenizer, protected_ids),
        excluded_from_replacement=placeholders,
        replace_counts=replace_counts,
    )


def cached_tables(tokenizer: PreTrainedTokenizerBase) -> VocabTables:
    """:func:`tables_from_tokenizer` with default settings, built once per tokenizer."""
    return _cached_tables(tokenizer, len(tokenizer))


@functools.lru_cache(maxsize=8)
def _cached_tables(tokenizer: PreTrainedTokenizerBase, size: int) -> VocabTables:
    return tables_from_tokenizer(tokenizer)


def word_start_table(tokenizer: PreTrainedTokenizerBase) -> np.ndarray:
    """For every id, whether the token starts a word; ``(V,)`` bool.

    Used only when examples come without word ids. Read from the tokenizer's own decoder,
    not from spellings: a token starts a word when decoding it after a reference word puts
    white space between the two. This holds for WordPiece (``##`` pieces join), byte-level
    BPE (``Ġ`` means a space) and SentencePiece (``▁``) alike. Punctuation glued to a word in
    the text (``world,``) counts as part of it here, unlike ``word_ids()``.

    Raises:
        ValueError: the tokenizer is not a fast (Rust) tokenizer.
    """
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(
            "whole-word, span and n-gram masking need word ids: pass 'word_ids' in each example "
            "(from a fast tokenizer's encoding.word_ids()) or use a fast tokenizer"
        )
    return _word_start_table(tokenizer, len(tokenizer))


@functools.lru_cache(maxsize=8)
def _word_start_table(tokenizer: PreTrainedTokenizerBase, size: int) -> np.ndarray:
    reference = tokenizer("a", add_special_tokens=False)["input_ids"][:1] or [0]
    prefix = tokenizer.decode(reference, clean_up_tokenization_spaces=False)
    texts = tokenizer.batch_decode([reference + [i] for i in range(size)], clean_up_tokenization_spaces=False)
    starts = np.fromiter((text[len(prefix) : len(prefix) + 1].isspace() for text in texts), dtype=bool, count=size)
    starts.flags.writeable = False  # shared through the cache
    return starts


def word_ids_from_decoder(tokenizer: PreTrainedTokenizerBase, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
    """``(B, T)`` word ids for examples that carry none, from :func:`word_start_table`.

    Words are numbered along each row; padding gets -1 (special tokens get numbers too, but
    they are never eligible, so they never join a unit). An id the tokenizer does not know is
    a word of its own.
    """
    real = attention_mask.astype(bool)
    table = word_start_table(tokenizer)
    if input_ids.size and input_ids.max() >= table.size:
        table = np.append(table, True)  # what every unknown id is clipped to
    starts = table.take(input_ids, mode="clip") & real
    starts[:, 0] = real[:, 0]  # a row may begin inside a word: that piece still opens a unit
    return np.where(real, np.cumsum(starts, axis=1) - 1, -1)
