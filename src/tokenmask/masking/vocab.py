"""Vocabulary lookup tables for masking: which ids are protected, which may be drawn.

Built once (from a tokenizer by :func:`tokenmask.text.token_tables.tables_from_tokenizer`, or by
hand from ids); masking then does array lookups, never per-row Python calls.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class VocabTables:
    """Lookup tables over a vocabulary of ``V`` ids.

    Attributes:
        mask_token_id: id that replaces a masked target.
        protected: ``(V,)`` bool; True for ids that are never selected (special, added special,
            padding and user-given ids). Ids at or above ``V`` are not protected: masking
            treats them as ordinary tokens.
        replaceable: ``(R,)`` int64 sorted ids that a random replacement may draw (no
            protected ids, no ``[unused*]`` placeholders); may be empty, and masking then keeps
            the targets a random replacement would have changed
            (:func:`~tokenmask.masking.mask.mask_tokens`).
        replace_cdf: ``(R,)`` float64 cumulative distribution over ``replaceable`` for
            frequency-weighted draws, or None for uniform draws.
    """

    mask_token_id: int
    protected: np.ndarray
    replaceable: np.ndarray
    replace_cdf: np.ndarray | None = None

    def __post_init__(self) -> None:
        size = self.protected.shape[0]
        if not 0 <= self.mask_token_id < size:
            raise ValueError(f"mask_token_id {self.mask_token_id} is outside the vocabulary (size {size})")
        if self.protected[self.replaceable].any():
            raise ValueError("replaceable ids must not include protected ids")
        if self.replace_cdf is not None and self.replace_cdf.shape != self.replaceable.shape:
            raise ValueError("replace_cdf must have one entry per replaceable id")

    @property
    def size(self) -> int:
        """Number of ids ``V``."""
        return int(self.protected.shape[0])

    @classmethod
    def from_ids(
        cls,
        vocab_size: int,
        *,
        mask_token_id: int,
        protected_ids: Sequence[int] | np.ndarray,
        excluded_from_replacement: Sequence[int] | np.ndarray = (),
        replace_counts: np.ndarray | None = None,
    ) -> VocabTables:
        """Tables from plain ids.

        Args:
            vocab_size: number of ids.
            mask_token_id: the mask token (protected automatically).
            protected_ids: ids never selected and never drawn.
            excluded_from_replacement: further ids never drawn (e.g. ``[unused*]``).
            replace_counts: ``(V,)`` unigram counts; random replacements are then drawn in
                proportion to them (ids with count 0 are never drawn). None = uniform.

        ``from_ids(6, mask_token_id=3, protected_ids=[0, 1])`` protects 0, 1, 3 and draws
        replacements uniformly from ``[2, 4, 5]``.
        """
        if not 0 <= mask_token_id < vocab_size:
            raise ValueError(f"mask_token_id {mask_token_id} is outside the vocabulary (size {vocab_size})")
        protected_ids = np.asarray(protected_ids, dtype=np.int64)
        if protected_ids.size and (protected_ids.min() < 0 or protected_ids.max() >= vocab_size):
            raise ValueError(f"protected ids must lie in [0, {vocab_size}) (the vocabulary)")
        protected = np.zeros(vocab_size, dtype=bool)
        protected[protected_ids] = True
        protected[mask_token_id] = True
        drawable = ~protected
        drawable[np.asarray(excluded_from_replacement, dtype=np.int64)] = False
        cdf = None
        if replace_counts is not None:
            counts = np.asarray(replace_counts, dtype=np.float64)
            if counts.shape != (vocab_size,) or np.any(counts < 0):
                raise ValueError(f"replace_counts must be {vocab_size} non-negative numbers")
            drawable &= counts > 0
            weights = counts[drawable]
            if weights.size:
                cdf = np.cumsum(weights) / weights.sum()
                cdf[-1] = 1.0
        return cls(
            mask_token_id=mask_token_id,
            protected=protected,
            replaceable=np.flatnonzero(drawable).astype(np.int64),
            replace_cdf=cdf,
        )

    def draw(self, uniform: np.ndarray) -> np.ndarray:
        """Replacement ids for uniform draws in ``[0, 1)``; same shape, int64.

        Raises:
            ValueError: the vocabulary has no replaceable id.
        """
        if self.replaceable.size == 0:
            raise ValueError("the vocabulary has no replaceable (non-special) id to draw")
        if self.replace_cdf is None:
            index = (uniform * self.replaceable.size).astype(np.int64)
        else:
            index = np.searchsorted(self.replace_cdf, uniform, side="right")
        return self.replaceable[np.minimum(index, self.replaceable.size - 1)]


def warn_of_unknown_ids(vocab_size: int) -> None:
    """Warn (once per process and vocabulary size, as Python's warnings go) that ids beyond the
    vocabulary are masked as ordinary tokens: right for Hugging Face's test data, a sign of the
    wrong vocabulary when examples were encoded with another tokenizer."""
    warnings.warn(
        f"input ids beyond the vocabulary's {vocab_size} ids are masked as ordinary tokens and never drawn as "
        "replacements; if the examples were encoded with another tokenizer, mask them with that one",
        UserWarning,
        stacklevel=2,
    )
