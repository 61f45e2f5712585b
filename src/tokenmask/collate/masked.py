"""From examples to a masked batch: the one masking path of the collator, the augmenter and ``augment_text``.

:func:`mask_examples` pads the examples (:mod:`.pad`), finds the word ids a word strategy
needs (the examples' own, else the tokenizer decoder's), gathers the positions never to mask
and the given spans, and runs :func:`tokenmask.masking.mask_tokens`. The callers differ only
in what they do with the result: MLM labels, kept task labels, or text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import torch
from transformers import PreTrainedTokenizerBase

from tokenmask.collate.pad import (
    CONSUMED_KEYS,
    Feature,
    PaddedBatch,
    column,
    left_pad,
    pad_examples,
    pad_flags,
    pad_word_ids,
    row_lengths,
    spans_to_array,
)
from tokenmask.masking import IGNORE_INDEX, MaskedBatch, MaskingConfig, VocabTables, mask_tokens
from tokenmask.text.token_tables import word_ids_from_decoder


def pad_for(
    features: Sequence[Feature],
    tokenizer: PreTrainedTokenizerBase,
    *,
    pad_to_multiple_of: int | None = None,
    consumed: frozenset[str] = CONSUMED_KEYS,
    with_word_ids: bool = True,
) -> PaddedBatch:
    """:func:`~tokenmask.collate.pad.pad_examples` with the tokenizer's padding ids.

    ``input_ids`` are padded with the pad id, ``token_type_ids`` with the pad token type id.
    """
    return pad_examples(
        features,
        pad_token_id=tokenizer.pad_token_id,
        pad_to_multiple_of=pad_to_multiple_of,
        consumed=consumed,
        sequence_fills={"token_type_ids": int(getattr(tokenizer, "pad_token_type_id", 0))},
        with_word_ids=with_word_ids,
    )


def on_tokenizer_side(out: dict[str, Any], lengths: np.ndarray, tokenizer: PreTrainedTokenizerBase) -> dict[str, Any]:
    """A collated batch padded on the tokenizer's side: moved to left padding (``input_ids``
    filled with the pad id, ``labels`` with -100, the rest with 0) when ``padding_side`` is
    'left', else ``out`` as it is (right-padded)."""
    if getattr(tokenizer, "padding_side", "right") != "left":
        return out
    return left_pad(out, lengths, {"input_ids": tokenizer.pad_token_id or 0, "labels": IGNORE_INDEX})


def mask_examples(
    features: Sequence[Feature],
    tokenizer: PreTrainedTokenizerBase,
    masking: MaskingConfig,
    *,
    vocab: VocabTables,
    seed: int,
    epoch: int,
    pad_to_multiple_of: int | None = None,
    consumed: frozenset[str] = CONSUMED_KEYS,
    protect_spans: bool = False,
    device: torch.device | None = None,
) -> tuple[PaddedBatch, MaskedBatch]:
    """Pad a list of examples and mask them (the examples are not modified).

    The masks are a pure function of ``(seed, epoch, example id, tokens)``: the epoch is an
    argument, never state, so the same call gives the same batch in any process.

    Args:
        features: examples with ``input_ids``, optionally ``attention_mask``, ``word_ids``,
            ``special_tokens_mask``, ``id`` / ``idx``, ``given_spans`` (strategy 'given') and
            ``protected_spans`` (read with ``protect_spans``): spans are ``[start, end)`` offsets.
        tokenizer: gives the padding ids, and word ids when the strategy needs them and the
            examples carry none.
        masking: units, selection and corruption.
        vocab: protected / replaceable tables and the mask token.
        seed, epoch: the run seed, and the epoch whose masks to draw (``epoch % dupe_factor``
            for static masking).
        pad_to_multiple_of: round the batch width up to a multiple of this.
        consumed: keys handled here or by the caller, left out of ``PaddedBatch.extras``.
        protect_spans: never mask inside the examples' ``protected_spans``.
        device: mask there, with torch (None: numpy on the host); the masked tensors are on it.

    Returns:
        ``(batch, masked)``: the right-padded ``(B, T)`` arrays, ``word_ids`` as masking used
        them, and the :class:`~tokenmask.masking.MaskedBatch`.

    Raises:
        ValueError: bad examples (:func:`~tokenmask.collate.pad.pad_examples`), a span outside
            its example, strategy 'given' without ``given_spans``.
    """
    batch = pad_for(
        features, tokenizer, pad_to_multiple_of=pad_to_multiple_of, consumed=consumed, with_word_ids=masking.units.needs_words
    )
    return mask_padded(
        features, batch, tokenizer, masking, vocab=vocab, seed=seed, epoch=epoch, protect_spans=protect_spans, device=device
    )


def mask_padded(
    features: Sequence[Feature],
    batch: PaddedBatch,
    tokenizer: PreTrainedTokenizerBase,
    masking: MaskingConfig,
    *,
    vocab: VocabTables,
    seed: int,
    epoch: int,
    protect_spans: bool = False,
    device: torch.device | None = None,
) -> tuple[PaddedBatch, MaskedBatch]:
    """The second half of :func:`mask_examples`: mask ``features`` once they are padded into ``batch``
    (by :func:`pad_for`, with word ids when ``masking`` needs them); the same arguments and result.

    Split off for a collator that must see the example ids (``batch.example_ids``) to know
    which epoch's masks to draw.
    """
    word_ids, special, given = _masking_inputs(features, batch, tokenizer, masking, protect_spans=protect_spans)
    merged, terms = _phrase_inputs(features, batch, masking)
    masked = mask_tokens(
        _on(batch.input_ids, device),
        vocab=vocab,
        example_ids=_on(batch.example_ids, device),
        seed=seed,
        epoch=epoch,
        unit_config=masking.units,
        selection=masking.selection,
        corruption=masking.corruption,
        attention_mask=_on(batch.attention_mask, device),
        special_tokens_mask=_tensor(special, device),
        word_ids=_tensor(word_ids if merged is None else merged, device),
        given_spans=_tensor(given, device),
        term_mask=_tensor(terms, device),
        backend="numpy" if device is None else "torch",
    )
    return replace(batch, word_ids=word_ids, merged_word_ids=merged, term_mask=terms), masked


def _phrase_inputs(
    features: Sequence[Feature], batch: PaddedBatch, masking: MaskingConfig
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """``(merged word ids, term mask)``, both ``(B, T)``, for strategy 'pmi' and terms; else Nones.

    Raises:
        ValueError: the examples do not carry them (they come from encoding with phrases).
    """
    if not masking.units.needs_phrases:
        return None, None
    merged = column(features, "merged_word_ids")
    terms = column(features, "term_mask") if masking.units.mask_terms is not None else None
    if merged is None or (masking.units.mask_terms is not None and terms is None):
        raise ValueError(
            "PMI and term masking need 'merged_word_ids' and 'term_mask' in each example, found with the "
            "phrases at encoding: tokenmask.blocks.encode.encode_texts(..., phrases=...) or "
            "tokenmask.blocks.pack.pack_texts(..., phrases=...) (see tokenmask.blocks.pmi.masking_phrases)"
        )
    for key, values in (("merged_word_ids", merged), ("term_mask", terms)):
        if values is not None and not np.array_equal(row_lengths(values), batch.lengths):
            raise ValueError(f"'{key}' must have the same length as 'input_ids' in every example")
    width = batch.input_ids.shape[1]
    padded = pad_word_ids(merged, batch.lengths, width)
    return padded, None if terms is None else pad_flags(terms, batch.lengths, width)


def _masking_inputs(
    features: Sequence[Feature],
    batch: PaddedBatch,
    tokenizer: PreTrainedTokenizerBase,
    masking: MaskingConfig,
    *,
    protect_spans: bool,
) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    """``(word_ids, special, given)`` for :func:`~tokenmask.masking.mask_tokens`, each None when not needed.

    Word ids: the examples' own, else (word strategies) the tokenizer decoder's. Special: the
    examples' ``special_tokens_mask``, with their ``protected_spans`` when ``protect_spans``.
    Given: the ``(B, S, 2)`` spans of strategy 'given'.
    """
    word_ids = batch.word_ids
    if word_ids is None and masking.units.needs_words:
        word_ids = word_ids_from_decoder(tokenizer, batch.input_ids, batch.attention_mask)
    special = batch.special_tokens_mask
    spans = column(features, "protected_spans") if protect_spans else None
    if spans is not None:
        protected = spans_to_mask(spans_to_array(spans, batch.lengths, "protected span"), batch.input_ids.shape[1])
        special = protected if special is None else special | protected
    if masking.units.strategy != "given":
        return word_ids, special, None
    given = column(features, "given_spans")
    if given is None:
        raise ValueError("strategy 'given' needs a 'given_spans' list of [start, end) in each example")
    return word_ids, special, spans_to_array(given, batch.lengths, "given span")


def _on(array: np.ndarray, device: torch.device | None) -> torch.Tensor:
    """``array`` as a tensor (a view on the host), moved to ``device`` if one is given."""
    tensor = torch.from_numpy(array)
    return tensor if device is None else tensor.to(device, non_blocking=True)


def _tensor(array: np.ndarray | None, device: torch.device | None) -> torch.Tensor | None:
    return None if array is None else _on(array, device)


def spans_to_mask(spans: np.ndarray, width: int) -> np.ndarray:
    """``(B, T)`` int64, 1 inside the ``(B, S, 2)`` ``[start, end)`` spans (-1 padded).

    ``spans_to_mask([[[1, 3], [-1, -1]]], 5)  ->  [[0, 1, 1, 0, 0]]``
    """
    marks = np.zeros((spans.shape[0], width + 1), dtype=np.int64)
    valid = spans[..., 0] >= 0
    rows = np.broadcast_to(np.arange(spans.shape[0])[:, None], valid.shape)[valid]
    np.add.at(marks, (rows, spans[..., 0][valid]), 1)
    np.add.at(marks, (rows, spans[..., 1][valid]), -1)
    return (np.cumsum(marks, axis=1)[:, :width] > 0).astype(np.int64)
