"""PMI and term masking through the collator, on real tokenizers of every family.

Properties (hypothesis): phrase units (PMI n-grams, term occurrences) are masked whole or not
at all, never split a word, never touch special tokens; labels are as for every strategy.
Statistics: every term unit is selected, and the other units at the configured rate (less what
the terms took, with terms), within a stated binomial band.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenmask import MaskingCollator
from tokenmask.blocks.encode import encode_texts
from tokenmask.blocks.pack import pack_texts
from tokenmask.masking import IGNORE_INDEX, MaskingConfig, SelectionConfig, UnitConfig
from tokenmask.masking.select import fill_probability, priority_units
from tokenmask.masking.units import unit_starts
from tokenmask.text.collocations import rank_collocations
from tokenmask.text.phrases import Phrases, text_words

FAMILIES = ["bert-base-uncased", "roberta-gpt2", "trained-wordpiece", "trained-bpe", "trained-unigram"]
TERMS = (("lord",), ("sir", "john"), ("thou", "art"))
NGRAMS = (("my", "lord"), ("i", "pray", "you"), ("good", "my", "lord"), ("i", "will"), ("i", "am"), ("of", "the"))
# (strategy, with terms): PMI alone, and terms with every strategy
CASES = [("pmi", False), ("pmi", True), ("token", True), ("whole_word", True), ("span", True), ("ngram", True)]


@pytest.fixture(scope="module")
def sample(lines):
    return lines[:400]


def phrases_for(strategy: str, with_terms: bool) -> Phrases:
    return Phrases(terms=TERMS if with_terms else (), ngrams=NGRAMS if strategy == "pmi" else ())


def collator_for(tokenizer, strategy: str, with_terms: bool, tmp_path_factory, **selection) -> MaskingCollator:
    terms = None
    if with_terms:  # the file only tells the collator that terms are on; the phrases come with the examples
        terms = tmp_path_factory.mktemp("terms") / "terms.txt"
        terms.write_text("\n".join(" ".join(t) for t in TERMS), encoding="utf-8")
    units = UnitConfig(strategy=strategy, mask_terms=None if terms is None else str(terms))
    masking = MaskingConfig(units=units, selection=SelectionConfig(**{"mlm_probability": 0.3, **selection}))
    return MaskingCollator.from_config(tokenizer, masking, seed=3)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize(("strategy", "with_terms"), CASES)
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_phrase_units_are_whole_and_never_touch_special_tokens(
    tokenizers, sample, tmp_path_factory, family, strategy, with_terms, data
):
    tokenizer = tokenizers[family]
    picks = data.draw(st.lists(st.integers(0, len(sample) - 1), min_size=1, max_size=6))
    texts = [sample[i] for i in picks] + ["Good my lord, I pray you: sir John, thou art my LORD."]
    features = encode_texts(texts, tokenizer, max_length=64, phrases=phrases_for(strategy, with_terms))
    collator = collator_for(tokenizer, strategy, with_terms, tmp_path_factory)
    originals = [list(f["input_ids"]) for f in features]
    batch = collator(features)
    assert [list(f["input_ids"]) for f in features] == originals, "examples were mutated"

    labels, protected = batch["labels"], torch.from_numpy(collator.vocab.protected)
    for row, feature in enumerate(features):
        n = len(feature["input_ids"])
        original = torch.tensor(feature["input_ids"])
        targets = (labels[row, :n] != IGNORE_INDEX).numpy()
        assert torch.equal(labels[row, :n][torch.from_numpy(targets)], original[torch.from_numpy(targets)])
        assert not (targets & protected[original].numpy()).any(), "a special token was selected"
        words, merged = np.array(feature["word_ids"]), np.array(feature["merged_word_ids"])
        terms = np.array(feature["term_mask"], dtype=bool)
        assert not (terms & (words < 0)).any() and not ((merged >= 0) != (words >= 0)).any()
        groups = [(words, words >= 0)] if strategy != "token" else []  # words whole (token: only term words)
        groups.append((merged, (merged >= 0) & (terms if strategy == "token" else True)))  # phrases whole
        for ids, inside in groups:
            for group in np.unique(ids[inside]):
                chosen = targets[ids == group]
                assert chosen.all() or not chosen.any(), f"unit {group} split in row {row}"


@pytest.mark.parametrize("family", FAMILIES)
def test_phrases_are_found_with_every_tokenizer(tokenizers, family):
    """The property test above is not vacuous: the phrases of its fixed line are found."""
    tokenizer = tokenizers[family]
    (example,) = encode_texts(
        ["Good my lord, I pray you: sir John, thou art my LORD."], tokenizer, phrases=phrases_for("pmi", True)
    )
    words, merged, terms = (np.array(example[k]) for k in ("word_ids", "merged_word_ids", "term_mask"))
    # terms: lord, sir john, thou art, lord (4 occurrences, 1 + 2 + 2 + 1 = 6 words); between them the
    # n-gram "i pray you" ("good my lord" and "my lord" would cross the term "lord")
    term_words = {w for w, t in zip(words, terms) if t}
    assert len(term_words) == 6
    merged_words = {w for w, m in zip(words, merged) if w >= 0 and m != w}
    assert len(merged_words) == 4  # "pray", "you", "john", "art": merged into their phrase's first word


def test_missing_phrase_columns_are_refused(bert_tokenizer, tmp_path_factory):
    collator = collator_for(bert_tokenizer, "pmi", False, tmp_path_factory)
    with pytest.raises(ValueError, match="merged_word_ids"):
        collator(encode_texts(["my lord"], bert_tokenizer))


@pytest.mark.parametrize(("strategy", "with_terms"), [("pmi", False), ("whole_word", True)])
def test_terms_first_and_the_other_units_at_the_rate(bert_tokenizer, lines, tmp_path_factory, strategy, with_terms):
    # A PMI vocabulary of the lines themselves (lower min count: more n-grams to mask).
    vocabulary, _ = rank_collocations(text_words(lines, bert_tokenizer), min_count=3, vocab_size=2000)
    phrases = Phrases(terms=TERMS if with_terms else (), ngrams=tuple(e.words for e in vocabulary))
    blocks = list(pack_texts(lines, bert_tokenizer, block_length=128, phrases=phrases))
    collator = collator_for(
        bert_tokenizer, strategy, with_terms, tmp_path_factory, mlm_probability=0.15, min_masks_per_sequence=0
    )
    units = selected = multiword = 0
    terms = terms_selected = 0
    expected, variance = 0.0, 0.0  # of the selected units that hold no term
    for start in range(0, len(blocks), 64):
        padded, masked = collator.mask(blocks[start : start + 64])
        units_map = masked.units.numpy()
        starts = unit_starts(units_map)
        targets = masked.outcome.numpy() != 0
        first = np.zeros_like(starts) if padded.term_mask is None else priority_units(units_map, padded.term_mask)
        q = fill_probability(0.15, (units_map >= 0).sum(axis=1), first.sum(axis=1))
        others = (starts & ~first).sum(axis=1)
        expected, variance = expected + (q * others).sum(), variance + (q * (1 - q) * others).sum()
        units += int((starts & ~first).sum())
        selected += int((starts & ~first & targets).sum())
        terms += int((starts & first).sum())
        terms_selected += int((starts & first & targets).sum())
        multiword += int((padded.merged_word_ids != padded.word_ids).sum())
    assert multiword > 1000, "too few phrases for the test to mean anything"
    # Every unit holding a term is selected (terms first); each other unit independently with
    # q = p = 0.15 without terms, q_r = (p E - P_r) / (E - P_r) of its row with them (its key is its
    # own hash), so their count is Poisson-binomial: mean Σ q n, variance Σ q (1 - q) n; with
    # ~45,000 units sd ≈ 76; a band of 4.5 sd fails by chance about once in 150,000 runs.
    assert terms_selected == terms and (terms > 50) == with_terms
    sd = math.sqrt(variance)
    assert units > 30_000
    assert abs(selected - expected) < 4.5 * sd, (selected, expected, units)
