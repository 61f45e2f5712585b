"""``MaskingCollator``: a drop-in MLM collator for the Hugging Face ``Trainer`` and ``DataLoader``.

Thin glue: pad the examples (:mod:`.batch`), build word ids if the strategy needs them and the
examples lack them, run :func:`tokenmask.masking.mask_tokens`, return tensors.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import torch
from transformers import PreTrainedTokenizerBase

from tokenmask.data.batch import CONSUMED_KEYS, Feature, PaddedBatch, pad_examples, to_left_padding
from tokenmask.data.vocab import tables_from_tokenizer, word_ids_from_decoder
from tokenmask.masking import (
    IGNORE_INDEX,
    CorruptionConfig,
    MaskedBatch,
    SelectionConfig,
    UnitConfig,
    eligible_positions,
    mask_tokens,
)
from tokenmask.masking.config import SelectionMode, Strategy


class MaskingCollator:
    """Pads a list of examples and masks them for MLM; deterministic per example.

    Accepts examples with ``input_ids`` (list, numpy array or tensor) and optionally
    ``attention_mask``, ``word_ids`` (-1 or None on special tokens), ``special_tokens_mask``,
    ``given_spans`` (for strategy 'given': ``[[start, end), …]`` token offsets) and a stable
    example id under ``id`` (or ``idx``; integer or string). Returns ``input_ids``,
    ``attention_mask`` and ``labels`` tensors (labels: original id at targets, -100
    elsewhere); other keys pass through (see :func:`tokenmask.data.batch.collate_extras`).

    Determinism: the mask of an example is a pure function of ``(seed, epoch, example id,
    tokens)``. Without an ``id`` key the id is a hash of the example's tokens. Call
    :meth:`set_epoch` each epoch for dynamic masking (RoBERTa); for static masking with a dupe
    factor ``k`` call ``set_epoch(epoch % k)``. With DataLoader workers, call ``set_epoch``
    before creating the epoch's iterator (not with ``persistent_workers=True``).

    Args:
        tokenizer: a Hugging Face tokenizer with a mask token (fast tokenizer needed for
            word-based strategies when examples carry no ``word_ids``).
        mlm_probability: share of eligible tokens selected as targets, in (0, 1].
        mask_replace_prob: share of targets replaced by the mask token.
        random_replace_prob: share of targets replaced by a random token (never a special,
            padding or ``[unused*]`` id); the rest are kept.
        pad_to_multiple_of: round the batch width up to a multiple of this.
        seed: run seed.
        strategy: 'token', 'whole_word', 'span', 'ngram' or 'given'.
        selection: 'bernoulli' (each unit independently, as Hugging Face) or 'exact'
            (round(p · eligible) target tokens per sequence, as the original BERT).
        min_masks_per_sequence: at least this many units per sequence (default 1: no
            sequence, hence no batch, is without a target).
        max_predictions: cap on target tokens per sequence.
        corrupt_per_unit: decide mask / random / keep once per unit instead of per token.
        span_geometric_p: span strategy: lengths in words ~ Geometric(p).
        span_max_words: span strategy: longest span in words.
        ngram_max_n: ngram strategy: largest n.
        protected_ids: further token ids never to select.
        replace_counts: ``(V,)`` unigram counts for frequency-weighted random replacements.

    Raises:
        ValueError: any setting out of range, or a tokenizer without a mask token.

    Example::

        collator = MaskingCollator(tokenizer, strategy="whole_word", seed=0)
        batch = collator([tokenizer("To be, or not to be")])
        batch["labels"]  # -100 except at the targets
    """

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        *,
        mlm_probability: float = 0.15,
        mask_replace_prob: float = 0.8,
        random_replace_prob: float = 0.1,
        pad_to_multiple_of: int | None = None,
        seed: int = 0,
        strategy: Strategy = "token",
        selection: SelectionMode = "bernoulli",
        min_masks_per_sequence: int = 1,
        max_predictions: int | None = None,
        corrupt_per_unit: bool = False,
        span_geometric_p: float = 0.2,
        span_max_words: int = 10,
        ngram_max_n: int = 3,
        protected_ids: Iterable[int] = (),
        replace_counts: np.ndarray | None = None,
    ) -> None:
        if pad_to_multiple_of is not None and pad_to_multiple_of < 1:
            raise ValueError(f"pad_to_multiple_of must be >= 1 or None; got {pad_to_multiple_of}")
        self.unit_config = UnitConfig(
            strategy=strategy,
            span_geometric_p=span_geometric_p,
            span_max_words=span_max_words,
            ngram_max_n=ngram_max_n,
        )
        self.selection = SelectionConfig(
            mlm_probability=mlm_probability,
            mode=selection,
            min_masks_per_sequence=min_masks_per_sequence,
            max_predictions=max_predictions,
        )
        self.corruption = CorruptionConfig(
            mask_replace_prob=mask_replace_prob,
            random_replace_prob=random_replace_prob,
            per_unit=corrupt_per_unit,
        )
        self.tokenizer = tokenizer
        self.vocab = tables_from_tokenizer(
            tokenizer, protected_ids=protected_ids, replace_counts=replace_counts
        )
        self.pad_token_id = int(tokenizer.pad_token_id) if tokenizer.pad_token_id is not None else 0
        self.pad_to_multiple_of = pad_to_multiple_of
        self.seed = int(seed)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Use the masks of ``epoch`` from now on (dynamic masking)."""
        if epoch < 0:
            raise ValueError(f"epoch must be >= 0; got {epoch}")
        self.epoch = int(epoch)

    def __call__(self, features: Sequence[Feature]) -> dict[str, Any]:
        batch, masked = self.mask(features)
        input_ids = masked.input_ids.numpy()
        labels = masked.labels.numpy()
        attention = batch.attention_mask
        extras = batch.extras
        if getattr(self.tokenizer, "padding_side", "right") == "left":
            lengths = batch.lengths
            input_ids = to_left_padding(input_ids, lengths, self.pad_token_id)
            labels = to_left_padding(labels, lengths, IGNORE_INDEX)
            attention = to_left_padding(attention, lengths, 0)
            extras = {
                k: torch.from_numpy(to_left_padding(v.numpy(), lengths, 0))
                if isinstance(v, torch.Tensor) and v.dim() == 2
                else v
                for k, v in extras.items()
            }
        return {
            **extras,
            "input_ids": torch.from_numpy(input_ids),
            "attention_mask": torch.from_numpy(attention),
            "labels": torch.from_numpy(labels),
        }

    def mask(self, features: Sequence[Feature]) -> tuple[PaddedBatch, MaskedBatch]:
        """Pad and mask; returns the padded batch and the :class:`MaskedBatch` (right-padded).

        Useful to inspect outcomes (mask / random / keep) next to the originals.
        """
        if len(features) and "labels" in features[0]:
            raise ValueError(
                "examples already carry 'labels': MaskingCollator writes MLM labels and would "
                "overwrite them; drop the column, or use MaskingAugmenter to keep task labels"
            )
        batch = pad_examples(
            features,
            pad_token_id=self.pad_token_id,
            pad_to_multiple_of=self.pad_to_multiple_of,
            consumed=CONSUMED_KEYS | {"given_spans"},
            sequence_fills={"token_type_ids": int(getattr(self.tokenizer, "pad_token_type_id", 0))},
            with_word_ids=self.unit_config.needs_words,
        )
        word_ids = batch.word_ids
        if self.unit_config.needs_words and word_ids is None:
            word_ids = word_ids_from_decoder(self.tokenizer, batch.input_ids, batch.attention_mask)
        given = self._given_spans(features) if self.unit_config.strategy == "given" else None
        masked = mask_tokens(
            torch.from_numpy(batch.input_ids),
            vocab=self.vocab,
            example_ids=torch.from_numpy(batch.example_ids),
            seed=self.seed,
            epoch=self.epoch,
            unit_config=self.unit_config,
            selection=self.selection,
            corruption=self.corruption,
            attention_mask=torch.from_numpy(batch.attention_mask),
            special_tokens_mask=None
            if batch.special_tokens_mask is None
            else torch.from_numpy(batch.special_tokens_mask),
            word_ids=None if word_ids is None else torch.from_numpy(word_ids),
            given_spans=None if given is None else torch.from_numpy(given),
        )
        if not (masked.labels.numpy() != IGNORE_INDEX).any() and not eligible_positions(
            batch.input_ids,
            self.vocab,
            attention_mask=batch.attention_mask,
            special_tokens_mask=batch.special_tokens_mask,
        ).any():
            raise ValueError(
                "no maskable token in the batch: every row holds only special tokens, padding "
                "or protected ids"
            )
        return batch, masked

    @staticmethod
    def _given_spans(features: Sequence[Feature]) -> np.ndarray:
        if "given_spans" not in features[0]:
            raise ValueError("strategy 'given' needs a 'given_spans' list of [start, end) in each example")
        spans = [np.asarray(f["given_spans"], dtype=np.int64).reshape(-1, 2) for f in features]
        count = max((len(s) for s in spans), default=0)
        out = np.full((len(spans), max(count, 1), 2), -1, dtype=np.int64)
        for row, s in enumerate(spans):
            out[row, : len(s)] = s
        return out

