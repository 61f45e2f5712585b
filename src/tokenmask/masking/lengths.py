"""Unit lengths: how many words a span or an n-gram covers, defined once for both backends and the audit.

Span lengths are Geometric(p) in words, clipped (defined by their survival ``(1 - p)^k``);
n-gram lengths have ``P(n) ∝ 1/n`` (defined by those weights). From each definition come the
table that the samplers of :mod:`.units` and :mod:`.torch_units` search (inverse CDF by
comparisons only, so both backends draw the same lengths bit for bit) and the probabilities of
:func:`unit_length_probabilities` (the audit's expected lengths).
"""

from __future__ import annotations

import numpy as np

from tokenmask.masking.config import UnitConfig


def geometric_survival(p: float, max_length: int) -> np.ndarray:
    """The span lengths' definition: ``P(L > k) = (1 - p)^k`` for ``k = 0, …, max_length - 1``.

    ``L`` is Geometric(p) on {1, 2, …} clipped to ``max_length`` (the tail mass sits on
    ``max_length``, so ``P(L > max_length - 1)`` is ``P(L = max_length)``). ``(max_length,)``
    float64, descending from 1.0; zeros after the first for ``p = 1`` (every length is 1).

    ``geometric_survival(0.5, 3)  ->  [1.0, 0.5, 0.25]``
    """
    keep = max(0.0, 1.0 - p)
    return np.array([keep**k for k in range(max_length)], dtype=np.float64)


def geometric_bounds(p: float, max_length: int) -> np.ndarray:
    """The span sampler's table: ``(1 - p)^k`` for ``k = max_length - 1, …, 1``, ascending float64
    (empty for ``max_length = 1``). :func:`~tokenmask.masking.units.geometric_lengths` counts the
    entries at or above ``1 - u``.

    ``geometric_bounds(0.5, 3)  ->  [0.25, 0.5]``
    """
    return np.ascontiguousarray(geometric_survival(p, max_length)[:0:-1])


def ngram_weights(max_n: int) -> np.ndarray:
    """The n-gram lengths' definition: ``P(n) ∝ 1/n`` for ``n = 1, …, max_n``; ``(max_n,)`` float64.

    ``ngram_weights(3)  ->  [1.0, 0.5, 0.333…]``
    """
    return 1.0 / np.arange(1, max_n + 1)


def ngram_cdf(max_n: int) -> np.ndarray:
    """The n-gram sampler's table: the cumulative distribution of n, ``(max_n,)`` float64, last
    entry exactly 1.0. :func:`~tokenmask.masking.units.ngram_lengths` counts the entries at or below ``u``.

    ``ngram_cdf(3)  ->  [6/11, 9/11, 1.0]``
    """
    weights = ngram_weights(max_n)
    cdf = np.cumsum(weights) / weights.sum()
    cdf[-1] = 1.0
    return cdf


def unit_length_probabilities(config: UnitConfig) -> np.ndarray | None:
    """``P(a unit has k words)`` for ``k = 1, 2, …``: ``(K,)`` float64, summing to 1.

    span: Geometric(``span_geometric_p``) clipped to ``span_max_words``, ``p (1 - p)^(k - 1)``
    below the clip and the tail on it; ngram: ``P(n) ∝ 1/n`` for n up to ``ngram_max_n``.
    None for the other strategies, which draw no lengths.

    ``UnitConfig("ngram", ngram_max_n=3)  ->  [6/11, 3/11, 2/11]``;
    ``UnitConfig("span", span_geometric_p=0.5, span_max_words=3)  ->  [0.5, 0.25, 0.25]``
    """
    if config.strategy == "span":
        survival = geometric_survival(config.span_geometric_p, config.span_max_words)
        return np.append(config.span_geometric_p * survival[:-1], survival[-1])  # P(L = k) = p P(L > k - 1)
    if config.strategy == "ngram":
        weights = ngram_weights(config.ngram_max_n)
        return weights / weights.sum()
    return None
