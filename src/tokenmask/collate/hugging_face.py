"""Hugging Face's collator surface on tokenmask's settings: its arguments checked, its attributes
read from and written to a :class:`~tokenmask.masking.MaskingConfig`, its masking hooks.

What lets :class:`~tokenmask.collate.collator.MaskingCollator` stand in for
``DataCollatorForLanguageModeling``, kept apart from the masking it does.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from tokenmask.collate.epochs import Epochs
from tokenmask.collate.masked import mask_padded, on_tokenizer_side, pad_for
from tokenmask.collate.pad import Feature
from tokenmask.masking import MaskedBatch, VocabTables
from tokenmask.masking.config import Strategy


class MaskingSetting:
    """An attribute of Hugging Face's collator that reads one field of ``collator.masking`` and,
    set, replaces it: the config validates the value, and the collator draws masks with it.

    ``mlm_probability = MaskingSetting("selection", "mlm_probability")`` on the class makes
    ``collator.mlm_probability = 0.3`` give ``collator.masking.selection.mlm_probability == 0.3``.
    """

    def __init__(self, group: str, name: str) -> None:
        self.group, self.name = group, name
        self.__doc__ = f"Hugging Face's ``{name}``: ``masking.{group}.{name}``, read and set."

    def __get__(self, collator: Any, owner: type | None = None) -> Any:
        if collator is None:
            return self
        return getattr(getattr(collator.masking, self.group), self.name)

    def __set__(self, collator: Any, value: float) -> None:
        try:
            group = replace(getattr(collator.masking, self.group), **{self.name: float(value)})
        except ValueError as error:
            if "must be <= 1" in str(error):  # the corruption shares, which Hugging Face checks only when built
                raise ValueError(f"{error}; set the share that goes down first") from None
            raise
        collator.masking = replace(collator.masking, **{self.group: group})


def require_mlm(mlm: bool) -> None:
    """Raises ValueError unless ``mlm``: Hugging Face's causal-LM mode (``mlm=False``) is not tokenmask's."""
    if not mlm:
        raise ValueError(
            "MaskingCollator is for masked-language modelling (mlm=True); for causal-LM "
            "labels use transformers' DataCollatorForLanguageModeling(mlm=False)"
        )


def whole_word_strategy(strategy: Strategy, whole_word_mask: bool, mask_replace_prob: float) -> Strategy:
    """The strategy once Hugging Face's ``whole_word_mask`` is read: True means 'whole_word'.

    Hugging Face's collator then masks every target with [MASK]; tokenmask keeps the corruption
    as given (BERT's whole-word masking kept 80/10/10) and warns which arguments give Hugging
    Face's.

    Raises:
        ValueError: ``whole_word_mask`` with another strategy than 'token' or 'whole_word'.
    """
    if not whole_word_mask:
        return strategy
    if strategy not in ("token", "whole_word"):
        raise ValueError(f"whole_word_mask=True conflicts with strategy={strategy!r}")
    if mask_replace_prob < 1.0:
        warnings.warn(
            f"whole_word_mask=True keeps mask_replace_prob={mask_replace_prob:g} (some whole-word targets become "
            "random tokens or stay); Hugging Face's collator masks every one with [MASK]: pass "
            "mask_replace_prob=1.0, random_replace_prob=0.0 for that",
            UserWarning,
            stacklevel=3,  # the caller of the constructor or of the setter
        )
    return "whole_word"


def checked_tensors(return_tensors: str, device: torch.device | None) -> str:
    """``return_tensors`` if tokenmask gives it: "pt", or "np" for a collator masking on the host.

    Raises:
        ValueError: another framework, or "np" with a device.
    """
    if return_tensors not in ("pt", "np"):
        raise ValueError(f"return_tensors must be 'pt' (PyTorch tensors) or 'np' (numpy arrays); got {return_tensors!r}")
    if return_tensors == "np" and device is not None:
        raise ValueError(f"return_tensors='np' gives host arrays: it does not go with device={device}")
    return return_tensors


def warn_if_nothing_to_draw(vocab: VocabTables, random_replace_prob: float) -> None:
    """Warn when random replacements are asked for and ``vocab`` has nothing to draw (Hugging
    Face's collator would draw special tokens; tokenmask keeps those targets unchanged)."""
    if random_replace_prob > 0 and vocab.replaceable.size == 0:
        warnings.warn(
            f"the tokenizer's {vocab.size} ids are all special, padding or placeholders, so no random replacement "
            f"can be drawn: the random_replace_prob={random_replace_prob:g} share of the targets stays unchanged",
            UserWarning,
            stacklevel=4,  # the caller of the constructor (through the collator's _setup)
        )


def hooked_batch(collator: Any, features: Sequence[Feature], tensors: str, *, consumed: frozenset[str]) -> dict[str, Any]:
    """A call of a collator whose subclass overrides a masking hook, as Hugging Face's collator
    calls: pad (``consumed`` keys left out, rows right-padded), then ``collator.torch_mask_tokens``
    (or ``numpy_mask_tokens`` for ``tensors`` "np") masks the padded ids alone.

    Raises:
        ValueError: a strategy that needs the examples' own keys: 'given', 'pmi' or terms.
    """
    units = collator.masking.units
    if units.strategy == "given" or units.needs_phrases:
        raise ValueError(
            "a subclass that overrides torch_mask_tokens masks padded ids alone, as Hugging Face's hook does; "
            f"strategy {units.strategy!r}{' with terms' if units.mask_terms else ''} needs the examples' own "
            "spans or phrases: override collate() instead"
        )
    batch = pad_for(features, collator.tokenizer, pad_to_multiple_of=collator.pad_to_multiple_of, consumed=consumed)
    special = batch.special_tokens_mask
    if tensors == "np":
        inputs, labels = map(torch.as_tensor, collator.numpy_mask_tokens(batch.input_ids, special_tokens_mask=special))
    else:
        flags = None if special is None else torch.from_numpy(special)
        inputs, labels = collator.torch_mask_tokens(torch.from_numpy(batch.input_ids), special_tokens_mask=flags)
    out = {**batch.extras, "input_ids": inputs, "attention_mask": torch.from_numpy(batch.attention_mask), "labels": labels}
    return on_tokenizer_side(out, batch.lengths, collator.tokenizer)


def masked_rows(collator: Any, rows: np.ndarray, special: np.ndarray | None, epochs: Epochs) -> MaskedBatch:
    """The hooks' masking of a padded ``(B, T)`` id array at its width, with ``collator``'s settings,
    at the epoch ``epochs`` gives for the call (rows are known by their tokens, padding included)."""
    features = [{"input_ids": row} for row in rows]
    if special is not None:
        features = [{**f, "special_tokens_mask": flags} for f, flags in zip(features, special)]
    masking = collator.masking
    batch = pad_for(features, collator.tokenizer, with_word_ids=masking.units.needs_words)
    epoch = epochs.of(batch.example_ids)
    _, masked = mask_padded(
        features,
        batch,
        collator.tokenizer,
        masking,
        vocab=collator.vocab,
        seed=collator.seed,
        epoch=epoch,
        device=collator.device,
    )
    return masked
