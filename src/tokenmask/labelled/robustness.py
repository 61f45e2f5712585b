"""Corrupted copies of evaluation texts, for measuring how robust a fine-tuned classifier is.

Unlike :mod:`tokenmask.collate.augment`, which masks *training* token ids as they are batched,
this module rewrites *evaluation* text, word by word, before it is tokenized: words deleted,
words with a typo (two letters swapped, one dropped, inserted or substituted), or words replaced
by the tokenizer's unknown token. Each corrupted text is a pure function of
``(text, kind, rate, seed, index)``: the same seed gives the same text whatever the order or
number of texts, another seed other text.

Words are the whitespace-separated pieces that hold a letter or digit (``"great"``, ``"21st"``,
``"he's"``); punctuation pieces (``","``, ``"--"``) are never corrupted and do not count. A text
with ``n`` words gets ``k = floor(rate * n + u)`` corrupted words, ``u`` uniform in [0, 1) from
the seed: ``floor(rate * n)`` or ``ceil(rate * n)``, ``rate * n`` on average (a 5-word snippet
at 10% loses one word half of the time, rather than never). The words are the first ``k`` of a
seeded permutation, and each word's typo is seeded by its position, so a higher rate corrupts
the same words and more: the 10% set is inside the 20% one.
"""

from __future__ import annotations

import math
import random
import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Kind = Literal["typo", "delete", "unk"]
KINDS: tuple[Kind, ...] = ("typo", "delete", "unk")
"""``typo``: one edit per chosen word; ``delete``: the word is removed; ``unk``: it becomes the unknown token."""

_LETTERS = string.ascii_lowercase
_TYPO_EDITS = ("swap", "drop", "insert", "substitute")


@dataclass(frozen=True)
class Corruption:
    """One corrupted evaluation set: ``Corruption("typo", 0.1)`` puts a typo in 10% of the words.

    Raises:
        ValueError: an unknown kind, or a rate outside (0, 1].
    """

    kind: Kind
    rate: float

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"corruption kind must be one of {', '.join(KINDS)}; got {self.kind!r}")
        if not 0.0 < self.rate <= 1.0:
            raise ValueError(f"corruption rates must be in (0, 1]; got {self.rate} for {self.kind}")

    @property
    def name(self) -> str:
        """``"typo-0.1"``: the set's name in results and folder-free keys."""
        return f"{self.kind}-{self.rate:g}"


DEFAULT_CORRUPTIONS: tuple[Corruption, ...] = (
    *(Corruption("typo", r) for r in (0.05, 0.1, 0.2)),
    *(Corruption("delete", r) for r in (0.1, 0.2, 0.3)),
    *(Corruption("unk", r) for r in (0.1, 0.2, 0.3)),
)
"""The rates robustness studies use: typos in 5/10/20% of words, deletion or unknown token for 10/20/30%."""


def parse_corruptions(specs: Sequence[str]) -> tuple[Corruption, ...]:
    """Corruptions from ``KIND=RATE,RATE`` strings; none gives :data:`DEFAULT_CORRUPTIONS`.

    ``parse_corruptions(["typo=0.05,0.1", "unk=0.2"])  ->  (typo 0.05, typo 0.1, unk 0.2)``

    Raises:
        ValueError: a malformed spec, an unknown kind, a bad rate, or a set given twice (the
            message names no option: the caller's does, e.g. ``--robustness-sets: ...``).
    """
    if not specs:
        return DEFAULT_CORRUPTIONS
    corruptions: list[Corruption] = []
    for spec in specs:
        kind, equals, rates = spec.partition("=")
        if not equals or not rates.strip():
            raise ValueError(f"expected KIND=RATE[,RATE…] with KIND one of {', '.join(KINDS)}; got {spec!r}")
        try:
            values = [float(r) for r in rates.split(",") if r.strip()]
        except ValueError:
            raise ValueError(f"rates must be numbers, e.g. typo=0.05,0.1; got {spec!r}") from None
        corruptions.extend(Corruption(kind.strip(), rate) for rate in values)  # type: ignore[arg-type]
    names = [c.name for c in corruptions]
    if len(set(names)) != len(names):
        raise ValueError(f"each set once, please; got {', '.join(names)}")
    return tuple(corruptions)


def corrupt_text(text: str, corruption: Corruption, *, seed: int, index: int, unk_token: str | None = None) -> str:
    """``text`` with ``corruption`` applied, pieces joined by single spaces.

    ``index`` (the text's position in its set) and ``seed`` decide everything random.
    ``corrupt_text("a truly great film", Corruption("unk", 0.5), seed=0, index=0, unk_token="[UNK]")``
    replaces 2 of the 4 words: e.g. ``"a [UNK] great [UNK]"``.

    Deletion keeps at least one word, so no text becomes empty.

    Raises:
        ValueError: kind ``unk`` without an ``unk_token``.
    """
    if corruption.kind == "unk" and not unk_token:
        raise ValueError("the tokenizer has no unknown token: robustness set 'unk' cannot be built")
    pieces = text.split()
    chosen = chosen_words(pieces, corruption.rate, seed=seed, index=index, kind=corruption.kind)
    out: list[str] = []
    for position, piece in enumerate(pieces):
        if position not in chosen:
            out.append(piece)
        elif corruption.kind == "unk":
            out.append(unk_token or "")
        elif corruption.kind == "typo":
            out.append(typo(piece, random.Random(f"typo:{seed}:{index}:{position}")))
        # delete: nothing appended
    return " ".join(out)


def corrupt_texts(texts: Sequence[str], corruption: Corruption, *, seed: int, unk_token: str | None = None) -> list[str]:
    """:func:`corrupt_text` of each text, ``index`` = its position in ``texts``."""
    return [corrupt_text(t, corruption, seed=seed, index=i, unk_token=unk_token) for i, t in enumerate(texts)]


def is_word(piece: str) -> bool:
    """A piece with a letter or digit: ``"he's" -> True``, ``"--" -> False``."""
    return any(c.isalnum() for c in piece)


def chosen_words(pieces: Sequence[str], rate: float, *, seed: int, index: int, kind: str) -> set[int]:
    """Positions (in ``pieces``) of the words to corrupt: the first ``floor(rate * n + u)`` of a
    seeded permutation of the ``n`` words (at most ``n - 1`` for ``delete``).

    The permutation and ``u`` depend on ``(kind, seed, index)`` only, not on ``rate``, so the
    words chosen at a rate are among those chosen at any higher rate.
    """
    words = [i for i, piece in enumerate(pieces) if is_word(piece)]
    rng = random.Random(f"{kind}:{seed}:{index}")
    rng.shuffle(words)
    count = min(len(words), math.floor(rate * len(words) + rng.random()))
    if kind == "delete":
        count = min(count, len(words) - 1)
    return set(words[: max(count, 0)])


def typo(word: str, rng: random.Random) -> str:
    """``word`` with one typing error on its letters and digits; the result always differs.

    The edit is drawn uniformly: swap two different neighbouring characters, drop one (not the
    word's only one), insert a lowercase letter, substitute one by another lowercase letter. An
    edit the word does not allow (no two different neighbours, one character) becomes a
    substitution. ``typo("film", ...)`` -> e.g. ``"flim"``, ``"fim"``, ``"filkm"``, ``"fiqm"``.
    """
    spots = [i for i, c in enumerate(word) if c.isalnum()]
    edit = rng.choice(_TYPO_EDITS)
    if edit == "swap":
        pairs = [i for i in spots if i + 1 < len(word) and word[i + 1].isalnum() and word[i] != word[i + 1]]
        if pairs:
            i = rng.choice(pairs)
            return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    if edit == "drop" and len(spots) > 1:
        i = rng.choice(spots)
        return word[:i] + word[i + 1 :]
    if edit == "insert":
        i = rng.choice([*spots, spots[-1] + 1])
        return word[:i] + rng.choice(_LETTERS) + word[i:]
    i = rng.choice(spots)
    return word[:i] + rng.choice([c for c in _LETTERS if c != word[i].lower()]) + word[i + 1 :]
