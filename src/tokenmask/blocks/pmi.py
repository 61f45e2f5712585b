"""The PMI vocabulary of a corpus, cached next to the blocks, and the phrases a masking config needs.

The vocabulary (:mod:`tokenmask.text.collocations`) depends on the corpus, the tokenizer's
words and two settings; it is built once and kept as ``ROOT/pmi/KEY.json`` (the key as for
blocks, :mod:`tokenmask.blocks.cache`). :func:`masking_phrases` turns a
:class:`~tokenmask.masking.UnitConfig` into the :class:`~tokenmask.text.phrases.Phrases` to find
at encoding: the listed terms, and the PMI n-grams for strategy 'pmi'.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokenmask.blocks.cache import cache_key, default_cache_root, tokenizer_fingerprint
from tokenmask.files import write_json
from tokenmask.masking.config import UnitConfig
from tokenmask.text.collocations import Collocation, default_min_count, default_vocab_size, rank_collocations
from tokenmask.text.phrases import Phrases, read_terms, text_words

if TYPE_CHECKING:  # annotations only: importing transformers would slow `tokenmask --help`
    from transformers import PreTrainedTokenizerBase

PMI_FORMAT = 1
"""Bumped whenever the vocabulary or its file change, so old files are never read."""


@dataclass(frozen=True)
class PmiVocabulary:
    """The PMI n-grams of a corpus, best first within each n, and how they were chosen."""

    entries: tuple[Collocation, ...]
    words: int
    """Words read in the corpus."""
    min_count: int
    vocab_size: int
    """The size asked for; ``len(entries)`` is smaller when some n has too few candidates."""
    cache: str | None = None
    from_cache: bool = False

    @property
    def ngrams(self) -> tuple[tuple[str, ...], ...]:
        return tuple(entry.words for entry in self.entries)

    def to_json(self) -> dict[str, Any]:
        entries = [{"words": list(e.words), "count": e.count, "pmi": e.pmi} for e in self.entries]
        return {"words": self.words, "min_count": self.min_count, "vocab_size": self.vocab_size, "entries": entries}

    @classmethod
    def from_json(cls, data: dict[str, Any], *, cache: str | None = None, from_cache: bool = False) -> PmiVocabulary:
        entries = tuple(Collocation(tuple(e["words"]), int(e["count"]), float(e["pmi"])) for e in data["entries"])
        return cls(entries, int(data["words"]), int(data["min_count"]), int(data["vocab_size"]), cache, from_cache)


def pmi_vocabulary(
    texts: Callable[[], Iterable[str]],
    tokenizer: PreTrainedTokenizerBase,
    *,
    source: dict[str, Any] | None,
    min_count: int | None = None,
    vocab_size: int | None = None,
    cache_dir: str | Path | None = None,
    use_cache: bool = True,
) -> PmiVocabulary:
    """The PMI vocabulary of the documents ``texts()`` gives, from the cache when it holds it.

    Args:
        texts: called once, when the vocabulary is not cached.
        tokenizer: a fast tokenizer: its words (lower-cased) are the vocabulary's words.
        source: what identifies the texts (e.g. ``{"texts": hash}`` or the files' identity);
            None reads them and caches nothing.
        min_count / vocab_size: None scales them to the corpus (see
            :func:`tokenmask.text.collocations.rank_collocations`).

    Raises:
        ValueError: a slow tokenizer, or a corpus without a single n-gram seen ``min_count`` times.
    """
    key = None
    if use_cache and source is not None:
        settings = {"source": source, "tokenizer": tokenizer_fingerprint(tokenizer), "min_count": min_count,
                    "vocab_size": vocab_size, "pmi_format": PMI_FORMAT}  # fmt: skip
        key = cache_key(settings)
    path = (Path(cache_dir) if cache_dir is not None else default_cache_root()) / "pmi" / f"{key}.json"
    if key is not None and path.is_file():
        return PmiVocabulary.from_json(json.loads(path.read_text(encoding="utf-8")), cache=str(path), from_cache=True)
    entries, words = rank_collocations(text_words(texts(), tokenizer), min_count=min_count, vocab_size=vocab_size)
    vocabulary = PmiVocabulary(
        tuple(entries),
        words,
        default_min_count(words) if min_count is None else min_count,
        default_vocab_size(words) if vocab_size is None else vocab_size,
    )
    if not entries:
        raise ValueError(
            f"the corpus yields no PMI n-gram: {words:,} words, and no run of 2 to 5 of them seen "
            f"{vocabulary.min_count} times or more (give more text, or a lower --pmi-min-count)"
        )
    if key is None:
        return vocabulary
    write_json(path, vocabulary.to_json(), indent=None)  # atomic: a reader sees the whole file or none
    return PmiVocabulary.from_json(vocabulary.to_json(), cache=str(path), from_cache=False)


def masking_phrases(
    units: UnitConfig,
    tokenizer: PreTrainedTokenizerBase,
    vocabulary: Callable[[], PmiVocabulary],
) -> Phrases | None:
    """The phrases masking with ``units`` needs found at encoding, or None (no terms, not 'pmi').

    ``vocabulary`` is called only for strategy 'pmi' (it may build one).

    Raises:
        ValueError: an unreadable or empty terms file, or no PMI vocabulary (see :func:`pmi_vocabulary`).
    """
    if not units.needs_phrases:
        return None
    terms = read_terms(units.mask_terms, tokenizer) if units.mask_terms is not None else ()
    ngrams = vocabulary().ngrams if units.strategy == "pmi" else ()
    return Phrases(terms=terms, ngrams=ngrams)


def corpus_vocabulary(
    corpus: Sequence[str],
    tokenizer: PreTrainedTokenizerBase,
    units: UnitConfig,
    *,
    reading: Any = None,
    cache_dir: str | Path | None = None,
    use_cache: bool = True,
) -> PmiVocabulary:
    """:func:`pmi_vocabulary` of corpus files (cached by their identity, as blocks are), or of the
    bundled plays, one document per scene, when ``corpus`` is empty.

    ``reading``: a :class:`~tokenmask.text.config.ReadingConfig` (None: its defaults).
    """
    from tokenmask.blocks.cache import texts_fingerprint
    from tokenmask.text.config import ReadingConfig
    from tokenmask.text.corpus import expand_paths, fingerprint_sources, read_texts
    from tokenmask.text.resources import shakespeare_scenes

    reading = reading or ReadingConfig()
    settings: dict[str, Any] = dict(
        min_count=units.pmi_min_count, vocab_size=units.pmi_vocab_size, cache_dir=cache_dir, use_cache=use_cache
    )
    if not corpus:
        scenes = shakespeare_scenes()
        return pmi_vocabulary(lambda: scenes, tokenizer, source={"texts": texts_fingerprint(scenes)}, **settings)
    sources = expand_paths(corpus)
    source = {"files": fingerprint_sources(sources), **reading.keywords()}
    return pmi_vocabulary(lambda: read_texts(sources, **reading.keywords()), tokenizer, source=source, **settings)
