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
    "load_encoder": "tokenmask.train.embed",
    "embed_texts": "tokenmask.train.embed",
    "search": "tokenmask.train.embed",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'tokenmask' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
