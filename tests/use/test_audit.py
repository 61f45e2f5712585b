"""The masking audit: Wilson intervals, and an audit of the real corpus against the configuration."""

import pytest

from tokenmask import MaskingCollator
from tokenmask.blocks.pack import pack_texts
from tokenmask.masking import MaskingConfig, UnitConfig
from tokenmask.text.phrases import Phrases
from tokenmask.text.resources import shakespeare_scenes
from tokenmask.use.audit import Estimate, audit_masking, expected_unit_lengths


def test_wilson_interval_hand_worked():
    # p = 0.5, n = 100, z = 2.5758, z^2 = 6.6349: centre = (0.5 + z^2/200) / (1 + z^2/100) = 0.5;
    # half-width = z * sqrt(0.0025 + z^2/40000) / 1.066349 = 2.5758 * 0.051630 / 1.066349 = 0.12472.
    low, high = Estimate("x", 50, 100).interval
    assert low == pytest.approx(0.37528, abs=1e-4) and high == pytest.approx(0.62472, abs=1e-4)
    assert Estimate("x", 0, 10).interval[0] == 0.0
    assert Estimate("x", 5, 10, expected=0.5).consistent is True
    assert Estimate("x", 99, 100, expected=0.5).consistent is False


def test_expected_span_lengths_sum_to_one():
    kind, dist = expected_unit_lengths(UnitConfig(strategy="span"))
    assert kind == "words" and sum(dist.values()) == pytest.approx(1.0) and dist[1] == pytest.approx(0.2)
    _, ngram = expected_unit_lengths(UnitConfig(strategy="ngram"))
    assert ngram == pytest.approx({1: 6 / 11, 2: 3 / 11, 3: 2 / 11})


@pytest.mark.parametrize(
    "strategy, tokens, checked",
    [("token", 100_000, 5), ("whole_word", 100_000, 4), ("ngram", 100_000, 7), ("span", 400_000, 14)],
)
def test_audit_of_shakespeare_matches_the_configuration(bert_tokenizer, strategy, tokens, checked):
    # 10^5 tokens (4 * 10^5 for spans, to get ~10^4 spans) in 128-token blocks; the audit's
    # own 99% intervals must contain the configured rates, split and unit-length shares
    # (each check fails by chance with probability 1%; the seed is fixed).
    collator = MaskingCollator(bert_tokenizer, strategy=strategy, seed=0)
    blocks = pack_texts(shakespeare_scenes(), bert_tokenizer, block_length=128)
    audit = audit_masking(blocks, collator, batch_size=256, max_tokens=tokens)
    assert audit.tokens >= tokens
    assert audit.special_targets == 0 and audit.protected_draws == 0
    estimates = [e for e in audit.estimates() + audit.length_estimates() if e.expected is not None]
    assert len(estimates) == checked
    for estimate in estimates:
        assert estimate.consistent, (estimate.name, estimate.rate, estimate.interval, estimate.expected)


def test_audit_uses_the_collators_words_when_examples_carry_none(bert_tokenizer, lines):
    collator = MaskingCollator(bert_tokenizer, strategy="whole_word", seed=0)
    blocks = [{k: v for k, v in b.items() if k != "word_ids"} for b in pack_texts(lines[:400], bert_tokenizer, block_length=64)]
    audit = audit_masking(blocks, collator, batch_size=64)
    assert audit.units > 0 and 0 < audit.selected_units < audit.units
    assert audit.targets == sum(audit.outcomes.values())


@pytest.mark.parametrize("strategy", ["token", "whole_word", "span"])
def test_audit_with_terms_checks_terms_first(bert_tokenizer, tmp_path, strategy):
    # 10^5 tokens of the plays with the terms "lord" and "my lord": every unit holding a term must be
    # selected, the others at the mean q of their rows (99% intervals; the seed is fixed), and the
    # share of targets in terms is far above the share of eligible tokens in terms (p = 0.15 of the
    # others against all of the terms: about 1 / 0.15 times).
    terms = tmp_path / "terms.txt"
    terms.write_text("lord\nmy lord\n", encoding="utf-8")
    units = UnitConfig(strategy=strategy, mask_terms=str(terms))
    collator = MaskingCollator.from_config(bert_tokenizer, MaskingConfig(units=units), seed=0)
    phrases = Phrases(terms=(("lord",), ("my", "lord")))
    blocks = pack_texts(shakespeare_scenes(), bert_tokenizer, block_length=128, phrases=phrases)
    audit = audit_masking(blocks, collator, batch_size=256, max_tokens=100_000)
    rates = {e.name: e for e in audit.estimates()}
    first, others = rates["term units selected (all, first)"], rates["other units selected (at q per row)"]
    assert first.total > 100 and first.count == first.total and first.consistent
    assert others.consistent, (others.rate, others.interval, others.expected)
    assert 0.14 < others.expected < 0.15  # q: p less what the terms took
    in_terms, eligible_in_terms = rates["targets in terms"].rate, rates["eligible tokens in terms"].rate
    assert in_terms > 4 * eligible_in_terms
    tokens = rates["selected tokens (max(pE, P) per row)"]
    assert tokens.consistent is None and abs(tokens.expected - 0.15) < 1e-3
    assert all(e.consistent is None for e in audit.length_estimates())
