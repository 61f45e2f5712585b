"""A run's blocks from its settings: the corpus given (or the bundled plays), read and packed by :mod:`.build`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tokenmask.blocks.build import build_blocks, corpus_blocks
from tokenmask.blocks.config import BlocksConfig
from tokenmask.blocks.entry import PretrainBlocks
from tokenmask.masking.config import UnitConfig
from tokenmask.text.config import ReadingConfig
from tokenmask.text.resources import shakespeare_scenes
from tokenmask.text.streaming import DocumentStream, is_hub_name

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from tokenmask.blocks.pmi import PmiVocabulary
    from tokenmask.text.phrases import Phrases


def load_blocks(
    corpus: Sequence[str],
    tokenizer: PreTrainedTokenizerBase,
    *,
    reading: ReadingConfig,
    blocks: BlocksConfig,
    phrases: Phrases | None = None,
) -> PretrainBlocks:
    """A run's training and validation blocks: of ``corpus`` (:func:`corpus_blocks`), or of the
    bundled plays, one document per scene, when ``corpus`` is empty; from the block cache when it
    holds them. A Hub dataset (``hf:NAME``) is read once through ``datasets`` and not cached
    (nothing tells when it changes). With ``phrases`` (PMI n-grams, terms) the blocks carry the
    merged word ids."""
    settings: dict[str, Any] = dict(
        block_length=blocks.max_length, validation_share=blocks.validation_share, cache_dir=blocks.cache_dir,
        use_cache=not blocks.no_cache, num_proc=blocks.num_proc, phrases=phrases,
    )  # fmt: skip
    if corpus and is_hub_name(corpus[0]):
        return build_blocks(DocumentStream(tuple(corpus), reading).documents(), tokenizer, **settings)
    if corpus:
        return corpus_blocks(corpus, tokenizer, **reading.keywords(), **settings)
    return build_blocks(shakespeare_scenes(), tokenizer, **settings)


def load_phrases(
    corpus: Sequence[str],
    tokenizer: PreTrainedTokenizerBase,
    units: UnitConfig,
    *,
    reading: ReadingConfig,
    blocks: BlocksConfig,
) -> Phrases | None:
    """The phrases masking with ``units`` finds in a run's corpus: its terms, and for strategy
    'pmi' the corpus's PMI vocabulary (cached next to the blocks); None when neither is asked for."""
    from tokenmask.blocks.pmi import corpus_vocabulary, masking_phrases

    def vocabulary() -> PmiVocabulary:
        return corpus_vocabulary(
            corpus, tokenizer, units, reading=reading, cache_dir=blocks.cache_dir, use_cache=not blocks.no_cache
        )

    return masking_phrases(units, tokenizer, vocabulary)
