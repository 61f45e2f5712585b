"""tokenmask: correct, fast, deterministic token masking for masked-language-model training.

The public names below are imported on first use: ``import tokenmask`` (and
``tokenmask --help``) stays instant, and torch / transformers load only when needed.
"""

import importlib

_EXPORTS = {
    "IGNORE_INDEX": "tokenmask.masking.config",
    "CorruptionConfig": "tokenmask.masking.config",
    "MaskingConfig": "tokenmask.masking.config",
    "SelectionConfig": "tokenmask.masking.config",
    "UnitConfig": "tokenmask.masking.config",
    "Outcome": "tokenmask.masking.corrupt",
    "MaskedBatch": "tokenmask.masking.mask",
    "mask_tokens": "tokenmask.masking.mask",
    "VocabTables": "tokenmask.masking.vocab",
    "load_tokenizer": "tokenmask.text.tokenizer",
    "train_tokenizer": "tokenmask.text.tokenizer",
    "read_texts": "tokenmask.text.corpus",
    "ReadingConfig": "tokenmask.text.config",
    "Phrases": "tokenmask.text.phrases",
    "read_terms": "tokenmask.text.phrases",
    "TermsConfig": "tokenmask.text.terms",
    "TermTable": "tokenmask.text.terms",
    "find_terms": "tokenmask.text.terms",
    "PmiVocabulary": "tokenmask.blocks.pmi",
    "corpus_vocabulary": "tokenmask.blocks.pmi",
    "masking_phrases": "tokenmask.blocks.pmi",
    "encode_texts": "tokenmask.blocks.encode",
    "pack_texts": "tokenmask.blocks.pack",
    "BlocksConfig": "tokenmask.blocks.config",
    "corpus_blocks": "tokenmask.blocks.build",
    "load_blocks": "tokenmask.blocks.load",
    "MaskingCollator": "tokenmask.collate.collator",
    "MaskingAugmenter": "tokenmask.collate.augment",
    "augment_text": "tokenmask.collate.augment",
    "MaskingCallback": "tokenmask.collate.callback",
    "LabelledText": "tokenmask.labelled.examples",
    "TaggedSentence": "tokenmask.labelled.examples",
    "read_labelled_texts": "tokenmask.labelled.examples",
    "read_tagged_sentences": "tokenmask.labelled.examples",
    "rotten_tomatoes": "tokenmask.labelled.examples",
    "prepare_finetune_data": "tokenmask.labelled.align",
    "LengthGroupedBatches": "tokenmask.labelled.sampler",
    "load_encoder": "tokenmask.use.embed",
    "embed_texts": "tokenmask.use.embed",
    "answer_question": "tokenmask.use.answers",
    "answer_scores": "tokenmask.use.answer_scores",
    "read_questions": "tokenmask.labelled.questions",
    "read_pairs": "tokenmask.labelled.pairs",
    "evaluate_retrieval": "tokenmask.use.retrieval",
    "bm25_scores": "tokenmask.use.retrieval",
    "search": "tokenmask.use.embed",
    "LoopConfig": "tokenmask.train.config",
    "load_model": "tokenmask.train.models",
    "resolve_checkpoint": "tokenmask.train.names",
    "Checkpoint": "tokenmask.train.names",
    "HubConfig": "tokenmask.hub",
    "HubError": "tokenmask.hub",
    "evaluate_mlm": "tokenmask.use.evaluate",
    "fill_mask": "tokenmask.use.fill",
    "load_fill_mask": "tokenmask.use.fill",
    "audit_masking": "tokenmask.use.audit",
    "PretrainConfig": "tokenmask.recipes.config",
    "pretrain_config": "tokenmask.recipes.config",
    "pretrain": "tokenmask.recipes.pretrain",
    "FinetuneConfig": "tokenmask.recipes.config",
    "finetune": "tokenmask.recipes.finetune",
    "StudyConfig": "tokenmask.experiments.study",
    "study_config": "tokenmask.experiments.study",
    "run_study": "tokenmask.experiments.study",
    "StudyGrid": "tokenmask.experiments.grid",
    "write_study_report": "tokenmask.experiments.report",
    "DivergenceWatch": "tokenmask.recipes.watch",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'tokenmask' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
