"""tokenmask: correct, fast, deterministic token masking for masked-language-model training."""

from tokenmask.masking import (
    IGNORE_INDEX,
    CorruptionConfig,
    MaskedBatch,
    Outcome,
    SelectionConfig,
    UnitConfig,
    VocabTables,
    mask_tokens,
)

__all__ = [
    "IGNORE_INDEX",
    "CorruptionConfig",
    "MaskedBatch",
    "MaskingAugmenter",
    "MaskingCollator",
    "Outcome",
    "SelectionConfig",
    "UnitConfig",
    "VocabTables",
    "augment_text",
    "mask_tokens",
]


def __getattr__(name: str):
    # The collators need transformers; import them only when asked, so that importing
    # tokenmask (and `tokenmask --help`) stays light.
    if name == "MaskingCollator":
        from tokenmask.data.collator import MaskingCollator

        return MaskingCollator
    if name in ("MaskingAugmenter", "augment_text"):
        from tokenmask.data import augment

        return getattr(augment, name)
    raise AttributeError(f"module 'tokenmask' has no attribute {name!r}")
