"""The masking audit: Wilson intervals, and an audit of the real corpus against the configuration."""

import pytest

from tokenmask import MaskingCollator
from tokenmask.blocks.pack import pack_texts
from tokenmask.masking import UnitConfig
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
