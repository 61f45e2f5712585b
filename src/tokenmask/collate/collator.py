"""``MaskingCollator``: a drop-in MLM collator for the Hugging Face ``Trainer`` and ``DataLoader``.

Thin glue: :func:`~tokenmask.collate.masked.mask_examples` pads and masks the examples; the
collator keeps the settings and the epoch, and returns tensors with MLM labels.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from transformers import BatchEncoding, PreTrainedTokenizerBase

from tokenmask.collate.masked import checked_epoch, mask_examples, on_tokenizer_side
from tokenmask.collate.pad import CONSUMED_KEYS, Feature, PaddedBatch
from tokenmask.masking import MaskedBatch
from tokenmask.masking.config import (
    CorruptionConfig,
    MaskingConfig,
    SelectionConfig,
    SelectionMode,
    Strategy,
    UnitConfig,
)
from tokenmask.masking.replaced import replacement_noise
from tokenmask.text.token_tables import tables_from_tokenizer

_DEFAULTS = MaskingConfig()
"""Where the keyword arguments' defaults come from: the masking settings' own declarations."""


class MaskingCollator:
    """Pads a list of examples and masks them for MLM; deterministic per example.

    Accepts examples with ``input_ids`` (list, numpy array or tensor) and optionally
    ``attention_mask``, ``word_ids`` (-1 or None on special tokens), ``special_tokens_mask``,
    ``given_spans`` (for strategy 'given': ``[[start, end), …]`` token offsets) and a stable
    example id under ``id`` (or ``idx``; integer or string). Returns ``input_ids``,
    ``attention_mask`` and ``labels`` tensors (labels: original id at targets, -100
    elsewhere); other keys pass through (see :func:`tokenmask.collate.pad.collate_extras`).

    Determinism: the mask of an example is a pure function of ``(seed, epoch, example id,
    tokens)``. Without an ``id`` key the id is a hash of the example's tokens.
    :meth:`collate` takes the epoch as an argument; calling the collator uses the epoch of the
    last :meth:`set_epoch`, as Hugging Face's ``Trainer`` and ``DataLoader`` need. Call
    :meth:`set_epoch` each epoch for dynamic masking (RoBERTa); for static masking with a dupe
    factor ``k`` call ``set_epoch(epoch % k)``. With DataLoader workers, call ``set_epoch``
    before creating the epoch's iterator (not with ``persistent_workers=True``). With the
    Hugging Face ``Trainer``, add :class:`tokenmask.collate.callback.MaskingCallback`, which calls
    it, and set ``remove_unused_columns=False`` so that ``id`` and ``word_ids`` reach the collator.

    The keyword arguments below build the :class:`~tokenmask.masking.MaskingConfig` kept as
    ``collator.masking``, and their defaults are its own (15% Bernoulli token selection, 80/10/10
    decided per token, at least one target per sequence); :meth:`from_config` takes one directly.
    A masking rate that changes over a run (a schedule) is an argument of :meth:`collate`.

    Args:
        tokenizer: a Hugging Face tokenizer with a mask token (fast tokenizer needed for
            word-based strategies when examples carry no ``word_ids``).
        mlm_probability: share of eligible tokens selected as targets, in (0, 1].
        mask_replace_prob: share of targets replaced by the mask token.
        random_replace_prob: share of targets replaced by a random token (never a special,
            padding or ``[unused*]`` id); the rest are kept.
        pad_to_multiple_of: round the batch width up to a multiple of this.
        seed: run seed.
        strategy: 'token', 'whole_word', 'span', 'ngram', 'pmi' or 'given'. 'pmi' (and terms,
            ``UnitConfig.mask_terms`` through :meth:`from_config`) needs examples encoded with
            the phrases: ``merged_word_ids`` (and ``term_mask``) from
            ``encode_texts(..., phrases=...)`` or ``pack_texts(..., phrases=...)``.
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
        device: mask on this device (e.g. ``"cuda"``): the padded batch moves there first and
            torch masks it in place of numpy, with the same masks; the tensors returned are
            on it. For the main process (``num_workers=0``): DataLoader workers should not
            touch CUDA. None = numpy on the host.
        mlm: Hugging Face's argument, so that the collator drops in (the arguments up to
            ``seed`` may be positional, in Hugging Face's order): must be True.
        whole_word_mask: Hugging Face's; True means ``strategy="whole_word"``.
        return_tensors: Hugging Face's; "pt" or "np" (numpy arrays).

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
        mlm: bool = True,
        whole_word_mask: bool = False,
        mlm_probability: float = _DEFAULTS.selection.mlm_probability,
        mask_replace_prob: float = _DEFAULTS.corruption.mask_replace_prob,
        random_replace_prob: float = _DEFAULTS.corruption.random_replace_prob,
        pad_to_multiple_of: int | None = None,
        return_tensors: str = "pt",
        seed: int = 0,
        *,
        strategy: Strategy = _DEFAULTS.units.strategy,
        selection: SelectionMode = _DEFAULTS.selection.mode,
        min_masks_per_sequence: int = _DEFAULTS.selection.min_masks_per_sequence,
        max_predictions: int | None = _DEFAULTS.selection.max_predictions,
        corrupt_per_unit: bool = _DEFAULTS.corruption.per_unit,
        span_geometric_p: float = _DEFAULTS.units.span_geometric_p,
        span_max_words: int = _DEFAULTS.units.span_max_words,
        ngram_max_n: int = _DEFAULTS.units.ngram_max_n,
        protected_ids: Iterable[int] = (),
        replace_counts: np.ndarray | None = None,
        device: str | torch.device | None = None,
    ) -> None:
        strategy = _hugging_face_strategy(strategy, mlm=mlm, whole_word_mask=whole_word_mask)
        masking = MaskingConfig(
            units=UnitConfig(
                strategy=strategy,
                span_geometric_p=span_geometric_p,
                span_max_words=span_max_words,
                ngram_max_n=ngram_max_n,
            ),
            selection=SelectionConfig(
                mlm_probability=mlm_probability,
                mode=selection,
                min_masks_per_sequence=min_masks_per_sequence,
                max_predictions=max_predictions,
            ),
            corruption=CorruptionConfig(
                mask_replace_prob=mask_replace_prob,
                random_replace_prob=random_replace_prob,
                per_unit=corrupt_per_unit,
            ),
        )
        self._setup(tokenizer, masking, seed, pad_to_multiple_of, protected_ids, replace_counts, device)
        self.return_tensors = _checked_tensors(return_tensors, self.device)

    @classmethod
    def from_config(
        cls,
        tokenizer: PreTrainedTokenizerBase,
        masking: MaskingConfig,
        *,
        seed: int = 0,
        pad_to_multiple_of: int | None = None,
        protected_ids: Iterable[int] = (),
        replace_counts: np.ndarray | None = None,
        device: str | torch.device | None = None,
        replacement_noise: bool = False,
    ) -> MaskingCollator:
        """A collator with the settings of a typed :class:`~tokenmask.masking.MaskingConfig`.

        Gives exactly the masks of the keyword constructor with the same settings.

        Example::

            masking = MaskingConfig(units=UnitConfig(strategy="span"))
            collator = MaskingCollator.from_config(tokenizer, masking, seed=0)

        ``replacement_noise`` adds a ``replacement_noise`` ``(B, T)`` float32 tensor to each
        batch: the uniforms a replaced-token-detection generator samples its replacements with
        (:func:`~tokenmask.masking.replaced.replacement_noise`), keyed like the masks.

        Raises:
            ValueError: ``pad_to_multiple_of`` below 1, or a tokenizer without a mask token.
        """
        collator = cls.__new__(cls)
        collator._setup(tokenizer, masking, seed, pad_to_multiple_of, protected_ids, replace_counts, device)
        collator.return_tensors = "pt"
        collator.replacement_noise = replacement_noise
        return collator

    def _setup(
        self,
        tokenizer: PreTrainedTokenizerBase,
        masking: MaskingConfig,
        seed: int,
        pad_to_multiple_of: int | None,
        protected_ids: Iterable[int],
        replace_counts: np.ndarray | None,
        device: str | torch.device | None,
    ) -> None:
        if pad_to_multiple_of is not None and pad_to_multiple_of < 1:
            raise ValueError(f"pad_to_multiple_of must be >= 1 or None; got {pad_to_multiple_of}")
        self.masking = masking
        self.tokenizer = tokenizer
        self.vocab = tables_from_tokenizer(tokenizer, protected_ids=protected_ids, replace_counts=replace_counts)
        self.pad_to_multiple_of = pad_to_multiple_of
        self.seed = int(seed)
        self.epoch = 0
        self.device = None if device is None else torch.device(device)
        self.replacement_noise = False

    def set_epoch(self, epoch: int) -> None:
        """Use the masks of ``epoch`` in :meth:`__call__` from now on (dynamic masking)."""
        self.epoch = checked_epoch(epoch)

    def __call__(self, features: Sequence[Feature | Sequence[int]], return_tensors: str | None = None) -> BatchEncoding:
        """:meth:`collate` with the epoch of the last :meth:`set_epoch` (0 before any), as
        Hugging Face's collators answer: a ``BatchEncoding`` of tensors (``return_tensors``
        "pt", the default) or of numpy arrays ("np"). An example may also be a plain sequence of
        ids (a list, array or tensor), read as ``{"input_ids": ids}``."""
        tensors = self.return_tensors if return_tensors is None else _checked_tensors(return_tensors, self.device)
        examples = [f if isinstance(f, Mapping) else {"input_ids": f} for f in features]
        batch = self.collate(examples, epoch=self.epoch)
        if tensors == "np":
            batch = {k: v.numpy() if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
        return BatchEncoding(batch)

    def collate(self, features: Sequence[Feature], *, epoch: int, mlm_probability: float | None = None) -> dict[str, Any]:
        """The batch of ``features`` with the masks of ``epoch``; the collator is not changed.

        ``mlm_probability`` selects that share of tokens in place of ``masking``'s (a
        masking-rate schedule gives each step's, :class:`~tokenmask.collate.rate.RateSchedule`);
        masks are a pure function of (seed, epoch, example id, tokens) and the rate.

        Returns:
            ``input_ids``, ``attention_mask`` and ``labels`` ``(B, T)`` tensors, and the
            examples' other keys (see :func:`tokenmask.collate.pad.collate_extras`).
        """
        batch, masked = self.mask(features, epoch=epoch, mlm_probability=mlm_probability)
        device = masked.input_ids.device
        out = {
            **batch.extras,
            "input_ids": masked.input_ids,
            "attention_mask": torch.from_numpy(batch.attention_mask).to(device),
            "labels": masked.labels,
        }
        if self.replacement_noise:
            width = batch.input_ids.shape[1]
            noise = replacement_noise(batch.example_ids, width, seed=self.seed, epoch=epoch)
            out["replacement_noise"] = torch.from_numpy(noise).to(device)
        return on_tokenizer_side(out, batch.lengths, self.tokenizer)

    def mask(
        self, features: Sequence[Feature], *, epoch: int | None = None, mlm_probability: float | None = None
    ) -> tuple[PaddedBatch, MaskedBatch]:
        """Pad and mask; returns the padded batch and the :class:`MaskedBatch` (right-padded).

        Useful to inspect outcomes (mask / random / keep) and units next to the originals.
        ``epoch`` defaults to the collator's (:meth:`set_epoch`), ``mlm_probability`` to its masking's.
        """
        if any("labels" in f for f in features):
            raise ValueError(
                "examples already carry 'labels': MaskingCollator writes MLM labels and would "
                "overwrite them; drop the column, or use MaskingAugmenter to keep task labels"
            )
        masking = self.masking if mlm_probability is None else self.masking.at_rate(float(mlm_probability))
        batch, masked = mask_examples(
            features,
            self.tokenizer,
            masking,
            vocab=self.vocab,
            seed=self.seed,
            epoch=self.epoch if epoch is None else epoch,
            pad_to_multiple_of=self.pad_to_multiple_of,
            consumed=CONSUMED_KEYS | {"given_spans"},
            device=self.device,
        )
        if masking.selection.min_masks_per_sequence > 0 and masked.target_index.numel() == 0:
            raise ValueError(
                "no maskable token in the batch: every row holds only special tokens, padding "
                "or protected ids" + (" (or no given span)" if masking.units.strategy == "given" else "")
            )
        return batch, masked


def _checked_tensors(return_tensors: str, device: torch.device | None) -> str:
    """``return_tensors`` if tokenmask gives it: "pt", or "np" for a collator masking on the host.

    Raises:
        ValueError: another framework, or "np" with a device.
    """
    if return_tensors not in ("pt", "np"):
        raise ValueError(f"return_tensors must be 'pt' (PyTorch tensors) or 'np' (numpy arrays); got {return_tensors!r}")
    if return_tensors == "np" and device is not None:
        raise ValueError(f"return_tensors='np' gives host arrays: it does not go with device={device}")
    return return_tensors


def _hugging_face_strategy(strategy: Strategy, *, mlm: bool, whole_word_mask: bool) -> Strategy:
    """The strategy, once Hugging Face's arguments are checked: ``whole_word_mask=True`` means 'whole_word'.

    Raises:
        ValueError: ``mlm=False``, or ``whole_word_mask`` with another strategy than 'token'
            or 'whole_word'.
    """
    if not mlm:
        raise ValueError(
            "MaskingCollator is for masked-language modelling (mlm=True); for causal-LM "
            "labels use transformers' DataCollatorForLanguageModeling(mlm=False)"
        )
    if whole_word_mask:
        if strategy not in ("token", "whole_word"):
            raise ValueError(f"whole_word_mask=True conflicts with strategy={strategy!r}")
        return "whole_word"
    return strategy
