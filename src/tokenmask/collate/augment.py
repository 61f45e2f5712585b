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

from tokenmask.collate.epochs import Epochs
from tokenmask.collate.masked import mask_examples, mask_padded, on_tokenizer_side, pad_for
from tokenmask.collate.pad import CONSUMED_KEYS, Feature, column, pad_rows, row_lengths
from tokenmask.masking import IGNORE_INDEX
from tokenmask.masking.config import CorruptionConfig, MaskingConfig, SelectionConfig, UnitConfig
from tokenmask.text.token_tables import cached_tables, tables_from_tokenizer

_CONSUMED = CONSUMED_KEYS | {"labels", "protected_spans"}

Granularity = Literal["word", "token"]


class MaskingAugmenter:
    """Collator for classification / token-labelling batches with optional [MASK] augmentation.

    In training mode, a share ``rate`` of the eligible tokens (special tokens, padding and the
    examples' ``protected_spans`` excluded) is replaced by the mask token; ``labels`` are kept
    as given: integers become a ``(B,)`` tensor, per-token lists are padded with -100. In eval
    mode (:meth:`eval`) the inputs are only padded. Masks are deterministic per
    ``(seed, epoch, example id)`` like the MLM collator's, and a call without :meth:`set_epoch`
    counts passes as it does (:class:`~tokenmask.collate.epochs.Epochs`): new masks on every
    pass of any loop.

    Args:
        tokenizer: tokenizer with a mask token.
        rate: share of eligible tokens masked, in [0, 1]; 0 turns augmentation off.
        mask_replace_prob: share of masked tokens replaced by the mask token (default 1.0: [MASK] only).
        random_replace_prob: share replaced by a random replaceable token (default 0.0).
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
        # every setting but the rate, which may be 0 (no masking) and changes (set_rate)
        self._any_rate = MaskingConfig(
            units=UnitConfig(strategy=strategy),
            selection=SelectionConfig(min_masks_per_sequence=min_masks_per_sequence),
            corruption=CorruptionConfig(mask_replace_prob=mask_replace_prob, random_replace_prob=random_replace_prob),
        )
        self.set_rate(rate)
        self.tokenizer = tokenizer
        self.vocab = tables_from_tokenizer(tokenizer, protected_ids=protected_ids)
        self.pad_to_multiple_of = pad_to_multiple_of
        self.seed = int(seed)
        self._epochs = Epochs()
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

        ``masking`` is then the masking settings at that rate, or None at rate 0.

        Raises:
            ValueError: a rate outside [0, 1].
        """
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"rate must be in [0, 1]; got {rate}")
        self.rate = float(rate)
        self.masking = self._any_rate.at_rate(self.rate) if rate > 0 else None

    @property
    def epoch(self) -> int:
        """The epoch whose masks the next call draws (see :meth:`set_epoch`)."""
        return self._epochs.current

    def set_epoch(self, epoch: int) -> None:
        """New masks for ``epoch`` in :meth:`__call__` from now on, and no more counting of passes."""
        self._epochs.set(epoch)

    def __call__(self, features: Sequence[Feature]) -> dict[str, Any]:
        """:meth:`collate` with the epoch of the last :meth:`set_epoch`, else the counted one."""
        return self._collated(features, epoch=None)

    def collate(self, features: Sequence[Feature], *, epoch: int) -> dict[str, Any]:
        """The batch of ``features``, masked as in ``epoch`` when training; the augmenter is not changed.

        Returns:
            ``input_ids`` and ``attention_mask`` ``(B, T)`` tensors, ``labels`` as given
            (:func:`collate_labels`) and the examples' other keys.
        """
        return self._collated(features, epoch=epoch)

    def _collated(self, features: Sequence[Feature], *, epoch: int | None) -> dict[str, Any]:
        """:meth:`collate`; ``epoch`` None: the augmenter's, counting this call when it masks."""
        batch = pad_for(
            features,
            self.tokenizer,
            pad_to_multiple_of=self.pad_to_multiple_of,
            consumed=_CONSUMED,
            with_word_ids=self._any_rate.units.needs_words,  # word ids checked whether it masks or not
        )
        input_ids = torch.from_numpy(batch.input_ids)
        if self.training and self.masking is not None:
            epoch = self._epochs.of(batch.example_ids) if epoch is None else epoch
            batch, masked = mask_padded(
                features, batch, self.tokenizer, self.masking, vocab=self.vocab, seed=self.seed, epoch=epoch, protect_spans=True
            )
            input_ids = masked.input_ids
        out = {**batch.extras, "input_ids": input_ids, "attention_mask": torch.from_numpy(batch.attention_mask)}
        labels = column(features, "labels")
        if labels is not None:
            out["labels"] = collate_labels(labels, batch.lengths, batch.input_ids.shape[1])
        return on_tokenizer_side(out, batch.lengths, self.tokenizer)


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
    granularity: Granularity = "word",
    example_id: int | None = None,
) -> str:
    """Text-level augmentation: replace a share ``rate`` of the words (or tokens) by the mask token.

    Works on character offsets of a fast tokenizer, so the rest of the text is kept byte for
    byte; each selected word (``granularity="word"``) or token (``"token"``) becomes a single
    mask token. Deterministic: the same text, seed and id give the same output (the id
    defaults to a hash of the tokens).

    ``augment_text("the quick brown fox", tok, rate=0.5, seed=1)`` might give
    ``"the [MASK] brown [MASK]"``.

    Raises:
        ValueError: a slow tokenizer (offsets are needed), a rate outside [0, 1], a granularity
            other than 'word' or 'token', no mask token.
    """
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"rate must be in [0, 1]; got {rate}")
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError("augment_text needs a fast tokenizer (character offsets)")
    if granularity not in ("word", "token"):
        raise ValueError(f"granularity must be 'word' or 'token'; got {granularity!r}")
    vocab = cached_tables(tokenizer)
    if rate == 0.0 or not text:
        return text
    encoding = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids = encoding["input_ids"]
    if not ids:
        return text
    word_ids = [-1 if w is None else w for w in encoding.word_ids()]
    feature: dict[str, Any] = {"input_ids": ids, "word_ids": word_ids}
    if example_id is not None:
        feature["id"] = example_id
    masking = MaskingConfig(
        units=UnitConfig(strategy="whole_word" if granularity == "word" else "token"),
        selection=SelectionConfig(mlm_probability=rate, min_masks_per_sequence=0),
        corruption=CorruptionConfig(mask_replace_prob=1.0, random_replace_prob=0.0),
    )
    _, masked = mask_examples([feature], tokenizer, masking, vocab=vocab, seed=seed, epoch=0)
    targets = (masked.labels[0] != IGNORE_INDEX).tolist()
    groups = word_ids if granularity == "word" else list(range(len(ids)))
    return _replace_targets(text, encoding["offset_mapping"], targets, groups, tokenizer.mask_token)


def _replace_targets(text: str, offsets: list[tuple[int, int]], targets: list[bool], groups: list[int], mask_token: str) -> str:
    """``text`` with one ``mask_token`` in place of each run of target tokens of one group (a word).

    ``"the quick fox"``, targets at the tokens of "quick" (one group) -> ``"the [MASK] fox"``.
    """
    pieces, cursor, previous = [], 0, None
    for position, selected in enumerate(targets):
        if not selected:
            continue
        start, end = offsets[position]
        if groups[position] == previous and previous is not None:
            cursor = max(cursor, end)  # another piece of a word already replaced
            continue
        pieces.append(text[cursor:start])
        pieces.append(mask_token)
        cursor, previous = end, groups[position]
    pieces.append(text[cursor:])
    return "".join(pieces)
