"""Phrases in text: PMI n-grams and listed terms, found over the tokenizer's words, longest first.

Words are the fast tokenizer's (``word_ids()``), keyed by their lower-cased text (cut from the
text by the offsets), so a phrase is found on word boundaries and whatever its case, with any
tokenizer (WordPiece, byte-level BPE, SentencePiece). :class:`Phrases` finds them in linear
time; :func:`encode_with_phrases` gives each document the merged word ids and the term mask
that masking reads (:func:`tokenmask.masking.units.merge_words`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from tokenmask.masking.units import merge_words

if TYPE_CHECKING:  # annotations only: importing transformers would slow `tokenmask --help`
    from transformers import PreTrainedTokenizerBase

Words = tuple[str, ...]


class PhraseColumns(NamedTuple):
    """What one encoded document carries for phrase masking, one value per token."""

    merged_word_ids: list[int]
    """Word ids with each phrase's words merged into its first word's id; -1 on special tokens."""
    term_mask: list[int]
    """1 on tokens inside a term occurrence, else 0."""


_EDGE_PUNCTUATION = re.compile(r"^\W+|\W+$")


def document_words(text: str, offsets: Sequence[tuple[int, int]], word_ids: Sequence[int | None]) -> list[str]:
    """The key of each word, by word index: its text cut from ``text`` by the token offsets,
    lower-cased, without punctuation at its ends (a word of punctuation only is kept as it is).

    ``document_words("New York", [(0, 3), (4, 8)], [0, 1])  ->  ["new", "york"]``; the pieces
    of one word (``[(0, 2), (2, 4)]``, ``[0, 0]`` on ``"Asp."``) give one key (``"asp"``). The
    ends are cut because tokenizers split on whitespace only (SentencePiece: ``"lord,"`` is one
    word) or at punctuation too (BERT: ``"lord"``, ``","``): the key is ``"lord"`` for both.
    """
    count = 1 + max((w for w in word_ids if w is not None), default=-1)
    starts, ends = [len(text)] * count, [0] * count
    for (start, end), index in zip(offsets, word_ids):
        if index is not None:
            starts[index] = min(starts[index], start)
            ends[index] = max(ends[index], end)
    keys = []
    for start, end in zip(starts, ends):
        word = text[start:end].strip().lower()
        keys.append(_EDGE_PUNCTUATION.sub("", word) or word)
    return keys


@dataclass(frozen=True)
class _Table:
    """Phrases of one kind, ready for a longest-match walk: the set, their first words, the longest."""

    phrases: frozenset[Words]
    firsts: frozenset[str]
    longest: int

    @classmethod
    def of(cls, phrases: Iterable[Words]) -> _Table:
        kept = frozenset(p for p in phrases if p)
        return cls(kept, frozenset(p[0] for p in kept), max(map(len, kept), default=0))

    def walk(self, words: Sequence[str], start: int, end: int) -> list[tuple[int, int]]:
        """Leftmost-longest matches in ``words[start:end]``: at most ``longest`` lookups a word."""
        found, i = [], start
        while i < end:
            length = 0
            if words[i] in self.firsts:
                length = next((n for n in range(min(self.longest, end - i), 0, -1) if tuple(words[i : i + n]) in self.phrases), 0)
            if length:
                found.append((i, i + length))
            i += max(length, 1)
        return found


@dataclass(frozen=True)
class Phrases:
    """Phrases (tuples of lower-cased words) to find in word sequences: listed terms and PMI n-grams.

    Terms are found first (any length from one word), then PMI n-grams in the words between
    them. Among matches of one kind, the leftmost wins, and at one start the longest: a phrase
    inside a longer one found ("new york" in "new york city") is not found alone.

    ``Phrases(ngrams=(("new", "york"), ("new", "york", "city"))).find(["in", "new", "york", "city"])``
    ``->  [(1, 4, False)]``; with ``terms=(("york",),)`` too  ->  ``[(2, 3, True)]`` (the n-grams
    would cross the term).
    """

    terms: tuple[Words, ...] = ()
    ngrams: tuple[Words, ...] = ()
    _terms: _Table = field(init=False, repr=False, compare=False)
    _ngrams: _Table = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_terms", _Table.of(self.terms))
        object.__setattr__(self, "_ngrams", _Table.of(self.ngrams))

    def __len__(self) -> int:
        return len(self._terms.phrases | self._ngrams.phrases)

    def find(self, words: Sequence[str]) -> list[tuple[int, int, bool]]:
        """``[(start, end, is_term), …]`` sorted by start: the phrases in ``words``, word indices
        ``[start, end)``. Linear time in ``len(words)`` (the longest phrase bounds the lookups)."""
        terms = self._terms.walk(words, 0, len(words))
        found = [(s, e, True) for s, e in terms]
        gap_start = 0
        for start, end in [*terms, (len(words), len(words))]:
            found.extend((s, e, False) for s, e in self._ngrams.walk(words, gap_start, start))
            gap_start = end
        return sorted(found)

    def fingerprint(self) -> str:
        """A hash of the phrases (for cache keys): same phrases, same hash."""
        text = json.dumps([sorted(self.terms), sorted(self.ngrams)])
        return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()

    def columns(self, words: Sequence[str], word_ids: Sequence[int | None]) -> PhraseColumns:
        """The merged word ids and term mask of one document, from its words and token word ids.

        Words ``["take", "new", "york", "aspirin"]`` with ``("new", "york")`` an n-gram and
        ``("aspirin",)`` a term, ``word_ids = [None, 0, 1, 2, 3, 3, None]``
        ->  merged ``[-1, 0, 1, 1, 3, 3, -1]``, term mask ``[0, 0, 0, 0, 1, 1, 0]``.
        """
        ids = np.fromiter((-1 if w is None else w for w in word_ids), dtype=np.int64, count=len(word_ids))
        matches = self.find(words)
        spans = np.array([(s, e) for s, e, _ in matches if e - s > 1], dtype=np.int64).reshape(-1, 2)
        in_term = np.zeros(len(words) + 1, dtype=np.int64)  # the last slot is for special tokens (-1)
        for start, end, is_term in matches:
            in_term[start:end] = is_term
        return PhraseColumns(merge_words(ids, spans).tolist(), in_term[ids].tolist())


def encode_with_phrases(
    texts: list[str],
    tokenizer: PreTrainedTokenizerBase,
    phrases: Phrases,
    *,
    add_special_tokens: bool = False,
    max_length: int | None = None,
) -> list[tuple[list[int], list[int | None], PhraseColumns]]:
    """One batch of texts to ``(ids, word ids, phrase columns)``, the phrases found in each
    (in what is kept of it, when ``max_length`` truncates).

    Raises:
        ValueError: a slow tokenizer (phrases need its words and offsets).
    """
    if not texts:
        return []
    require_fast(tokenizer)
    encoding = tokenizer(
        texts, add_special_tokens=add_special_tokens, return_offsets_mapping=True, verbose=False,
        truncation=max_length is not None, max_length=max_length,
    )  # fmt: skip
    out = []
    for row, (text, ids) in enumerate(zip(texts, encoding["input_ids"])):
        word_ids = encoding.word_ids(row)
        words = document_words(text, encoding["offset_mapping"][row], word_ids)
        out.append((ids, word_ids, phrases.columns(words, word_ids)))
    return out


def require_fast(tokenizer: PreTrainedTokenizerBase) -> None:
    """Raises ValueError unless ``tokenizer`` is a fast one (phrases need words and offsets)."""
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError("PMI and term masking need a fast tokenizer (its words and offsets find the phrases)")


def text_words(texts: Iterable[str], tokenizer: PreTrainedTokenizerBase, *, batch_size: int = 1000) -> Iterable[list[str]]:
    """The lower-cased words of each text, as the tokenizer splits them (documents, or terms)."""
    require_fast(tokenizer)
    chunk: list[str] = []
    for text in [*texts, None]:
        if text is not None:
            chunk.append(text)
        if chunk and (text is None or len(chunk) == batch_size):
            encoding = tokenizer(chunk, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
            for row, item in enumerate(chunk):
                yield document_words(item, encoding["offset_mapping"][row], encoding.word_ids(row))
            chunk = []


def read_terms(path: str | Path, tokenizer: PreTrainedTokenizerBase) -> tuple[Words, ...]:
    """The terms of a file, one per line (blank lines skipped), split into the tokenizer's words.

    ``"Aspirin\\nvitamin C\\n"``  ->  ``(("aspirin",), ("vitamin", "c"))``

    Raises:
        ValueError: the file cannot be read, or holds no term.
    """
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or error
        raise ValueError(f"cannot read the terms file {path}: {reason}") from None
    terms = [line.strip() for line in lines if line.strip()]
    words = tuple(dict.fromkeys(tuple(w) for w in text_words(terms, tokenizer) if w))
    if not words:
        raise ValueError(f"the terms file {path} holds no term (one per line)")
    return words
