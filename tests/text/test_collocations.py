"""PMI n-grams: the paper's measure worked by hand, planted collocations found, defaults scaled."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from tokenmask.text.collocations import (
    default_min_count,
    default_vocab_size,
    ngram_ids,
    rank_collocations,
    segmentations,
    word_sequence,
)

# 4 x "new york of the" + 4 x "of x the y": N = 32 words.
# counts: new 4, york 4, of 8, the 8, x 4, y 4; every bigram and trigram below 4 times.
HAND = [["new", "york", "of", "the"]] * 4 + [["of", "x", "the", "y"]] * 4


def test_pmi_by_hand():
    found, words = rank_collocations(HAND, min_count=4, vocab_size=100)
    assert words == 32
    pmi = {entry.words: entry.pmi for entry in found}
    log = math.log
    # PMI = log c(w) - Σ log c(s) + (k - 1) log N, minimised over the cuts:
    # new york: log 4 - log 4 - log 4 + log 32 = log 8 (the two words never occur apart)
    assert pmi[("new", "york")] == pytest.approx(log(8))
    # york of: log 4 - log 4 - log 8 + log 32 = log 4; so for of x, x the, the y
    for pair in [("york", "of"), ("of", "x"), ("x", "the"), ("the", "y")]:
        assert pmi[pair] == pytest.approx(log(4))
    # of the: log 4 - log 8 - log 8 + log 32 = log 2 (frequent, but explained by "of" and "the")
    assert pmi[("of", "the")] == pytest.approx(log(2))
    # new york of: cuts (new)(york of) log 8, (new york)(of) log 4 - log 4 - log 8 + log 32 = log 4,
    # (new)(york)(of) log 4 - log 4 - log 4 - log 8 + 2 log 32 = log 32: the minimum is log 4
    assert pmi[("new", "york", "of")] == pytest.approx(log(4))
    # new york of the: the best cut is (new york of)(the): log 4 - log 4 - log 8 + log 32 = log 4;
    # (new york)(of the) gives log 8, (new)(york)(of)(the) log(4 · 32³ / (4 · 4 · 8 · 8)) = log 128
    assert pmi[("new", "york", "of", "the")] == pytest.approx(log(4))
    # ranked per n, best first; ties (count 4 each) in order of first occurrence
    bigrams = [e.words for e in found if len(e.words) == 2]
    assert bigrams == [("new", "york"), ("york", "of"), ("of", "x"), ("x", "the"), ("the", "y"), ("of", "the")]


def test_min_count_and_shares_of_the_vocabulary():
    # count 4 < 5: nothing passes; a vocabulary of 4 keeps 2 bigrams, 1 trigram, 0.5 -> 0 4-grams
    assert rank_collocations(HAND, min_count=5, vocab_size=100)[0] == []
    found, _ = rank_collocations(HAND, min_count=4, vocab_size=4)
    assert [len(e.words) for e in found] == [2, 2, 3]
    assert found[0].words == ("new", "york") and found[0].count == 4


def test_planted_collocations_rank_first():
    rng = random.Random(0)
    filler = [f"w{i}" for i in range(300)]
    planted = [("hong", "kong"), ("vice", "versa"), ("status", "quo")]
    documents = []
    for _ in range(400):
        words = rng.choices(filler, k=30)
        for pair in rng.sample(planted, 2):
            at = rng.randrange(len(words))
            words[at:at] = list(pair)
        documents.append(words)
    found, _ = rank_collocations(documents, min_count=5, vocab_size=20)
    top = {e.words for e in found[:3]}
    assert top == set(planted)
    assert all(e.pmi > found[3].pmi for e in found[:3])


def test_punctuation_and_document_ends_break_ngrams():
    sequence, vocabulary, words = word_sequence([["to", "be", ",", "or"], ["not"]])
    assert sequence.tolist() == [0, 1, -1, 2, -1, 3, -1] and vocabulary == ["to", "be", "or", "not"] and words == 5
    found, _ = rank_collocations([["a", ",", "b"]] * 5 + [["b"], ["a"]], min_count=2, vocab_size=10)
    assert found == []  # "a , b" is never an n-gram, nor "b a" across documents


def test_ngram_ids_and_segmentations():
    (ones, one_counts), (twos, two_counts) = ngram_ids(np.array([0, 1, 0, 1, -1]), 2)
    assert ones.tolist() == [0, 1, 0, 1, -1]  # unigram ids are the words
    assert twos.tolist() == [0, 1, 0, -1, -1] and two_counts.tolist() == [2, 1]
    assert one_counts.tolist() == [2, 2]
    assert segmentations(3) == [[(0, 1), (1, 2)], [(0, 2), (2, 1)], [(0, 1), (1, 1), (2, 1)]]
    assert [len(segmentations(n)) for n in range(2, 6)] == [1, 3, 7, 15]


def test_defaults_scale_with_the_corpus():
    assert default_min_count(20_000) == 3 and default_min_count(900_000) == 9 and default_min_count(10**9) == 11
    assert default_vocab_size(20_000) == 100 and default_vocab_size(900_000) == 225
    assert default_vocab_size(3_200_000_000) == 800_000  # the paper's size for its corpus
