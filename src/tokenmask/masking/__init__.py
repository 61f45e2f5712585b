"""The masking engine: pure, vectorised, deterministic. Depends on numpy and torch only.

Pipeline: :func:`eligible_positions` → unit map (:mod:`.units`) → :func:`select_units` →
:func:`choose_outcomes` / :func:`apply_outcomes`; :func:`mask_tokens` runs all of it.
Two backends, module for module: ``keys``, ``vocab``, ``units``, ``select``, ``corrupt`` and
``mask`` in numpy, and their twins ``torch_keys``, …, ``torch_mask`` (:func:`mask_on_device`),
which take only public names from them; ``config`` and ``lengths`` serve both.

Changing a strategy is one edit where the definition is shared and two where it is array code:

- one edit, both backends follow: its settings (:mod:`.config`), which unit functions it
  composes with which settings (:func:`build_units`, given either backend's unit module as
  ``ops``), and its length distribution (:mod:`.lengths`: both samplers' tables and the
  audit's expected lengths);
- two edits side by side: a unit-map function in :mod:`.units` and its namesake in
  :mod:`.torch_units` (selection: :mod:`.select` / :mod:`.torch_select`; corruption:
  :mod:`.corrupt` / :mod:`.torch_corrupt`). ``test_the_torch_backend_gives_the_numpy_numbers``
  in ``tests/masking/test_mask.py`` keeps each pair equal bit for bit over every strategy,
  bernoulli and exact, floor and cap, per-token and per-unit corruption, terms and weighted
  draws (``test_the_backends_agree_on_long_rows``: long spans and n-grams).

A new strategy is a name in :data:`~tokenmask.masking.config.Strategy`, a branch of
:func:`build_units` and its unit function in both unit modules. Names are imported lazily, so
that ``tokenmask.masking.config`` (used by ``tokenmask --help``) does not pull in numpy and torch.

Its place in the one-way import order: masking → text → blocks → collate/labelled → train → use → recipes → experiments → cli.
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
    "detector_inputs": "replaced",
    "replacement_noise": "replaced",
    "sample_replacements": "replaced",
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
