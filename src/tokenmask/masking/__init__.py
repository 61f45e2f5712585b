"""The masking engine: pure, vectorised, deterministic. Depends on numpy and torch only.

Pipeline: :func:`eligible_positions` → unit map (:mod:`.units`) → :func:`select_units` →
:func:`choose_outcomes` / :func:`apply_outcomes`; :func:`mask_tokens` runs all of it.
Names are imported lazily, so that ``tokenmask.masking.config`` (used by ``tokenmask --help``)
does not pull in numpy and torch.
"""

import importlib

_EXPORTS = {
    "IGNORE_INDEX": "config",
    "STRATEGIES": "config",
    "CorruptionConfig": "config",
    "MaskingConfig": "config",
    "SelectionConfig": "config",
    "UnitConfig": "config",
    "Outcome": "corrupt",
    "apply_outcomes": "corrupt",
    "choose_outcomes": "corrupt",
    "RowKeys": "keys",
    "Stream": "keys",
    "content_ids": "keys",
    "MaskedBatch": "mask",
    "build_units": "units",
    "eligible_positions": "mask",
    "mask_tokens": "mask",
    "mask_on_device": "torch_mask",
    "select_tokens": "select",
    "select_units": "select",
    "given_units": "units",
    "merge_words": "units",
    "ngram_units": "units",
    "span_units": "units",
    "term_token_units": "units",
    "token_units": "units",
    "word_units": "units",
    "VocabTables": "vocab",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"tokenmask.masking.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'tokenmask.masking' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
