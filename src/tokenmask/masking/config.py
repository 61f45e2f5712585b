"""Frozen, validated settings for the three masking concepts: units, selection, corruption.

Each field is declared once (:func:`tokenmask.settings.setting`: help, range, flag); the command line
and the YAML configs are generated from these declarations.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal, get_args

from tokenmask.settings import check, setting

IGNORE_INDEX = -100
"""Label of a position that is not a prediction target (ignored by cross-entropy)."""

Strategy = Literal["token", "whole_word", "span", "ngram", "pmi", "given"]
STRATEGIES: tuple[Strategy, ...] = get_args(Strategy)
"""Every masking strategy, in the order of :data:`Strategy`."""
COMMAND_LINE_STRATEGIES: tuple[Strategy, ...] = tuple(s for s in STRATEGIES if s != "given")
"""The strategies the command line offers: all but 'given', whose spans only the Python API can pass."""
SelectionMode = Literal["bernoulli", "exact"]


@dataclass(frozen=True)
class UnitConfig:
    """What one masking unit is: a token, a word, a span of words, an n-gram, a PMI n-gram, or a given span.

    Phrases (PMI n-grams, ``mask_terms`` occurrences) are found where the text is known (at
    encoding, :mod:`tokenmask.text.phrases`) and reach masking as merged word ids: the words of
    one phrase share one id, so each phrase is one word for the strategy.
    """

    strategy: Strategy = setting(
        "token",
        help="masking unit: 'token' (each token), 'whole_word' (all pieces of a word), 'span' "
        "(SpanBERT: runs of whole words, geometric lengths), 'ngram' (whole-word n-grams, "
        "P(n) ∝ 1/n), 'pmi' (whole words, with the corpus's PMI n-grams as single units; "
        "Levine et al. 2021), 'given' (caller-supplied token spans, e.g. entities; Python API only)",
        choices=COMMAND_LINE_STRATEGIES,
    )
    span_geometric_p: float = setting(
        0.2, help="span strategy: span length in words ~ Geometric(p)", gt=0.0, le=1.0, advanced=True
    )
    span_max_words: int = setting(
        10, help="span strategy: longest span, in words (longer draws are clipped)", ge=1, advanced=True
    )
    ngram_max_n: int = setting(3, help="ngram strategy: largest n; P(n) ∝ 1/n for n = 1..max", ge=1, advanced=True)
    pmi_min_count: int | None = setting(
        None,
        help="pmi strategy: keep word n-grams seen at least this often (none = scaled to the corpus: "
        "one per 100,000 words, between 3 and 11; the paper's 'more than 10' on 3.3 billion words)",
        ge=2,
        advanced=True,
    )
    pmi_vocab_size: int | None = setting(
        None,
        help="pmi strategy: n-grams kept, 50% bigrams, 25% trigrams, 12.5% each 4- and 5-grams (none = "
        "scaled to the corpus as in the paper, 800,000 per 3.2 billion words: one per 4,000 words, at least 100)",
        ge=1,
        advanced=True,
    )
    mask_terms: str | None = setting(
        None,
        help="file of terms, one per line (drug names, products, identifiers): each occurrence, found "
        "case-insensitively on word boundaries, is one unit, and terms come first: every term is "
        "selected (exact: as far as round(p · eligible tokens) goes) and the strategy's other units "
        "fill the rest of the rate",
    )

    def __post_init__(self) -> None:
        check(self)  # against every Strategy, 'given' too: the command line's choices are fewer

    @property
    def needs_words(self) -> bool:
        """Whether the strategy groups tokens into words (and so needs word ids)."""
        return self.strategy in ("whole_word", "span", "ngram", "pmi") or self.mask_terms is not None

    @property
    def needs_phrases(self) -> bool:
        """Whether masking needs merged word ids (PMI n-grams or terms found at encoding)."""
        return self.strategy == "pmi" or self.mask_terms is not None


@dataclass(frozen=True)
class SelectionConfig:
    """How many units become prediction targets."""

    mlm_probability: float = setting(0.15, help="share of eligible tokens to select as targets", gt=0.0, le=1.0)
    mode: SelectionMode = setting(
        "bernoulli",
        flag="selection",
        help="'bernoulli': each unit independently with probability p (as Hugging Face); "
        "'exact': units in random order until round(p · eligible tokens) targets per "
        "sequence (as the original BERT)",
    )
    min_masks_per_sequence: int = setting(
        1, help="at least this many units per sequence that has eligible tokens (0 = no floor)", ge=0, advanced=True
    )
    max_predictions: int | None = setting(
        None,
        help="at most this many target tokens per sequence (whole units only; "
        "min_masks_per_sequence wins if a unit is longer); none = no cap",
        ge=1,
        advanced=True,
    )

    def __post_init__(self) -> None:
        check(self)


@dataclass(frozen=True)
class CorruptionConfig:
    """What happens to a target: [MASK], a random token, or kept as it is."""

    mask_replace_prob: float = setting(0.8, help="share of targets replaced by the mask token", ge=0.0, le=1.0)
    random_replace_prob: float = setting(
        0.1, help="share of targets replaced by a random replaceable token; the rest are kept", ge=0.0, le=1.0
    )
    per_unit: bool = setting(
        False,
        flag="corrupt_per_unit",
        help="decide mask/random/keep once per unit (SpanBERT) instead of once per token (BERT)",
        advanced=True,
    )

    def __post_init__(self) -> None:
        check(self)
        total = self.mask_replace_prob + self.random_replace_prob
        if total > 1.0 + 1e-9:
            raise ValueError(
                "mask_replace_prob + random_replace_prob must be <= 1 (the rest is kept); "
                f"got {self.mask_replace_prob} + {self.random_replace_prob} = {total:g}"
            )

    @property
    def keep_prob(self) -> float:
        """Share of targets left unchanged."""
        return max(0.0, 1.0 - self.mask_replace_prob - self.random_replace_prob)


@dataclass(frozen=True)
class MaskingConfig:
    """Every masking setting: what a unit is, how many units become targets, how targets are corrupted.

    Example::

        MaskingConfig(units=UnitConfig(strategy="span"), selection=SelectionConfig(mlm_probability=0.3))
    """

    units: UnitConfig = setting(factory=UnitConfig, help="what one masking unit is")
    selection: SelectionConfig = setting(factory=SelectionConfig, help="how many units become targets")
    corruption: CorruptionConfig = setting(factory=CorruptionConfig, help="what happens to a target")

    def at_rate(self, mlm_probability: float) -> MaskingConfig:
        """The same settings, selecting ``mlm_probability`` of eligible tokens (e.g. evaluation at 0.15)."""
        return replace(self, selection=replace(self.selection, mlm_probability=mlm_probability))
