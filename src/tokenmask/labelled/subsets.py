"""Smaller training sets drawn from a larger one: seeded, stratified by label, nested.

A learning curve (the metric against the number of labelled examples) needs training sets of
several sizes. :func:`stratified_order` ranks all examples once per seed so that every prefix
keeps the label shares of the whole; :func:`stratified_sample` takes a prefix. The samples of
one seed are therefore *nested*: the 100 examples are among the 300, so a bigger size adds data
instead of drawing other data, and the curve's steps are not blurred by resampling.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Hashable, Sequence


def stratified_order(labels: Sequence[Hashable], *, seed: int) -> list[int]:
    """All indices of ``labels``, ordered so that each prefix is stratified by label.

    Each label's examples are shuffled (seeded), the r-th of a label's ``N_l`` examples gets the
    key ``(r + o_l) / N_l`` with ``o_l`` a seeded offset in [0, 1), and indices are sorted by key
    (seeded tie-break). A prefix holding keys up to ``t`` then holds ``t * N_l - o_l`` rounded up of
    label l, so with two labels each label's count in a prefix of ``n`` is ``n * share_l`` rounded
    down or up (within 1), and within 2 with any number of labels.

    ``stratified_order(["a", "a", "b", "b"], seed=0)``  ->  a permutation that alternates a / b.
    """
    rng = random.Random(f"stratified:{seed}")
    by_label: dict[Hashable, list[int]] = defaultdict(list)
    for index, label in enumerate(labels):
        by_label[label].append(index)
    keyed: list[tuple[float, float, int]] = []
    for label in sorted(by_label, key=repr):  # a fixed label order, so the draws do not depend on the input's
        members = by_label[label]
        rng.shuffle(members)
        offset = rng.random()
        keyed.extend(((rank + offset) / len(members), rng.random(), index) for rank, index in enumerate(members))
    return [index for _, _, index in sorted(keyed)]


def stratified_sample(labels: Sequence[Hashable], size: int | None, *, seed: int) -> list[int]:
    """``size`` indices of ``labels`` (all of them for None or a size at least their number),
    in increasing order: the first ``size`` of :func:`stratified_order`.

    Same seed, same sample; for one seed, a smaller size gives a subset of a larger one.

    Raises:
        ValueError: a size below 1.
    """
    if size is not None and size < 1:
        raise ValueError(f"training-set sizes must be >= 1; got {size}")
    if size is None or size >= len(labels):
        return list(range(len(labels)))
    return sorted(stratified_order(labels, seed=seed)[:size])
