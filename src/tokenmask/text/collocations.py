"""Correlated word n-grams by PMI (Levine et al., ICLR 2021, "PMI-Masking"): counting and ranking.

The PMI of an n-gram is the smallest, over the ways σ to cut it into contiguous parts, of
``log p(w1…wn) / ∏ p(s)`` for the parts ``s`` of σ: an n-gram ranks high only when no cut
explains it (``"of the"`` is frequent but explained by ``"of"`` and ``"the"``). Probabilities
are counts over ``N``, the number of words, so for a cut into ``k`` parts
``PMI_σ = log c(w) - Σ log c(s) + (k - 1) log N``. Counting is numpy over dense n-gram ids:
the ids of the n-grams are the ids of (the (n-1)-gram, the next word) pairs, so every
sub-n-gram's count is one array lookup at its position.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

SHARES = {2: 0.5, 3: 0.25, 4: 0.125, 5: 0.125}
"""The paper's mix of the vocabulary: half bigrams, a quarter trigrams, an eighth each 4- and 5-grams."""

MAX_PMI_N = 5
"""The longest n-gram of a PMI vocabulary."""

BREAK = -1
"""A position no n-gram may span: between documents, and on words without a letter or digit."""


@dataclass(frozen=True)
class Collocation:
    """One n-gram of the vocabulary: its words, how often it occurs, its PMI (nats)."""

    words: tuple[str, ...]
    count: int
    pmi: float


def default_min_count(words: int) -> int:
    """The count an n-gram needs by default: one per 100,000 words, between 3 and 11
    (the paper's "more than 10" on 3.3 billion words). ``900_000 -> 9``, ``20_000 -> 3``."""
    return int(min(11, max(3, round(words / 100_000))))


def default_vocab_size(words: int) -> int:
    """The vocabulary size by default, scaled as in the paper (800,000 n-grams for 3.2 billion
    words: one per 4,000 words), at least 100. ``900_000 -> 225``."""
    return max(100, words // 4000)


def word_sequence(documents: Iterable[list[str]]) -> tuple[np.ndarray, list[str], int]:
    """``(sequence, vocabulary, words)``: the corpus as one int64 array of word ids, with a
    :data:`BREAK` between documents and on words without a letter or digit (punctuation never
    joins a collocation); the word of each id; and the number of words read.

    ``[["to", "be", ",", "or"], ["not"]]  ->  ([0, 1, -1, 2, -1, 3, -1], ["to", "be", "or", "not"], 5)``
    """
    index: dict[str, int] = {}
    ids: list[int] = []
    words = 0
    for document in documents:
        words += len(document)
        for word in document:
            if any(c.isalnum() for c in word):
                ids.append(index.setdefault(word, len(index)))
            else:
                ids.append(BREAK)
        ids.append(BREAK)
    return np.asarray(ids, dtype=np.int64), list(index), words


def ngram_ids(sequence: np.ndarray, max_n: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Dense ids of every n-gram for n = 1..max_n, and the count of each id.

    Element ``n - 1`` is ``(ids, counts)``: ``ids[i]`` is the id of the n-gram starting at
    position ``i`` (-1 where it would span a break or run past the end), ``counts[id]`` how
    often it occurs. ``sequence = [0, 1, 0, 1, -1]``, ``max_n = 2`` -> bigram ids
    ``[0, 1, 0, -1, -1]`` (``(0, 1)`` is id 0, ``(1, 0)`` id 1), counts ``[2, 1]``.
    """
    length = len(sequence)
    unigram_counts = np.bincount(sequence[sequence >= 0], minlength=int(sequence.max(initial=-1)) + 1)
    tables = [(sequence.copy(), unigram_counts)]
    vocab = max(1, len(unigram_counts))
    for n in range(2, max_n + 1):
        previous = tables[-1][0]
        ids = np.full(length, -1, dtype=np.int64)
        valid = np.zeros(length, dtype=bool)
        valid[: length - n + 1] = (previous[: length - n + 1] >= 0) & (sequence[n - 1 :] >= 0)
        keys = previous[valid] * vocab + sequence[n - 1 :][valid[: length - n + 1]]
        _, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
        ids[valid] = inverse.reshape(-1)
        tables.append((ids, counts))
    return tables


def segmentations(n: int) -> list[list[tuple[int, int]]]:
    """Every cut of ``n`` words into two or more contiguous parts, as ``(offset, length)`` lists.

    ``segmentations(3) -> [[(0, 1), (1, 2)], [(0, 2), (2, 1)], [(0, 1), (1, 1), (2, 1)]]``
    (``2^(n-1) - 1`` cuts: 15 for a 5-gram).
    """
    cuts = []
    for k in range(1, n):
        for points in itertools.combinations(range(1, n), k):
            bounds = (0, *points, n)
            cuts.append([(bounds[j], bounds[j + 1] - bounds[j]) for j in range(k + 1)])
    return cuts


def rank_collocations(
    documents: Iterable[list[str]], *, min_count: int | None = None, vocab_size: int | None = None, max_n: int = MAX_PMI_N
) -> tuple[list[Collocation], int]:
    """The PMI vocabulary of a corpus and the number of words read.

    Each n (2..``max_n``) is ranked separately by PMI (ties: the more frequent first) among
    the n-grams seen at least ``min_count`` times, and gets its share (:data:`SHARES`) of
    ``vocab_size``; an n with fewer candidates than its share leaves the rest unused.

    Args:
        documents: the lower-cased words of each document.
        min_count / vocab_size: None scales them to the corpus (:func:`default_min_count`,
            :func:`default_vocab_size`).
    """
    sequence, vocabulary, words = word_sequence(documents)
    min_count = default_min_count(words) if min_count is None else min_count
    vocab_size = default_vocab_size(words) if vocab_size is None else vocab_size
    tables = ngram_ids(sequence, max_n)
    log_total = math.log(max(1, int((sequence >= 0).sum())))
    kept: list[Collocation] = []
    for n in range(2, max_n + 1):
        ids, counts = tables[n - 1]
        candidates = np.flatnonzero(counts >= min_count)
        if candidates.size == 0:
            continue
        positions = _first_positions(ids, counts.size)[candidates]  # (C,) where each candidate first occurs
        pmi = _pmi(positions, n, tables, log_total)
        quota = round(vocab_size * SHARES.get(n, 0.0))
        order = np.lexsort((positions, -counts[candidates], -pmi))[:quota]
        for j in order:
            start = int(positions[j])
            words_of = tuple(vocabulary[w] for w in sequence[start : start + n])
            kept.append(Collocation(words_of, int(counts[candidates[j]]), float(pmi[j])))
    return kept, words


def _first_positions(ids: np.ndarray, count: int) -> np.ndarray:
    """For each id ``0..count-1``, the first position where ``ids`` holds it."""
    first = np.full(count, len(ids), dtype=np.int64)
    valid = np.flatnonzero(ids >= 0)
    np.minimum.at(first, ids[valid], valid)
    return first


def _pmi(positions: np.ndarray, n: int, tables: list[tuple[np.ndarray, np.ndarray]], log_total: float) -> np.ndarray:
    """The PMI of the n-grams at ``positions``: the minimum over cuts of
    ``log c(w) - Σ log c(s) + (k - 1) log N`` (every part of a kept n-gram is counted too)."""

    def log_count(length: int, offset: int) -> np.ndarray:
        ids, counts = tables[length - 1]
        return np.log(counts[ids[positions + offset]])

    whole = log_count(n, 0)
    best = np.full(len(positions), np.inf)
    for cut in segmentations(n):
        parts = sum(log_count(length, offset) for offset, length in cut)
        best = np.minimum(best, whole - parts + (len(cut) - 1) * log_total)
    return best
