"""A domain's terms, found automatically: the words and short phrases a corpus uses far more often than English does.

Where :mod:`tokenmask.text.collocations` ranks n-grams by how much their words stick together
(PMI), this ranks words and phrases by how much more often the corpus uses them than general
English (``wordfreq``'s frequencies, or a background corpus given). The result is the terms
file that ``--mask-terms`` reads (:func:`tokenmask.text.phrases.read_terms`), best first.
No tokenizer is needed: words are split by :func:`corpus_words`.
"""

from __future__ import annotations

import importlib.metadata
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenmask.files import write_text
from tokenmask.settings import check, setting
from tokenmask.text.config import ReadingConfig

Words = tuple[str, ...]
Progress = Callable[[int, int | None], None]
"""Called with ``(documents read, documents in all or None)`` as the corpus is read."""

_TOKEN = re.compile(r"[^\W_]+(?:['-][^\W_]+)*|[^\w\s]|_")
"""A word (letters and digits, joined by inner apostrophes and hyphens: ``o'er``, ``x-ray``), or one punctuation mark."""


@dataclass(frozen=True)
class TermsConfig:
    """Which corpus's terms to find, against which background (``tokenmask terms``: :func:`find_terms`)."""

    corpus: tuple[str, ...] = setting(
        (), positional=True, help="files, folders or globs (.txt/.md: --document-boundary; .jsonl: --text-field), or one "
        "hf:NAME; none = the bundled Shakespeare plays, one document per scene, as pretrain reads them",
    )  # fmt: skip
    background: str | None = setting(
        None,
        metavar="CORPUS",
        help="general text (a file, folder or glob, read as CORPUS is) whose word and phrase frequencies replace "
        "wordfreq's English ones",
    )
    top: int = setting(200, help="terms kept and written, best first", ge=1)
    min_count: int | None = setting(
        None,
        help="a term must occur at least this often in CORPUS (none = scaled to the corpus as --pmi-min-count: "
        "one per 100,000 words, between 3 and 11)",
        ge=2,
    )
    max_words: int = setting(
        3, help="longest term, in words; phrases are the corpus's PMI n-grams (1 = single words only)", ge=1, le=3
    )
    min_score: float = setting(
        1.0, help="a term must score at least this: 1 = twice as frequent as in the background, 0 = as frequent", ge=0
    )
    smoothing: float = setting(
        1.0,
        help="added to both frequencies per million words before their ratio is taken (Kilgarriff's k): higher "
        "favours frequent terms, lower rare ones",
        gt=0,
    )
    output: str = setting("terms.txt", help="the terms file to write, one term per line, best first (for --mask-terms)")
    reading: ReadingConfig = setting(factory=ReadingConfig, help="reading")

    def __post_init__(self) -> None:
        check(self)
        if not self.output.strip():
            raise ValueError("output must name a file; got ''")
        if self.background is not None and not self.background.strip():
            raise ValueError("background must name a corpus (a file, folder or glob); got ''")
        if Path(self.output).is_dir():
            raise ValueError(f"output {self.output} is a folder: name the file to write, e.g. {Path(self.output) / 'terms.txt'}")
        sources = (*self.corpus, *([self.background] if self.background else []))
        if any(Path(self.output).resolve() == Path(source).resolve() for source in sources):  # it would be overwritten
            raise ValueError(f"output {self.output} is a file of the corpus or the background: name another file to write")


@dataclass(frozen=True)
class Term:
    """One term: its words, how often the corpus has it, how often the background does, and its score."""

    words: Words
    count: int
    """Occurrences in the corpus."""
    per_million: float
    """Occurrences per million words of the corpus."""
    background_per_million: float
    """Occurrences per million words of the background (0: never seen there)."""
    score: float
    """``log2((per_million + k) / (background_per_million + k))``, k the smoothing: 1 is twice as frequent
    (a background corpus that lacks the term counts it as seen once: :func:`find_terms`)."""

    @property
    def text(self) -> str:
        """The term as the terms file writes it: ``("quantum", "flux") -> "quantum flux"``."""
        return " ".join(self.words)


@dataclass(frozen=True)
class TermTable:
    """The terms of a corpus, best first, and how they were found."""

    entries: tuple[Term, ...]
    words: int
    """Words read in the corpus (punctuation not counted)."""
    min_count: int
    background: str
    """What the background was: ``"wordfreq 3.1.1 English"`` or the background corpus given."""
    background_words: int | None
    """Words read in the background corpus; None for wordfreq."""

    def write(self, path: str | Path) -> Path:
        """Write the terms file ``--mask-terms`` reads, one term per line, best first, atomically
        (:func:`tokenmask.files.write_text`); returns the path."""
        return write_text(path, "".join(f"{entry.text}\n" for entry in self.entries))

    def to_json(self) -> dict[str, Any]:
        entries = [
            {"term": e.text, "count": e.count, "per_million": e.per_million,
             "background_per_million": e.background_per_million, "score": e.score}
            for e in self.entries
        ]  # fmt: skip
        return {"words": self.words, "min_count": self.min_count, "background": self.background,
                "background_words": self.background_words, "entries": entries}  # fmt: skip


def find_terms(config: TermsConfig, *, progress: Progress | None = None) -> TermTable:
    """The best ``config.top`` terms of ``config.corpus``: the words and phrases it uses far more often than the background.

    Candidates: the words seen at least ``min_count`` times (not numbers, not single characters)
    and the corpus's PMI n-grams of 2 to ``max_words`` words
    (:func:`~tokenmask.text.collocations.rank_collocations`, with the same ``min_count``). Score:
    the log ratio of the two frequencies, smoothed as in Kilgarriff's "simple maths for keywords"
    (2009): ``score = log2((f + k) / (b + k))``, ``f`` and ``b`` per million words of the corpus
    and of the background, ``k`` the ``smoothing`` (1). Kept: a score of ``min_score`` or more
    (1: twice as frequent), best first (ties: the more frequent).

    Why this smoothing: ``k`` bounds what a term the background never saw can score (wordfreq
    knows no ``zorblax``) by its own frequency, ``log2(f + 1)``: 1 occurrence in a million words
    scores 1, so rare garbage cannot top the list; in a small corpus, where one occurrence is many
    per million, ``min_count`` keeps typos out. A larger ``k`` favours frequent terms. A background
    corpus that lacks a term counts it as seen once there (absence from a sample is weak evidence).
    No stopword list is needed: a common word (``the``) is about as frequent in the background,
    so its score is near 0.

    The background is wordfreq's English, where a phrase's frequency is estimated from its words
    (the half-harmonic mean ``1 / Σ 1/b(word)``, just under its rarest word's): a phrase whose
    words occur only together outranks them, one whose words are also used apart ranks after its
    rarest word. With ``config.background``, the counts of words and phrases in that corpus.

    Example: a corpus of 10,000 words with ``zorblax`` 20 times (2,000 per million, background
    0) and ``the`` 600 times (60,000 per million, wordfreq 53,700): ``zorblax`` scores
    ``log2(2001 / 1) = 10.97``, ``the`` ``log2(60001 / 53701) = 0.16``.

    Args:
        config: the corpus, background and settings.
        progress: called with ``(documents read, total or None)`` while the corpus is read.

    Returns:
        The table; ``table.write(path)`` writes the terms file.

    Raises:
        FileNotFoundError: a corpus or background path that matches nothing.
        ValueError: an unreadable or empty corpus or background; no word or phrase that occurs
            ``min_count`` times, or none of those that scores ``min_score``.
    """
    from tokenmask.text.collocations import default_min_count, rank_collocations  # numpy: not for `tokenmask --help`

    if config.background is not None:
        _background_texts(config)  # a missing background is named before the corpus is read
    tally = _Tally()
    texts, total = _corpus_texts(config.corpus, config.reading)
    documents = tally.through(_tokenized(texts, progress, total))
    phrases = rank_collocations(documents, min_count=config.min_count, max_n=config.max_words)[0] if config.max_words > 1 else []
    for _ in documents:  # read to the end where PMI did not (single words only)
        pass
    corpus = " ".join(config.corpus) or "(the bundled plays)"
    if tally.words == 0:
        raise ValueError(f"the corpus {corpus} holds no words")
    min_count = default_min_count(tally.tokens) if config.min_count is None else config.min_count  # as PMI scales its own
    candidates: dict[Words, int] = {(w,): c for w, c in tally.counts.items() if c >= min_count and _is_term_word(w)}
    candidates.update({p.words: p.count for p in phrases if all(map(_has_letter, p.words))})
    if not candidates:
        raise ValueError(
            f"no word or phrase of the corpus {corpus} occurs {min_count} times or more ({tally.words:,} words read): "
            "give more text, or a lower --min-count"
        )
    background = _background(config, set(candidates))
    scale = 1e6 / tally.words
    scored = [_term(words, count, count * scale, background, config.smoothing) for words, count in candidates.items()]
    kept = sorted((t for t in scored if t.score >= config.min_score), key=lambda t: (-t.score, -t.count, t.words))
    if not kept:
        raise ValueError(
            f"no word or phrase of the corpus {corpus} is much more frequent there than in {background.name}: of the "
            f"{len(scored):,} seen {min_count} times or more, none scores {config.min_score:g} or more (--min-score)"
        )
    return TermTable(tuple(kept[: config.top]), tally.words, min_count, background.name, background.words)


@dataclass
class _Tally:
    """The corpus's word counts, taken as its documents pass on to PMI: one pass over the corpus."""

    counts: Counter[str] = field(default_factory=Counter)
    words: int = 0
    """Tokens with a letter or digit."""
    tokens: int = 0
    """Punctuation marks too: what PMI counts, and scales its min_count by."""

    def through(self, documents: Iterable[list[str]]) -> Iterator[list[str]]:
        for tokens in documents:
            words = [t for t in tokens if _has_alnum(t)]
            self.counts.update(words)
            self.words += len(words)
            self.tokens += len(tokens)
            yield tokens


def corpus_words(text: str) -> list[str]:
    """The lower-cased words of a text, and its punctuation marks, one a token: words are runs of
    letters and digits joined by inner apostrophes and hyphens, without a possessive ``'s``.

    ``"O'er Falstaff's well-beloved X-ray, 2 men."  ->  ["o'er", "falstaff", "well-beloved", "x-ray", ",", "2", "men", "."]``

    Punctuation stays, as a token without a letter or digit, so that no PMI n-gram spans it.
    """
    words = _TOKEN.findall(text.lower().replace("\u2019", "'"))
    return [w[:-2] if w.endswith("'s") else w for w in words]


def _tokenized(texts: Iterable[str], progress: Progress | None, total: int | None) -> Iterator[list[str]]:
    number = 0
    for number, text in enumerate(texts, start=1):
        yield corpus_words(text)
        if progress is not None and number % 1000 == 0:
            progress(number, total)
    if progress is not None:
        progress(number, total)


def _corpus_texts(corpus: Sequence[str], reading: ReadingConfig) -> tuple[Iterable[str], int | None]:
    """The non-blank documents of ``corpus`` (:func:`~tokenmask.text.streaming.corpus_documents`),
    and their number when known (the bundled plays)."""
    from tokenmask.text.streaming import corpus_documents

    documents = corpus_documents(corpus, reading)
    return documents, len(documents) if isinstance(documents, list) else None


@dataclass(frozen=True)
class _Background:
    """General text to compare with: each term's frequency there, per million words."""

    name: str
    words: int | None
    """Words read in a background corpus; None for wordfreq."""
    per_million: Callable[[Words], float]
    floor: float = 0.0
    """Per million, what a term never seen there counts as in the score: one occurrence, for a
    background corpus (absence from a sample is weak evidence: 10,000 words cannot tell apart
    what is rarer than 100 per million). 0 for wordfreq, whose lists go down to 0.01 per million,
    far under the smoothing."""


def _background(config: TermsConfig, wanted: set[Words]) -> _Background:
    """The background of ``config``: wordfreq's English, or the counts of ``wanted`` in ``config.background``."""
    if config.background is None:
        try:
            from wordfreq import word_frequency
        except ImportError:
            raise ValueError("finding terms needs the wordfreq package: pip install wordfreq") from None
        name = f"wordfreq {importlib.metadata.version('wordfreq')} English"
        return _Background(name, None, lambda terms: 1e6 * word_frequency(" ".join(terms), "en"))
    texts = _background_texts(config)
    try:
        counts, words = _count_terms(map(corpus_words, texts), wanted)
    except (OSError, ValueError) as error:  # met while reading: a binary file, a line too long
        raise ValueError(f"the background corpus: {error}") from None
    if words == 0:
        raise ValueError(f"the background corpus {config.background} holds no words")
    return _Background(config.background, words, lambda terms: 1e6 * counts[terms] / words, floor=1e6 / words)


def _background_texts(config: TermsConfig) -> Iterable[str]:
    """The documents of ``config.background``, its files found now (read as the result is).

    Raises:
        ValueError: a path that matches nothing, or an unsupported file, named as the background's.
    """
    from tokenmask.text.corpus import expand_paths
    from tokenmask.text.streaming import is_hub_name

    source = str(config.background)
    try:
        if not is_hub_name(source):
            expand_paths([source])
        return _corpus_texts((source,), config.reading)[0]
    except (OSError, ValueError) as error:
        raise ValueError(f"the background corpus: {error}") from None


def _count_terms(documents: Iterable[list[str]], wanted: set[Words]) -> tuple[Counter[Words], int]:
    """How often each of ``wanted`` occurs in ``documents`` (never across punctuation), and the words read.

    ``[["new", "york", ",", "york"]]``, wanted ``{("york",), ("new", "york")}``  ->  ``({("york",): 2, ("new", "york"): 1}, 3)``
    """
    firsts = {w[0] for w in wanted}
    longest = max(map(len, wanted))
    counts: Counter[Words] = Counter()
    words = 0
    for tokens in documents:
        words += sum(map(_has_alnum, tokens))
        for i, token in enumerate(tokens):
            if token not in firsts:
                continue
            for n in range(1, min(longest, len(tokens) - i) + 1):
                if tuple(tokens[i : i + n]) in wanted:
                    counts[tuple(tokens[i : i + n])] += 1
    return counts, words


def _term(words: Words, count: int, per_million: float, background: _Background, k: float) -> Term:
    seen = background.per_million(words)
    return Term(words, count, per_million, seen, math.log2((per_million + k) / (max(seen, background.floor) + k)))


def _has_alnum(token: str) -> bool:
    return any(c.isalnum() for c in token)


def _has_letter(word: str) -> bool:
    return any(c.isalpha() for c in word)


def _is_term_word(word: str) -> bool:
    """Not a number (``1599``), not a single character (``i``, ``o``)."""
    return len(word) > 1 and _has_letter(word)
