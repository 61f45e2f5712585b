"""Frozen, validated settings for the three masking concepts: units, selection, corruption.

Each field is documented where it is declared; the CLI builds its help text from these docs.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

IGNORE_INDEX = -100
"""Label of a position that is not a prediction target (ignored by cross-entropy)."""

Strategy = Literal["token", "whole_word", "span", "ngram", "given"]
STRATEGIES: tuple[str, ...] = ("token", "whole_word", "span", "ngram", "given")
SelectionMode = Literal["bernoulli", "exact"]


def _doc(text: str) -> dict[str, str]:
    return {"help": text}


@dataclass(frozen=True)
class UnitConfig:
    """What one masking unit is: a token, a word, a span of words, an n-gram, or a given span."""

    strategy: Strategy = field(
        default="token",
        metadata=_doc(
            "masking unit: 'token' (each token), 'whole_word' (all pieces of a word), 'span' "
            "(SpanBERT: runs of whole words, geometric lengths), 'ngram' (whole-word n-grams, "
            "P(n) ∝ 1/n), 'given' (caller-supplied token spans, e.g. entities)"
        ),
    )
    span_geometric_p: float = field(
        default=0.2, metadata=_doc("span strategy: span length in words ~ Geometric(p)")
    )
    span_max_words: int = field(
        default=10, metadata=_doc("span strategy: longest span, in words (longer draws are clipped)")
    )
    ngram_max_n: int = field(
        default=3, metadata=_doc("ngram strategy: largest n; P(n) ∝ 1/n for n = 1..max")
    )

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}; got {self.strategy!r}")
        if not 0.0 < self.span_geometric_p <= 1.0:
            raise ValueError(f"span_geometric_p must be in (0, 1]; got {self.span_geometric_p}")
        if self.span_max_words < 1:
            raise ValueError(f"span_max_words must be >= 1; got {self.span_max_words}")
        if self.ngram_max_n < 1:
            raise ValueError(f"ngram_max_n must be >= 1; got {self.ngram_max_n}")

    @property
    def needs_words(self) -> bool:
        """Whether the strategy groups tokens into words (and so needs word ids)."""
        return self.strategy in ("whole_word", "span", "ngram")


@dataclass(frozen=True)
class SelectionConfig:
    """How many units become prediction targets."""

    mlm_probability: float = field(
        default=0.15,
        metadata=_doc("share of eligible tokens to select as targets, in (0, 1]"),
    )
    mode: SelectionMode = field(
        default="bernoulli",
        metadata=_doc(
            "'bernoulli': each unit independently with probability p (as Hugging Face); "
            "'exact': units in random order until round(p · eligible tokens) targets per "
            "sequence (as the original BERT)"
        ),
    )
    min_masks_per_sequence: int = field(
        default=1,
        metadata=_doc("at least this many units per sequence that has eligible tokens (0 = no floor)"),
    )
    max_predictions: int | None = field(
        default=None,
        metadata=_doc(
            "at most this many target tokens per sequence (whole units only; "
            "min_masks_per_sequence wins if a unit is longer); none = no cap"
        ),
    )

    def __post_init__(self) -> None:
        if not 0.0 < self.mlm_probability <= 1.0:
            raise ValueError(f"mlm_probability must be in (0, 1]; got {self.mlm_probability}")
        if self.mode not in ("bernoulli", "exact"):
            raise ValueError(f"selection mode must be 'bernoulli' or 'exact'; got {self.mode!r}")
        if self.min_masks_per_sequence < 0:
            raise ValueError(
                f"min_masks_per_sequence must be >= 0; got {self.min_masks_per_sequence}"
            )
        if self.max_predictions is not None and self.max_predictions < 1:
            raise ValueError(f"max_predictions must be >= 1 or None; got {self.max_predictions}")


@dataclass(frozen=True)
class CorruptionConfig:
    """What happens to a target: [MASK], a random token, or kept as it is."""

    mask_replace_prob: float = field(
        default=0.8, metadata=_doc("share of targets replaced by the mask token")
    )
    random_replace_prob: float = field(
        default=0.1,
        metadata=_doc("share of targets replaced by a random replaceable token; the rest are kept"),
    )
    per_unit: bool = field(
        default=False,
        metadata=_doc(
            "decide mask/random/keep once per unit (SpanBERT) instead of once per token (BERT)"
        ),
    )

    def __post_init__(self) -> None:
        for name in ("mask_replace_prob", "random_replace_prob"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be in [0, 1]; got {value}")
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

    units: UnitConfig = field(default_factory=UnitConfig)
    selection: SelectionConfig = field(default_factory=SelectionConfig)
    corruption: CorruptionConfig = field(default_factory=CorruptionConfig)

    def at_rate(self, mlm_probability: float) -> MaskingConfig:
        """The same settings, selecting ``mlm_probability`` of eligible tokens (e.g. evaluation at 0.15)."""
        return replace(self, selection=replace(self.selection, mlm_probability=mlm_probability))
