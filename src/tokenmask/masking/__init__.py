"""The masking engine: pure, vectorised, deterministic. Depends on numpy and torch only.

Pipeline: :func:`eligible_positions` → unit map (:mod:`.units`) → :func:`select_units` →
:func:`choose_outcomes` / :func:`apply_outcomes`; :func:`mask_tokens` runs all of it.
"""

from tokenmask.masking.config import (
    IGNORE_INDEX,
    STRATEGIES,
    CorruptionConfig,
    SelectionConfig,
    UnitConfig,
)
from tokenmask.masking.corrupt import Outcome, apply_outcomes, choose_outcomes
from tokenmask.masking.keys import RowKeys, Stream, content_ids
from tokenmask.masking.mask import MaskedBatch, build_units, eligible_positions, mask_tokens
from tokenmask.masking.select import select_tokens, select_units
from tokenmask.masking.units import (
    given_units,
    ngram_units,
    span_units,
    token_units,
    word_units,
)
from tokenmask.masking.vocab import VocabTables

__all__ = [
    "IGNORE_INDEX",
    "STRATEGIES",
    "CorruptionConfig",
    "MaskedBatch",
    "Outcome",
    "RowKeys",
    "SelectionConfig",
    "Stream",
    "UnitConfig",
    "VocabTables",
    "apply_outcomes",
    "build_units",
    "choose_outcomes",
    "content_ids",
    "eligible_positions",
    "given_units",
    "mask_tokens",
    "ngram_units",
    "select_tokens",
    "select_units",
    "span_units",
    "token_units",
    "word_units",
]
