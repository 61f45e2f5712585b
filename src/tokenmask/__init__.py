"""tokenmask: correct, fast, deterministic token masking for masked-language-model training.

The public names below are imported on first use: ``import tokenmask`` (and
``tokenmask --help``) stays instant, and torch / transformers load only when needed.
"""

import importlib

_EXPORTS = {
    "IGNORE_INDEX": "tokenmask.masking.config",
    "CorruptionConfig": "tokenmask.masking.config",
    "SelectionConfig": "tokenmask.masking.config",
    "UnitConfig": "tokenmask.masking.config",
    "Outcome": "tokenmask.masking.corrupt",
    "MaskedBatch": "tokenmask.masking.mask",
    "mask_tokens": "tokenmask.masking.mask",
    "VocabTables": "tokenmask.masking.vocab",
    "MaskingCollator": "tokenmask.data.collator",
    "MaskingAugmenter": "tokenmask.data.augment",
    "augment_text": "tokenmask.data.augment",
    "MaskingCallback": "tokenmask.data.trainer",
    "LabelledText": "tokenmask.data.labelled",
    "TaggedSentence": "tokenmask.data.labelled",
    "read_labelled_texts": "tokenmask.data.labelled",
    "read_tagged_sentences": "tokenmask.data.labelled",
    "rotten_tomatoes": "tokenmask.data.labelled",
    "prepare_finetune_data": "tokenmask.data.finetune",
    "LengthGroupedBatches": "tokenmask.data.sampler",
    "load_encoder": "tokenmask.train.embed",
    "embed_texts": "tokenmask.train.embed",
    "search": "tokenmask.train.embed",
    "PretrainConfig": "tokenmask.train.config",
    "pretrain": "tokenmask.train.pretrain",
    "FinetuneConfig": "tokenmask.train.config",
    "finetune": "tokenmask.train.finetune",
    "compare_augment": "tokenmask.train.compare",
    "DivergenceWatch": "tokenmask.train.watch",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'tokenmask' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
