"""Fine-tuning augmentation: low-rate [MASK]-only masking that keeps the task labels.

Unlike :class:`~tokenmask.collate.collator.MaskingCollator`, nothing is predicted at the masked
positions: the task ``labels`` (a class per example, or a tag per token) pass through
untouched, and in eval mode the augmenter only pads.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal

import numpy as np
import torch
from transformers import PreTrainedTokenizerBase

from tokenmask.collate.pad import (
    CONSUMED_KEYS,
    Feature,
    column,
    left_pad,
    pad_examples,
    pad_rows,
    row_lengths,
    spans_to_array,
)
from tokenmask.text.token_tables import cached_tables, tables_from_tokenizer, word_ids_from_decoder
from tokenmask.masking import (
    IGNORE_INDEX,
    CorruptionConfig,
    SelectionConfig,
    UnitConfig,
    mask_tokens,
)


def _spans_to_mask(spans: np.ndarray, width: int) -> np.ndarray:
    """``(B, T)`` int64, 1 inside the ``(B, S, 2)`` ``[start, end)`` spans (-1 padded)."""
    marks = np.zeros((spans.shape[0], width + 1), dtype=np.int64)
    valid = spans[..., 0] >= 0
    rows = np.broadcast_to(np.arange(spans.shape[0])[:, None], valid.shape)[valid]
    np.add.at(marks, (rows, spans[..., 0][valid]), 1)
    np.add.at(marks, (rows, spans[..., 1][valid]), -1)
    return (np.cumsum(marks, axis=1)[:, :width] > 0).astype(np.int64)


class MaskingAugmenter:
    """Collator for classification / token-labelling batches with optional [MASK] augmentation.

    In training mode, a share ``rate`` of the eligible tokens (special tokens, padding and the
    examples' ``protected_spans`` excluded) is replaced by the mask token; ``labels`` are kept
    as given: integers become a ``(B,)`` tensor, per-token lists are padded with -100. In eval
    mode (:meth:`eval`) the inputs are only padded. Masks are deterministic per
    ``(seed, epoch, example id)`` like the MLM collator's.

    Args:
        tokenizer: tokenizer with a mask token.
        rate: share of eligible tokens masked, in [0, 1]; 0 turns augmentation off.
        mask_replace_prob / random_replace_prob: default 1.0 / 0.0 ([MASK] only).
        strategy: 'token' or 'whole_word' (needs ``word_ids`` in the examples or a fast tokenizer).
        min_masks_per_sequence: default 0: short examples may stay intact.
        seed: run seed.
        pad_to_multiple_of: round the batch width up.
        protected_ids: further ids never masked.

    Example::

        augmenter = MaskingAugmenter(tokenizer, rate=0.1)
        batch = augmenter([{**tokenizer("a fine film"), "labels": 1}])
        augmenter.eval()  # no masking at evaluation
    """

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        *,
        rate: float = 0.1,
        mask_replace_prob: float = 1.0,
        random_replace_prob: float = 0.0,
        strategy: Literal["token", "whole_word"] = "token",
        min_masks_per_sequence: int = 0,
        seed: int = 0,
        pad_to_multiple_of: int | None = None,
        protected_ids: Iterable[int] = (),
    ) -> None:
        if strategy not in ("token", "whole_word"):
            raise ValueError(f"augmentation strategy must be 'token' or 'whole_word'; got {strategy!r}")
        self.unit_config = UnitConfig(strategy=strategy)
        self.min_masks_per_sequence = min_masks_per_sequence
        self.set_rate(rate)
        self.corruption = CorruptionConfig(
            mask_replace_prob=mask_replace_prob, random_replace_prob=random_replace_prob
        )
        self.tokenizer = tokenizer
        self.vocab = tables_from_tokenizer(tokenizer, protected_ids=protected_ids)
        self.pad_token_id = tokenizer.pad_token_id
        self.pad_to_multiple_of = pad_to_multiple_of
        self.seed = int(seed)
        self.epoch = 0
        self.training = True

    def train(self, mode: bool = True) -> MaskingAugmenter:
        """Augment from now on (``mode=False`` is :meth:`eval`)."""
        self.training = bool(mode)
        return self

    def eval(self) -> MaskingAugmenter:
        """Stop augmenting: batches are only padded."""
        return self.train(False)

    def set_rate(self, rate: float) -> None:
        """Mask a share ``rate`` of the eligible tokens from now on; 0 turns augmentation off.

        Raises:
            ValueError: a rate outside [0, 1].
        """
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"rate must be in [0, 1]; got {rate}")
        self.rate = float(rate)
        self.selection = (
            SelectionConfig(mlm_probability=rate, min_masks_per_sequence=self.min_masks_per_sequence)
            if rate > 0
            else None
        )

    def set_epoch(self, epoch: int) -> None:
        """New masks for ``epoch``."""
        if epoch < 0:
            raise ValueError(f"epoch must be >= 0; got {epoch}")
        self.epoch = int(epoch)

    def __call__(self, features: Sequence[Feature]) -> dict[str, Any]:
        batch = pad_examples(
            features,
            pad_token_id=self.pad_token_id,
            pad_to_multiple_of=self.pad_to_multiple_of,
            consumed=CONSUMED_KEYS | {"labels", "protected_spans"},
            sequence_fills={"token_type_ids": int(getattr(self.tokenizer, "pad_token_type_id", 0))},
            with_word_ids=self.unit_config.needs_words,
        )
        width = batch.input_ids.shape[1]
        input_ids = torch.from_numpy(batch.input_ids)
        if self.training and self.selection is not None:
            spans = column(features, "protected_spans")
            protected = None if spans is None else _spans_to_mask(spans_to_array(spans, batch.lengths, "protected span"), width)
            special = batch.special_tokens_mask
            if protected is not None:
                special = protected if special is None else (special | protected)
            word_ids = batch.word_ids
            if self.unit_config.needs_words and word_ids is None:
                word_ids = word_ids_from_decoder(self.tokenizer, batch.input_ids, batch.attention_mask)
            input_ids = mask_tokens(
                input_ids,
                vocab=self.vocab,
                example_ids=torch.from_numpy(batch.example_ids),
                seed=self.seed,
                epoch=self.epoch,
                unit_config=self.unit_config,
                selection=self.selection,
                corruption=self.corruption,
                attention_mask=torch.from_numpy(batch.attention_mask),
                special_tokens_mask=None if special is None else torch.from_numpy(special),
                word_ids=None if word_ids is None else torch.from_numpy(word_ids),
            ).input_ids
        out = {
            **batch.extras,
            "input_ids": input_ids,
            "attention_mask": torch.from_numpy(batch.attention_mask),
        }
        labels = column(features, "labels")
        if labels is not None:
            out["labels"] = collate_labels(labels, batch.lengths, width)
        if getattr(self.tokenizer, "padding_side", "right") == "left":
            out = left_pad(out, batch.lengths, {"input_ids": self.pad_token_id or 0, "labels": IGNORE_INDEX})
        return out


def collate_labels(labels: list[Any], lengths: np.ndarray, width: int) -> Any:
    """Task labels as given, batched.

    Per-token labels (one per input token in every example) -> ``(B, T)`` padded with -100;
    anything else (class ids, multi-label or soft-label vectors) -> ``torch.tensor(labels)``,
    or the list itself when it does not make a tensor (strings, ragged lists).
    """
    sized = all(isinstance(v, (list, tuple, np.ndarray, torch.Tensor)) for v in labels)
    if sized and np.array_equal(row_lengths(labels), lengths):
        values = [np.asarray(v) for v in labels]
        if all(np.issubdtype(v.dtype, np.integer) for v in values):
            return torch.from_numpy(pad_rows(values, lengths, width, IGNORE_INDEX))
    if all(isinstance(v, torch.Tensor) for v in labels):
        try:
            return torch.stack(labels)
        except RuntimeError:
            return labels
    try:
        return torch.tensor(labels)
    except (TypeError, ValueError, RuntimeError):
        return labels


def augment_text(
    text: str,
    tokenizer: PreTrainedTokenizerBase,
    rate: float = 0.1,
    seed: int = 0,
    *,
    unit: Literal["word", "token"] = "word",
    example_id: int | None = None,
) -> str:
    """Text-level augmentation: replace a share ``rate`` of the words (or tokens) by the mask token.

    Works on character offsets of a fast tokenizer, so the rest of the text is kept byte for
    byte; each selected word becomes a single mask token. Deterministic: the same text, seed
    and id give the same output (the id defaults to a hash of the tokens).

    ``augment_text("the quick brown fox", tok, rate=0.5, seed=1)`` might give
    ``"the [MASK] brown [MASK]"``.

    Raises:
        ValueError: a slow tokenizer (offsets are needed), a rate outside [0, 1], no mask token.
    """
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"rate must be in [0, 1]; got {rate}")
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError("augment_text needs a fast tokenizer (character offsets)")
    if unit not in ("word", "token"):
        raise ValueError(f"unit must be 'word' or 'token'; got {unit!r}")
    vocab = cached_tables(tokenizer)
    if rate == 0.0 or not text:
        return text
    encoding = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids = encoding["input_ids"]
    if not ids:
        return text
    word_ids = [-1 if w is None else w for w in encoding.word_ids()]
    features = [{"input_ids": ids, "word_ids": word_ids}]
    if example_id is not None:
        features[0]["id"] = example_id
    batch = pad_examples(features, pad_token_id=0)
    masked = mask_tokens(
        torch.from_numpy(batch.input_ids),
        vocab=vocab,
        example_ids=torch.from_numpy(batch.example_ids),
        seed=seed,
        unit_config=UnitConfig(strategy="whole_word" if unit == "word" else "token"),
        selection=SelectionConfig(mlm_probability=rate, min_masks_per_sequence=0),
        corruption=CorruptionConfig(mask_replace_prob=1.0, random_replace_prob=0.0),
        word_ids=torch.from_numpy(batch.word_ids),
    )
    targets = (masked.labels[0] != IGNORE_INDEX).tolist()
    offsets = encoding["offset_mapping"]
    key = word_ids if unit == "word" else list(range(len(ids)))
    pieces, cursor, previous = [], 0, None
    for position, selected in enumerate(targets):
        if not selected:
            continue
        start, end = offsets[position]
        if key[position] == previous and previous is not None:
            cursor = max(cursor, end)  # another piece of a word already replaced
            continue
        pieces.append(text[cursor:start])
        pieces.append(tokenizer.mask_token)
        cursor, previous = end, key[position]
    pieces.append(text[cursor:])
    return "".join(pieces)
