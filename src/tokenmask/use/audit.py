"""Measure what a masking configuration really does on a corpus, with binomial confidence intervals.

Counts the share of eligible tokens selected, the mask / random / keep split, the lengths of
the selected units, and the two numbers that must be zero: targets on special tokens and
random replacements that drew a protected id.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tokenmask.blocks.pack import batched
from tokenmask.collate.collator import MaskingCollator
from tokenmask.collate.pad import Feature, PaddedBatch
from tokenmask.masking import MaskedBatch, Outcome, UnitConfig, word_units
from tokenmask.masking.lengths import unit_length_probabilities
from tokenmask.masking.select import fill_probability, priority_units
from tokenmask.masking.units import unit_starts
from tokenmask.text.collocations import MAX_PMI_N

Z_99 = 2.575829  # two-sided 99% normal quantile: one check in 100 is flagged by chance


@dataclass(frozen=True)
class Estimate:
    """An observed proportion ``count / total`` with its 99% Wilson score interval."""

    name: str
    count: int
    total: int
    expected: float | None = None
    checked: bool = True
    """False: ``expected`` is shown for reference, not tested (e.g. a token share of multi-token units)."""

    @property
    def rate(self) -> float:
        return self.count / self.total if self.total else float("nan")

    @property
    def interval(self) -> tuple[float, float]:
        """Wilson score interval: good coverage even for rates near 0 or 1 and small totals."""
        n, z = self.total, Z_99
        if n == 0:
            return (0.0, 1.0)
        p = self.count / n
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        low = 0.0 if self.count == 0 else max(0.0, centre - half)
        high = 1.0 if self.count == n else min(1.0, centre + half)
        return (low, high)

    @property
    def consistent(self) -> bool | None:
        """Whether the configured value lies inside the interval (None when there is none)."""
        if self.expected is None or not self.checked:
            return None
        low, high = self.interval
        return low <= self.expected <= high


@dataclass
class MaskingAudit:
    """What :func:`audit_masking` measured."""

    sequences: int = 0
    tokens: int = 0
    eligible: int = 0
    targets: int = 0
    units: int = 0
    selected_units: int = 0
    outcomes: Counter = field(default_factory=Counter)
    special_targets: int = 0
    protected_draws: int = 0
    term_tokens: int | None = None
    """Eligible tokens inside term occurrences (None without terms)."""
    term_targets: int = 0
    """Targets inside term occurrences."""
    term_units: int = 0
    """Units holding a term token (selected first)."""
    selected_term_units: int = 0
    other_units: int = 0
    """Units without a term token (they fill the rest of the rate)."""
    selected_other_units: int = 0
    expected_other_units: float = 0.0
    """Bernoulli mode: the expected number of other units selected, the sum over rows of q times their count."""
    promised_targets: float = 0.0
    """Bernoulli mode with terms: the expected targets, the sum over rows of max(p E, P) tokens."""
    unit_lengths: Counter = field(default_factory=Counter)
    unit_length_kind: str = "tokens"
    expected_lengths: dict[int, float] = field(default_factory=dict)
    expected: dict[str, Any] = field(default_factory=dict)

    def estimates(self) -> list[Estimate]:
        """Selection rate and the mask / random / keep split, against the configuration.

        For multi-token units the tokens of a unit are chosen together, so a token-level
        interval would be too narrow: the check is then on the share of units selected
        (Bernoulli mode), and the token share is shown without one.

        With terms the selection promises something else, so that is what is checked
        (Bernoulli): every unit holding a term is selected (share 1), and the other units at
        ``q = (p·E - P) / (E - P)`` of their row, whose mean over the other units is the expected
        share (their count is Poisson-binomial, no wider than the binomial: the Wilson interval
        is conservative). The token share is shown against its promise, ``max(p·E, P)`` tokens
        per row, without a check.
        """
        if self.term_tokens is not None and self.units:
            return self._term_estimates() + self._corruption_estimates()
        selection = []
        if self.units:
            unit_rate = self.expected.get("rate") if self.expected.get("mode") == "bernoulli" else None
            selection.append(Estimate("selected units", self.selected_units, self.units, unit_rate))
            selection.append(Estimate("selected tokens", self.targets, self.eligible))
        else:
            selection.append(Estimate("selected", self.targets, self.eligible, self.expected.get("rate")))
        return selection + self._corruption_estimates()

    def _term_estimates(self) -> list[Estimate]:
        bernoulli = self.expected.get("mode") == "bernoulli"
        other_rate = self.expected_other_units / self.other_units if bernoulli and self.other_units else None
        promised = self.promised_targets / self.eligible if bernoulli and self.eligible else None
        names = (
            ("term units selected (all, first)", "other units selected (at q per row)", "selected tokens (max(pE, P) per row)")
            if bernoulli  # exact: no interval applies, the counts are fixed per row
            else (
                "term units selected (first, in budget)",
                "other units selected (rest of budget)",
                "selected tokens (round(pE) per row)",
            )
        )
        return [
            Estimate(names[0], self.selected_term_units, self.term_units, 1.0 if bernoulli else None),
            Estimate(names[1], self.selected_other_units, self.other_units, other_rate),
            Estimate(names[2], self.targets, self.eligible, promised, checked=False),
            Estimate("targets in terms", self.term_targets, self.targets),
            Estimate("eligible tokens in terms", self.term_tokens or 0, self.eligible),
        ]

    def _corruption_estimates(self) -> list[Estimate]:
        return [
            Estimate("mask", self.outcomes[Outcome.MASK], self.targets, self.expected.get("mask")),
            Estimate("random", self.outcomes[Outcome.RANDOM], self.targets, self.expected.get("random")),
            Estimate("keep", self.outcomes[Outcome.KEEP], self.targets, self.expected.get("keep")),
        ]

    def length_estimates(self) -> list[Estimate]:
        """Share of selected units of each length, against the strategy's distribution.

        With terms the distribution is shown but not checked: the units holding a term are all
        taken first, and a longer span holds a term more often, so selected units run longer.
        """
        total = sum(self.unit_lengths.values())
        lengths = sorted(set(self.unit_lengths) | set(self.expected_lengths))
        checked = self.term_tokens is None
        return [
            Estimate(f"length {k}", self.unit_lengths.get(k, 0), total, self.expected_lengths.get(k), checked=checked)
            for k in lengths
        ]

    def to_dict(self) -> dict:
        def row(e: Estimate) -> dict:
            low, high = e.interval
            return {
                "name": e.name,
                "count": e.count,
                "total": e.total,
                "rate": e.rate,
                "ci99": [low, high],
                "expected": e.expected,
                "checked": e.checked and e.expected is not None,
                "consistent": e.consistent,
            }

        return {
            "sequences": self.sequences,
            "tokens": self.tokens,
            "eligible": self.eligible,
            "targets": self.targets,
            "units": self.units,
            "selected_units": self.selected_units,
            "special_tokens_hit": self.special_targets,
            "protected_ids_drawn": self.protected_draws,
            "term_targets": self.term_targets if self.term_tokens is not None else None,
            "term_units": self.term_units if self.term_tokens is not None else None,
            "selected_term_units": self.selected_term_units if self.term_tokens is not None else None,
            "rates": [row(e) for e in self.estimates()],
            "unit_length_kind": self.unit_length_kind,
            "unit_lengths": [row(e) for e in self.length_estimates()],
        }


def expected_unit_lengths(config: UnitConfig) -> tuple[str, dict[int, float]]:
    """The length distribution of selected units, and its unit (``words`` / ``tokens``).

    Span and n-gram: the distribution their lengths are drawn from, in words
    (:func:`~tokenmask.masking.lengths.unit_length_probabilities`); token: always 1 token
    (without terms). Whole words, PMI n-grams (in words) and given spans have no configured
    distribution (empty dict).
    """
    drawn = unit_length_probabilities(config)
    if drawn is not None:
        return "words", {k: float(p) for k, p in enumerate(drawn, start=1)}
    if config.strategy == "token":
        return "tokens", ({} if config.mask_terms else {1: 1.0})  # a term of several tokens is one unit
    return ("words" if config.strategy in ("whole_word", "pmi") else "tokens"), {}


def audit_masking(
    examples: Iterable[Feature],
    collator: MaskingCollator,
    *,
    batch_size: int = 64,
    max_tokens: int | None = None,
    on_batch: Callable[[int], None] | None = None,
) -> MaskingAudit:
    """Mask a corpus with ``collator`` and count what happened.

    Args:
        examples: collator examples (``input_ids``, ``word_ids``, ``id``), e.g. from
            :func:`tokenmask.blocks.pack.pack_texts` or :func:`tokenmask.blocks.encode.encode_texts`.
        collator: the configuration under test.
        batch_size: examples per batch.
        max_tokens: stop once this many tokens have been seen.
        on_batch: called with the number of tokens of each batch (progress).

    Raises:
        ValueError: the corpus holds no text.
    """
    corruption, selection = collator.masking.corruption, collator.masking.selection
    kind, expected_lengths = expected_unit_lengths(collator.masking.units)
    audit = MaskingAudit(
        unit_length_kind=kind,
        expected_lengths=expected_lengths,
        expected={
            "rate": selection.mlm_probability,
            "mode": selection.mode,
            "mask": corruption.mask_replace_prob,
            "random": corruption.random_replace_prob,
            "keep": corruption.keep_prob,
        },
    )
    for features in batched(examples, batch_size):
        batch, masked = collator.mask(features)
        _count_batch(audit, collator, batch, masked)
        if on_batch is not None:
            on_batch(int(batch.lengths.sum()))
        if max_tokens is not None and audit.tokens >= max_tokens:
            break
    if audit.sequences == 0:
        raise ValueError("the corpus holds no text")
    return audit


def _count_batch(audit: MaskingAudit, collator: MaskingCollator, batch: PaddedBatch, masked: MaskedBatch) -> None:
    outcome, eligible = masked.outcome.numpy(), masked.eligible.numpy()  # the audit masks on the host
    targets = outcome != Outcome.NONE
    ids = batch.input_ids
    audit.sequences += ids.shape[0]
    audit.tokens += int(batch.lengths.sum())
    audit.eligible += int(eligible.sum())
    audit.targets += int(targets.sum())
    audit.outcomes.update({o: int((outcome == o).sum()) for o in (Outcome.MASK, Outcome.RANDOM, Outcome.KEEP)})
    audit.special_targets += int((targets & collator.vocab.protected[ids]).sum())
    drawn = masked.input_ids.numpy()[outcome == Outcome.RANDOM]
    audit.protected_draws += int(collator.vocab.protected[drawn].sum())
    if batch.term_mask is not None:
        audit.term_tokens = (audit.term_tokens or 0) + int((batch.term_mask & eligible).sum())
        audit.term_targets += int((batch.term_mask & targets).sum())

    # Units: the unit map the masking used, counted and measured.
    config = collator.masking.units
    if config.strategy == "given" or (config.strategy == "token" and batch.term_mask is None):
        audit.unit_lengths[1] += int(targets.sum()) if config.strategy == "token" else 0
        return
    units = masked.units.numpy()
    starts = unit_starts(units)
    audit.units += int(starts.sum())
    audit.selected_units += int((starts & targets).sum())
    if batch.term_mask is not None:
        _count_terms_first(audit, units, starts, targets, batch.term_mask, collator.masking.selection.mlm_probability)
    word_starts = starts
    if config.strategy == "token":  # with terms: measured in tokens
        word_starts = units >= 0
    elif config.strategy != "whole_word" or batch.merged_word_ids is not None:  # in words: the words they cover
        words = batch.word_ids
        assert words is not None  # word strategies always mask with word ids, and the batch returns them
        word_starts = unit_starts(word_units(words, eligible & (words >= 0)))
    _count_unit_lengths(audit, units, word_starts, starts & targets, _longest_unit(config))


def _count_terms_first(
    audit: MaskingAudit, units: np.ndarray, starts: np.ndarray, targets: np.ndarray, term_mask: np.ndarray, p: float
) -> None:
    """Count the units holding a term and the others, selected or not, and what selection promises
    for them (:func:`~tokenmask.masking.select.select_units` with ``priority``)."""
    first = priority_units(units, term_mask)  # (B, T)
    n_eligible, n_first = np.count_nonzero(units >= 0, axis=1), np.count_nonzero(first, axis=1)
    term_starts, other_starts = starts & first, starts & ~first
    audit.term_units += int(term_starts.sum())
    audit.selected_term_units += int((term_starts & targets).sum())
    audit.other_units += int(other_starts.sum())
    audit.selected_other_units += int((other_starts & targets).sum())
    q = fill_probability(p, n_eligible, n_first)
    audit.expected_other_units += float((q * other_starts.sum(axis=1)).sum())
    audit.promised_targets += float(np.maximum(p * n_eligible, n_first).sum())


def _longest_unit(config: UnitConfig) -> int | None:
    return {"span": config.span_max_words, "ngram": config.ngram_max_n, "pmi": MAX_PMI_N}.get(config.strategy)


def _count_unit_lengths(
    audit: MaskingAudit,
    units: np.ndarray,
    word_starts: np.ndarray,
    chosen_starts: np.ndarray,
    longest: int | None,
) -> None:
    """Add the lengths (in words) of the chosen units to the histogram.

    A unit that reaches a block end or a separator may have been cut there, and long units
    are cut more often; a unit right after a separator inside a block is the rest of a cut
    one. So when a longest length is configured, only units that start at least ``longest``
    words before the next boundary, and not just after a separator, are counted: whether a
    unit is counted then does not depend on its own length, which keeps the histogram unbiased.
    """
    batch, width = units.shape
    flat = np.arange(batch)[:, None] * width + np.maximum(units, 0)
    sizes = np.bincount(flat[word_starts & (units >= 0)], minlength=flat.size)
    chosen = chosen_starts
    if longest is not None:
        words_before = np.cumsum(word_starts, axis=1)  # word starts in [0, t]
        boundary = np.where(units < 0, np.arange(width)[None, :], width)
        next_boundary = np.minimum.accumulate(boundary[:, ::-1], axis=1)[:, ::-1]  # (B, T)
        padded = np.concatenate([words_before, words_before[:, -1:]], axis=1)
        words_left = np.take_along_axis(padded, next_boundary, axis=1) - words_before + 1
        after_separator = np.zeros_like(chosen)
        after_separator[:, 1:] = (units[:, :-1] < 0) & (np.cumsum(units >= 0, axis=1)[:, :-1] > 0)
        chosen = chosen & (words_left >= longest) & ~after_separator
    audit.unit_lengths.update(Counter(sizes[flat[chosen]].tolist()))
