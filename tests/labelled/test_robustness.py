"""Corrupted evaluation texts: deterministic per seed, at their stated rates, nested across rates."""

import math
import random

import pytest

from tokenmask.labelled.robustness import (
    DEFAULT_CORRUPTIONS,
    Corruption,
    chosen_words,
    corrupt_text,
    corrupt_texts,
    is_word,
    parse_corruptions,
    typo,
)

UNK = "[UNK]"


@pytest.fixture(scope="module")
def texts(lines):
    """2,000 Shakespeare lines with at least 3 words: ~16,000 words."""
    return [line for line in lines if len(line.split()) >= 3][:2000]


def words(text):
    return [piece for piece in text.split() if is_word(piece)]


def test_words_are_pieces_with_a_letter_or_digit():
    assert [is_word(p) for p in ["he's", "21st", ",", "--", "a", "'"]] == [True, True, False, False, True, False]


def test_exact_unknown_token_case():
    # 4 words at rate 0.5: floor(0.5 * 4 + u) = 2 for any u in [0, 1); punctuation is never touched
    out = corrupt_text("a truly great film .", Corruption("unk", 0.5), seed=0, index=0, unk_token=UNK)
    assert out.split().count(UNK) == 2 and out.endswith(" .")
    kept = [w for w in out.split() if w != UNK]
    assert set(kept) <= {"a", "truly", "great", "film", "."}


def test_typo_always_changes_the_word_by_one_edit():
    rng = random.Random(0)
    for word in ["film", "a", "all", "ooo", "21st", "he's", "Zz"] * 50:
        changed = typo(word, rng)
        assert changed != word
        assert abs(len(changed) - len(word)) <= 1  # one swap, drop, insert or substitution
        if len(changed) == len(word):  # a swap or a substitution: at most two positions differ
            assert sum(a != b for a, b in zip(changed, word)) <= 2


@pytest.mark.parametrize("corruption", DEFAULT_CORRUPTIONS, ids=lambda c: c.name)
def test_same_seed_same_text_other_seed_other_text(texts, corruption):
    sample = texts[:300]
    first = corrupt_texts(sample, corruption, seed=3, unk_token=UNK)
    assert first == corrupt_texts(sample, corruption, seed=3, unk_token=UNK)
    other = corrupt_texts(sample, corruption, seed=4, unk_token=UNK)
    assert sum(a != b for a, b in zip(first, other)) > 50  # most texts with a corrupted word differ
    # each text depends on its index and the seed only, not on the texts around it
    assert corrupt_text(sample[7], corruption, seed=3, index=7, unk_token=UNK) == first[7]


@pytest.mark.parametrize("corruption", DEFAULT_CORRUPTIONS, ids=lambda c: c.name)
def test_each_text_gets_floor_or_ceil_of_rate_times_words(texts, corruption):
    """Per text: exactly k = floor(r·n + u) words corrupted, so k is ⌊r·n⌋ or ⌈r·n⌉ (deletion
    at most n - 1). Over all texts: E[k] = r·n and Var[k] = f(1 - f) <= 1/4 (f = frac(r·n)), so
    the total lies within 5 · sqrt(texts / 4) of r · words (5 sd: a false alarm ~ 1e-6)."""
    total_words = total_corrupted = 0
    for index, text in enumerate(texts):
        out = corrupt_text(text, corruption, seed=0, index=index, unk_token=UNK)
        before, after = words(text), out.split()
        n = len(before)
        if corruption.kind == "unk":
            k = after.count(UNK)
        elif corruption.kind == "delete":
            k = n - len(words(out))
        else:  # typos keep the number and order of pieces: count the pieces that changed
            k = sum(a != b for a, b in zip(text.split(), after))
            assert len(after) == len(text.split())
        low, high = math.floor(corruption.rate * n), math.ceil(corruption.rate * n)
        if corruption.kind == "delete":
            low, high = min(low, n - 1), min(high, n - 1)
        assert low <= k <= high, (text, out)
        total_words, total_corrupted = total_words + n, total_corrupted + k
    # (texts have >= 3 words and rates are <= 0.3, so deletion's cap at n - 1 never binds here)
    assert abs(total_corrupted - corruption.rate * total_words) < 5 * math.sqrt(len(texts) / 4)


def test_higher_rates_corrupt_the_same_words_and_more(texts):
    for index, text in enumerate(texts[:300]):
        pieces = text.split()
        chosen = [chosen_words(pieces, rate, seed=1, index=index, kind="typo") for rate in (0.05, 0.1, 0.2)]
        assert chosen[0] <= chosen[1] <= chosen[2]
    # and a word's typo is the same at every rate
    low, high = (corrupt_text(texts[0], Corruption("typo", r), seed=1, index=0) for r in (0.3, 0.9))
    assert all(a == b for a, b, c in zip(low.split(), high.split(), texts[0].split()) if a != c)


def test_deletion_never_empties_a_text():
    assert corrupt_text("wonderful", Corruption("delete", 1.0), seed=0, index=0) == "wonderful"
    assert len(corrupt_text("a b c", Corruption("delete", 1.0), seed=0, index=0).split()) == 1


def test_parse_corruptions():
    assert parse_corruptions([]) == DEFAULT_CORRUPTIONS
    assert [c.name for c in DEFAULT_CORRUPTIONS] == [
        "typo-0.05", "typo-0.1", "typo-0.2", "delete-0.1", "delete-0.2", "delete-0.3", "unk-0.1", "unk-0.2", "unk-0.3",
    ]  # fmt: skip
    assert parse_corruptions(["typo=0.05,0.1", "unk=0.2"]) == (
        Corruption("typo", 0.05), Corruption("typo", 0.1), Corruption("unk", 0.2),
    )  # fmt: skip


@pytest.mark.parametrize(
    "specs, message",
    [(["typo"], "KIND=RATE"), (["typo=x"], "must be numbers"), (["smudge=0.1"], "one of typo, delete, unk"),
     (["typo=0"], r"in \(0, 1\]"), (["typo=0.1", "typo=0.1"], "each set once")],
)  # fmt: skip
def test_bad_corruptions(specs, message):
    with pytest.raises(ValueError, match=message):
        parse_corruptions(specs)


def test_unknown_token_needed():
    with pytest.raises(ValueError, match="no unknown token"):
        corrupt_text("a film", Corruption("unk", 0.5), seed=0, index=0, unk_token=None)
