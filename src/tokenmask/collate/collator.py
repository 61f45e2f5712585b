"""``MaskingCollator``: a drop-in MLM collator for the Hugging Face ``Trainer`` and ``DataLoader``.

Thin glue: :func:`~tokenmask.collate.masked.mask_examples` pads and masks the examples; the
collator keeps the settings and the epoch (:class:`~tokenmask.collate.epochs.Epochs`), and
returns tensors with MLM labels. Hugging Face's attributes and masking hooks read and write
through to the same settings.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import torch
from transformers import BatchEncoding, PreTrainedTokenizerBase

from tokenmask.collate.epochs import Epochs
from tokenmask.collate.hugging_face import (
    MaskingSetting,
    checked_tensors,
    hooked_batch,
    masked_rows,
    require_mlm,
    warn_if_nothing_to_draw,
    whole_word_strategy,
)
from tokenmask.collate.masked import mask_padded, on_tokenizer_side, pad_for
from tokenmask.collate.pad import CONSUMED_KEYS, Feature, PaddedBatch, is_mapping
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

_CONSUMED = CONSUMED_KEYS | {"given_spans", "offset_mapping"}
"""Keys the collator reads or drops (Hugging Face's collator drops ``offset_mapping`` too)."""


class MaskingCollator:
    """Pads a list of examples and masks them for MLM; deterministic per example.

    Accepts examples with ``input_ids`` (list, numpy array or tensor) and optionally
    ``attention_mask``, ``word_ids`` (-1 or None on special tokens), ``special_tokens_mask``,
    ``given_spans`` (for strategy 'given': ``[[start, end), …]`` token offsets) and a stable
    example id under ``id`` (or ``idx``; integer or string). Returns ``input_ids``,
    ``attention_mask`` and ``labels`` tensors (labels: original id at targets, -100
    elsewhere, and -100 everywhere in a row with nothing to mask); ``offset_mapping`` is
    dropped, other keys pass through (see :func:`tokenmask.collate.pad.collate_extras`).

    Determinism: the mask of an example is a pure function of ``(seed, epoch, example id,
    tokens)``; without an ``id`` key the id is a hash of the tokens. :meth:`collate` takes the
    epoch as an argument; a call takes the epoch of the last :meth:`set_epoch`, and before any
    counts passes (:class:`~tokenmask.collate.epochs.Epochs`: 0, then one more each time an
    example comes back), so masks are new on every pass of a loop in one process.
    :meth:`set_epoch` each epoch makes them a function of the epoch alone, as a resumed run
    needs (``set_epoch(epoch % k)``: static masking, dupe factor ``k``); with DataLoader workers,
    call it before creating the epoch's iterator (not with ``persistent_workers=True``). With
    the Hugging Face ``Trainer``, :class:`~tokenmask.collate.callback.MaskingCallback` calls it;
    set ``remove_unused_columns=False`` so that ``id`` and ``word_ids`` reach the collator.

    The keyword arguments below build the :class:`~tokenmask.masking.MaskingConfig` kept as
    ``collator.masking``, with its defaults (15% Bernoulli token selection, 80/10/10 per token,
    at least one target per sequence); :meth:`from_config` takes one directly, and a rate
    schedule's rate is an argument of :meth:`collate`. Hugging Face's attributes (``mlm``,
    ``mlm_probability``, ``mask_replace_prob``, ``random_replace_prob``, ``whole_word_mask``)
    read and set ``masking``; a subclass may override :meth:`torch_mask_tokens` as with theirs.

    Args:
        tokenizer: a Hugging Face tokenizer with a mask token (fast tokenizer needed for
            word-based strategies when examples carry no ``word_ids``). Ids at or above
            ``len(tokenizer)`` are masked as ordinary tokens, with one warning.
        mlm_probability: share of eligible tokens selected as targets, in (0, 1].
        mask_replace_prob: share of targets replaced by the mask token.
        random_replace_prob: share of targets replaced by a random token (never a special,
            padding or ``[unused*]`` id); the rest are kept. A vocabulary with no such id
            keeps this share unchanged, with one warning.
        pad_to_multiple_of: round the batch width up to a multiple of this.
        seed: run seed; None draws one from torch's global generator (reproducible after
            ``torch.manual_seed``).
        strategy: 'token', 'whole_word', 'span', 'ngram', 'pmi' or 'given'. 'pmi' (and terms,
            through :meth:`from_config`) needs the ``merged_word_ids`` (and ``term_mask``) of
            ``encode_texts(..., phrases=...)`` or ``pack_texts(..., phrases=...)``.
        selection: 'bernoulli' (each unit independently, as Hugging Face) or 'exact'
            (round(p · eligible) target tokens per sequence, as the original BERT).
        min_masks_per_sequence: at least this many units in every sequence that has an
            eligible token (default 1: no such sequence is without a target).
        max_predictions: cap on target tokens per sequence.
        corrupt_per_unit: decide mask / random / keep once per unit instead of per token.
        span_geometric_p: span strategy: lengths in words ~ Geometric(p).
        span_max_words: span strategy: longest span in words.
        ngram_max_n: ngram strategy: largest n.
        protected_ids: further token ids never to select.
        replace_counts: ``(V,)`` unigram counts for frequency-weighted random replacements.
        device: mask on this device (e.g. ``"cuda"``) with torch, the same masks as numpy's
            on the host (None); the tensors returned are on it. For the main process
            (``num_workers=0``): DataLoader workers should not touch CUDA.
        mlm: Hugging Face's argument, so that the collator drops in (the arguments up to
            ``seed`` may be positional, in Hugging Face's order): must be True.
        whole_word_mask: Hugging Face's; True means ``strategy="whole_word"``, with the
            corruption as given (80/10/10 by default, where Hugging Face's masks every target
            with [MASK]: a warning names ``mask_replace_prob=1.0, random_replace_prob=0.0``).
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
        seed: int | None = 0,
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
        require_mlm(mlm)
        masking = MaskingConfig(
            units=UnitConfig(
                strategy=whole_word_strategy(strategy, whole_word_mask, mask_replace_prob),
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
        self.return_tensors = return_tensors

    @classmethod
    def from_config(
        cls,
        tokenizer: PreTrainedTokenizerBase,
        masking: MaskingConfig,
        *,
        seed: int | None = 0,
        pad_to_multiple_of: int | None = None,
        protected_ids: Iterable[int] = (),
        replace_counts: np.ndarray | None = None,
        device: str | torch.device | None = None,
        replacement_noise: bool = False,
    ) -> MaskingCollator:
        """A collator with the settings of a typed :class:`~tokenmask.masking.MaskingConfig`.

        Gives exactly the masks of the keyword constructor with the same settings, e.g.
        ``MaskingCollator.from_config(tokenizer, MaskingConfig(units=UnitConfig(strategy="span")))``.
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
        seed: int | None,
        pad_to_multiple_of: int | None,
        protected_ids: Iterable[int],
        replace_counts: np.ndarray | None,
        device: str | torch.device | None,
    ) -> None:
        self.tokenizer = tokenizer
        self.vocab = tables_from_tokenizer(tokenizer, protected_ids=protected_ids, replace_counts=replace_counts)
        warn_if_nothing_to_draw(self.vocab, masking.corruption.random_replace_prob)
        self.masking = masking
        self.pad_to_multiple_of = pad_to_multiple_of
        self.seed = seed
        self._epochs = Epochs()
        self.device = None if device is None else torch.device(device)
        self.replacement_noise = False

    mlm_probability = MaskingSetting("selection", "mlm_probability")
    mask_replace_prob = MaskingSetting("corruption", "mask_replace_prob")
    random_replace_prob = MaskingSetting("corruption", "random_replace_prob")

    @property
    def mlm(self) -> bool:
        """Hugging Face's: always True (masked-language modelling); setting False raises ValueError."""
        return True

    @mlm.setter
    def mlm(self, value: bool) -> None:
        require_mlm(value)

    @property
    def whole_word_mask(self) -> bool:
        """Hugging Face's: whether ``masking.units.strategy`` is 'whole_word'; setting it switches
        between 'token' and 'whole_word'."""
        return self.masking.units.strategy == "whole_word"

    @whole_word_mask.setter
    def whole_word_mask(self, value: bool) -> None:
        current = self.masking.units.strategy
        strategy = whole_word_strategy(current, value, self.mask_replace_prob)
        if not value and strategy == "whole_word":
            strategy = "token"
        self.masking = replace(self.masking, units=replace(self.masking.units, strategy=strategy))

    @property
    def seed(self) -> int:
        """The run seed; set to None, one drawn from torch's global generator (Hugging Face's None)."""
        return self._seed

    @seed.setter
    def seed(self, value: int | None) -> None:
        self._seed = int(torch.randint(2**62, ()).item()) if value is None else int(value)

    @property
    def pad_to_multiple_of(self) -> int | None:
        """Round the batch width up to a multiple of this (None: the longest row)."""
        return self._pad_to_multiple_of

    @pad_to_multiple_of.setter
    def pad_to_multiple_of(self, value: int | None) -> None:
        if value is not None and value < 1:
            raise ValueError(f"pad_to_multiple_of must be >= 1 or None; got {value}")
        self._pad_to_multiple_of = value

    @property
    def return_tensors(self) -> str:
        """Hugging Face's: what a call returns, "pt" (tensors) or "np" (numpy arrays)."""
        return self._return_tensors

    @return_tensors.setter
    def return_tensors(self, value: str) -> None:
        self._return_tensors = checked_tensors(value, self.device)

    @property
    def epoch(self) -> int:
        """The epoch whose masks the next call draws (see :meth:`set_epoch`)."""
        return self._epochs.current

    def set_epoch(self, epoch: int) -> None:
        """Use the masks of ``epoch`` in :meth:`__call__` from now on, and stop counting epochs."""
        self._epochs.set(epoch)

    def __call__(self, features: Sequence[Feature | Sequence[int]], return_tensors: str | None = None) -> BatchEncoding:
        """The batch of ``features`` with the masks of the collator's epoch (:meth:`set_epoch`, else
        counted), as Hugging Face's collators answer: a ``BatchEncoding`` of tensors
        (``return_tensors`` "pt", the default) or of numpy arrays ("np"). An example may also
        be a plain sequence of ids (a list, array or tensor), read as ``{"input_ids": ids}``."""
        tensors = self.return_tensors if return_tensors is None else checked_tensors(return_tensors, self.device)
        examples = [f if is_mapping(f) else {"input_ids": f} for f in features]
        hook = type(self).numpy_mask_tokens if tensors == "np" else type(self).torch_mask_tokens
        if hook in (MaskingCollator.numpy_mask_tokens, MaskingCollator.torch_mask_tokens):
            batch = self._collated(examples, epoch=None)
        else:
            _refuse_labels(examples)
            batch = hooked_batch(self, examples, tensors, consumed=_CONSUMED)
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
        return self._collated(features, epoch=epoch, mlm_probability=mlm_probability)

    def _collated(
        self, features: Sequence[Feature], *, epoch: int | None, mlm_probability: float | None = None
    ) -> dict[str, Any]:
        """:meth:`collate`; ``epoch`` None: the collator's, counting this call."""
        batch, masked = self._masked(features, epoch=epoch, mlm_probability=mlm_probability)
        device = masked.input_ids.device
        out = {
            **batch.extras,
            "input_ids": masked.input_ids,
            "attention_mask": torch.from_numpy(batch.attention_mask).to(device),
            "labels": masked.labels,
        }
        if self.replacement_noise:
            width = batch.input_ids.shape[1]
            noise = replacement_noise(batch.example_ids, width, seed=self.seed, epoch=self.epoch if epoch is None else epoch)
            out["replacement_noise"] = torch.from_numpy(noise).to(device)
        return on_tokenizer_side(out, batch.lengths, self.tokenizer)

    def mask(
        self, features: Sequence[Feature], *, epoch: int | None = None, mlm_probability: float | None = None
    ) -> tuple[PaddedBatch, MaskedBatch]:
        """Pad and mask; returns the padded batch and the :class:`MaskedBatch` (right-padded).

        Useful to inspect outcomes (mask / random / keep) and units next to the originals.
        ``epoch`` defaults to the collator's (:attr:`epoch`; not counted), ``mlm_probability``
        to its masking's. A row with nothing to mask (only special tokens, padding or
        protected ids) gets no target, and its labels are -100.

        Raises:
            ValueError: examples that carry ``labels``, or bad examples
                (:func:`~tokenmask.collate.masked.mask_examples`).
        """
        return self._masked(features, epoch=self.epoch if epoch is None else epoch, mlm_probability=mlm_probability)

    def _masked(
        self, features: Sequence[Feature], *, epoch: int | None, mlm_probability: float | None
    ) -> tuple[PaddedBatch, MaskedBatch]:
        """:meth:`mask`; ``epoch`` None: the collator's, counting this call."""
        _refuse_labels(features)
        masking = self.masking if mlm_probability is None else self.masking.at_rate(float(mlm_probability))
        batch = pad_for(
            features,
            self.tokenizer,
            pad_to_multiple_of=self.pad_to_multiple_of,
            consumed=_CONSUMED,
            with_word_ids=masking.units.needs_words,
        )
        epoch = self._epochs.of(batch.example_ids) if epoch is None else epoch
        return mask_padded(
            features, batch, self.tokenizer, masking, vocab=self.vocab, seed=self.seed, epoch=epoch, device=self.device
        )

    def torch_mask_tokens(
        self, inputs: torch.Tensor, special_tokens_mask: torch.Tensor | None = None, offset_mapping: Any = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Hugging Face's masking hook: ``(inputs, labels)``, both ``(B, T)``, for padded ``inputs``.

        Masks at :attr:`epoch`, each row keyed by its tokens (bare ids carry no example id), words
        from the tokenizer's decoder (``offset_mapping`` is not used); ``inputs`` is not
        modified. A call goes through it (or :meth:`numpy_mask_tokens` for "np") only in a
        subclass that overrides it, so that the override takes effect.
        """
        ids = torch.as_tensor(inputs)
        special = None if special_tokens_mask is None else torch.as_tensor(special_tokens_mask).cpu().numpy()
        masked = masked_rows(self, ids.detach().cpu().numpy(), special, self._epochs)
        return masked.input_ids.to(ids.device, ids.dtype), masked.labels.to(ids.device, ids.dtype)

    def numpy_mask_tokens(
        self, inputs: np.ndarray, special_tokens_mask: np.ndarray | None = None, offset_mapping: Any = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`torch_mask_tokens` on numpy arrays (Hugging Face's hook for ``return_tensors="np"``)."""
        special = None if special_tokens_mask is None else np.asarray(special_tokens_mask)
        masked = masked_rows(self, np.asarray(inputs), special, self._epochs)
        return masked.input_ids.cpu().numpy(), masked.labels.cpu().numpy()


def _refuse_labels(features: Sequence[Feature]) -> None:
    """Raises ValueError when an example carries ``labels``, which MLM labels would overwrite."""
    if any("labels" in f for f in features):
        raise ValueError(
            "examples already carry 'labels': MaskingCollator writes MLM labels and would "
            "overwrite them; drop the column, or use MaskingAugmenter to keep task labels"
        )
