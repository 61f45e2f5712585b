"""Looking at masking before training with it: texts masked token by token, a corpus measured, a PMI vocabulary, terms.

What ``tokenmask mask``, ``stats``, ``pmi`` and ``terms`` show, as library calls: :func:`preview_masking`
masks a few texts and describes every token (original, input, outcome, label);
:func:`audit_corpus` masks a corpus and counts what happened, against the configured rates
(:mod:`tokenmask.use.audit`); :func:`pmi_table` builds (or reads from the cache) the n-grams
that strategy ``pmi`` masks as units; :func:`~tokenmask.text.terms.find_terms` ranks the
corpus's terms for ``--mask-terms``. None needs a model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from tokenmask.blocks.pmi import PmiVocabulary
from tokenmask.text.terms import TermTable, find_terms
from tokenmask.use.audit import MaskingAudit, audit_masking
from tokenmask.use.config import AuditConfig, MaskPreviewConfig, PmiTableConfig

__all__ = ["MaskingAudit", "PmiVocabulary", "TermTable", "audit_corpus", "find_terms", "pmi_table", "preview_masking"]


def preview_masking(config: MaskPreviewConfig) -> list[dict[str, Any]]:
    """Mask the texts of ``config`` (ids 0, 1, …) and describe each.

    Returns one dict per text: ``text``, ``tokens`` (before) and ``inputs`` (after), each
    token's ``outcomes`` (``none``, ``mask``, ``random``, ``keep``) and ``labels`` (-100 where
    not a target). For strategy ``pmi`` the n-grams are those of the bundled plays (a few lines
    hold too few to find any).

    Raises:
        ValueError: no text to mask, an unreadable file or tokenizer, a masking setting out of range.
    """
    from tokenmask.blocks.encode import encode_texts
    from tokenmask.blocks.pmi import corpus_vocabulary, masking_phrases
    from tokenmask.collate.collator import MaskingCollator
    from tokenmask.masking.corrupt import Outcome
    from tokenmask.text.corpus import read_texts
    from tokenmask.text.resources import sample_text
    from tokenmask.text.tokenizer import load_tokenizer

    texts = list(read_texts([config.file])) if config.file else [" ".join(config.text)] if config.text else sample_text()
    if not texts:
        raise ValueError("nothing to mask: the input holds no text")
    tokenizer = load_tokenizer(config.tokenizer.name)
    collator = MaskingCollator.from_config(tokenizer, config.masking, seed=config.seed)
    units = config.masking.units
    phrases = masking_phrases(units, tokenizer, lambda: corpus_vocabulary((), tokenizer, units))
    encoded = encode_texts(texts, tokenizer, max_length=config.blocks.max_length, phrases=phrases)
    batch, masked = collator.mask(encoded)
    examples = []
    for row, text in enumerate(texts):
        length = int(batch.lengths[row])
        original = batch.input_ids[row, :length].tolist()
        corrupted = masked.input_ids[row, :length].tolist()
        examples.append(
            {
                "text": text,
                "tokens": tokenizer.convert_ids_to_tokens(original),
                "inputs": tokenizer.convert_ids_to_tokens(corrupted),
                "outcomes": [Outcome(o).name.lower() for o in masked.outcome[row, :length].tolist()],
                "labels": masked.labels[row, :length].tolist(),
            }
        )
    return examples


def pmi_table(config: PmiTableConfig) -> PmiVocabulary:
    """The PMI vocabulary of ``config.corpus``, as ``--strategy pmi`` uses it (built, or read from the cache).

    Raises:
        ValueError: an unreadable corpus or tokenizer, or a corpus too small for any n-gram.
    """
    from tokenmask.blocks.pmi import corpus_vocabulary
    from tokenmask.text.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(config.tokenizer.name)
    return corpus_vocabulary(
        config.corpus, tokenizer, config.units, reading=config.reading, cache_dir=config.blocks.cache_dir,
        use_cache=not config.blocks.no_cache,
    )  # fmt: skip


def audit_corpus(config: AuditConfig, *, on_batch: Callable[[int], None] | None = None) -> MaskingAudit:
    """``tokenmask stats``: mask ``config.corpus`` (or the bundled plays, one document per scene)
    with ``config.masking`` and count what happened (:func:`~tokenmask.use.audit.audit_masking`).

    Texts are read one per line (JSON records: ``config.reading.text_field``) and packed into
    full blocks as pre-training packs them, or with ``pack`` off masked one by one, truncated.
    ``on_batch`` gets the number of tokens of each batch (progress).

    Raises:
        ValueError: an unreadable corpus or tokenizer, a corpus without text, a setting out of range.
    """
    from tokenmask.blocks.encode import encode_lazily
    from tokenmask.blocks.pack import pack_texts
    from tokenmask.blocks.pmi import corpus_vocabulary, masking_phrases
    from tokenmask.collate.collator import MaskingCollator
    from tokenmask.text.corpus import read_texts
    from tokenmask.text.resources import shakespeare_scenes
    from tokenmask.text.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(config.tokenizer.name)
    collator = MaskingCollator.from_config(tokenizer, config.masking, seed=config.seed)
    field = config.reading.text_field
    texts = read_texts(config.corpus, text_field=field) if config.corpus else shakespeare_scenes()
    reading = replace(config.reading, document_boundary="line")  # as read_texts reads
    units = config.masking.units
    phrases = masking_phrases(units, tokenizer, lambda: corpus_vocabulary(config.corpus, tokenizer, units, reading=reading))
    length = config.blocks.max_length
    examples: Iterable[Mapping[str, Any]]
    if config.pack:
        examples = pack_texts(texts, tokenizer, block_length=length, phrases=phrases)
    else:
        examples = encode_lazily(texts, tokenizer, max_length=length, phrases=phrases)
    return audit_masking(examples, collator, batch_size=config.batch_size, max_tokens=config.max_tokens, on_batch=on_batch)
