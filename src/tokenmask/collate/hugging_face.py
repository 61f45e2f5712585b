"""Hugging Face's collator surface on tokenmask's settings: its arguments checked, its attributes
read from and written to a :class:`~tokenmask.masking.MaskingConfig`.

What lets :class:`~tokenmask.collate.collator.MaskingCollator` stand in for
``DataCollatorForLanguageModeling``, kept apart from the masking it does.
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from typing import Any

import torch

from tokenmask.masking import VocabTables
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
        group = replace(getattr(collator.masking, self.group), **{self.name: float(value)})
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
            stacklevel=4,  # the caller of the constructor
        )
