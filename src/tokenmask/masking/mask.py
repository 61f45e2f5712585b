"""The whole masking pass on a padded batch: eligible → units → select → corrupt.

Tensors in, tensors out, on the input's device. Two backends give the same numbers bit for
bit: vectorised numpy on the host (:mod:`.units` → :mod:`.select` → :mod:`.corrupt`, run
here) and torch where the tensors are (their ``torch_*`` twins, run by :mod:`.torch_mask`).
The result depends only on each row's tokens, word ids, example id, the seed and the epoch.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from typing import Literal, overload

import numpy as np
import torch

from tokenmask.masking.config import CorruptionConfig, SelectionConfig, UnitConfig
from tokenmask.masking.corrupt import apply_outcomes, choose_outcomes
from tokenmask.masking.keys import RowKeys, Stream, low32
from tokenmask.masking.select import select_tokens, select_units
from tokenmask.masking.torch_mask import mask_on_device
from tokenmask.masking.torch_units import token_units
from tokenmask.masking.units import build_units
from tokenmask.masking.vocab import VocabTables, warn_of_unknown_ids

Backend = Literal["auto", "torch", "numpy"]
BACKENDS: tuple[str, ...] = ("auto", "torch", "numpy")


@dataclass(frozen=True)
class MaskedBatch:
    """Output of :func:`mask_tokens`: tensors on the input's device, all ``(B, T)`` unless noted.

    Attributes:
        input_ids: corrupted inputs (int64).
        labels: original ids at targets, -100 elsewhere (int64).
        target_index: flat (row-major) positions of the targets, ``(N,)`` int64.
        target_outcome: their :class:`~tokenmask.masking.corrupt.Outcome` codes, ``(N,)`` int8.
        eligible: positions that could become targets (bool): not protected, padding or
            flagged special.
        strategy_units: the unit map the strategy built (int64), or None for the token
            strategy, whose selection needs none; read :attr:`units`, which covers both.
    """

    input_ids: torch.Tensor
    labels: torch.Tensor
    target_index: torch.Tensor
    target_outcome: torch.Tensor
    eligible: torch.Tensor
    strategy_units: torch.Tensor | None = field(default=None, repr=False)

    @functools.cached_property
    def outcome(self) -> torch.Tensor:
        """:class:`~tokenmask.masking.corrupt.Outcome` code per position, ``(B, T)`` int8."""
        outcome = torch.zeros(self.input_ids.shape, dtype=torch.int8, device=self.input_ids.device)
        outcome.view(-1)[self.target_index] = self.target_outcome
        return outcome

    @functools.cached_property
    def units(self) -> torch.Tensor:
        """The unit map selection worked on, ``(B, T)`` int64: the unit of each token, -1 where
        never a target (see :mod:`tokenmask.masking.units`).

        The token strategy's (each eligible token its own unit) is built here on first use, so
        that masking by tokens, the common case, does not pay for it.
        """
        if self.strategy_units is None:
            return token_units(self.eligible)
        return self.strategy_units


@overload
def as_numpy(tensor: torch.Tensor | np.ndarray, dtype: type) -> np.ndarray: ...


@overload
def as_numpy(tensor: torch.Tensor | np.ndarray | None, dtype: type) -> np.ndarray | None: ...


def as_numpy(tensor: torch.Tensor | np.ndarray | None, dtype: type) -> np.ndarray | None:
    """A numpy view (CPU tensors) or copy of ``tensor`` with ``dtype``; None stays None."""
    if tensor is None:
        return None
    if isinstance(tensor, torch.Tensor):
        tensor = tensor.detach().cpu().numpy()
    return np.asarray(tensor).astype(dtype, copy=False)


def eligible_positions(
    input_ids: np.ndarray,
    vocab: VocabTables,
    *,
    attention_mask: np.ndarray | None = None,
    special_tokens_mask: np.ndarray | None = None,
) -> np.ndarray:
    """Positions that may become targets: not protected, not padding, not flagged special.

    Ids at or above the vocabulary's size are ordinary tokens (nothing protects them), as
    Hugging Face's collator treats them, with a warning (:func:`warn_of_unknown_ids`).
    Returns ``(B, T)`` bool.

    Raises:
        ValueError: a negative id.
    """
    if input_ids.size == 0:
        blocked = np.zeros(input_ids.shape, dtype=bool)
    elif input_ids.min() < 0:
        raise ValueError(f"input_ids must be >= 0 (token ids); got {input_ids.min()}")
    elif input_ids.max() >= vocab.size:
        warn_of_unknown_ids(vocab.size)
        blocked = vocab.protected.take(np.minimum(input_ids, vocab.size - 1)) & (input_ids < vocab.size)
    else:
        blocked = vocab.protected.take(input_ids)
    if special_tokens_mask is not None:
        blocked |= special_tokens_mask.astype(bool, copy=False)
    eligible = ~blocked
    if attention_mask is not None:
        eligible &= attention_mask.astype(bool, copy=False)
    return eligible


def mask_tokens(
    input_ids: torch.Tensor | np.ndarray,
    *,
    vocab: VocabTables,
    example_ids: torch.Tensor | np.ndarray,
    seed: int,
    epoch: int = 0,
    unit_config: UnitConfig = UnitConfig(),
    selection: SelectionConfig = SelectionConfig(),
    corruption: CorruptionConfig = CorruptionConfig(),
    attention_mask: torch.Tensor | np.ndarray | None = None,
    special_tokens_mask: torch.Tensor | np.ndarray | None = None,
    word_ids: torch.Tensor | np.ndarray | None = None,
    given_spans: torch.Tensor | np.ndarray | None = None,
    term_mask: torch.Tensor | np.ndarray | None = None,
    backend: Backend = "auto",
) -> MaskedBatch:
    """Select and corrupt MLM targets in a right-padded batch.

    Args:
        input_ids: ``(B, T)`` int64 token ids; not modified.
        vocab: protected / replaceable lookup tables and the mask token.
        example_ids: ``(B,)`` int64, one stable id per example (its randomness is keyed on it).
        seed: run seed.
        epoch: epoch for dynamic masking (``epoch % dupe_factor`` for static masking).
        unit_config: masking unit (token, whole_word, span, ngram, pmi, given).
        selection: rate, bernoulli/exact, min per sequence, max predictions.
        corruption: mask / random / keep probabilities, per token or per unit. When
            ``vocab`` has no replaceable id, the targets a random replacement would have
            changed are kept instead (outcome KEEP): a replacement is never a protected id.
        attention_mask: ``(B, T)``, 0 on padding; padding is never selected.
        special_tokens_mask: ``(B, T)``, 1 on positions never to select (beyond ``vocab``).
        word_ids: ``(B, T)`` int64 word index per token, -1 on special tokens; needed by
            whole_word, span, ngram and pmi (for pmi and with terms: merged, one id per phrase).
        given_spans: ``(B, S, 2)`` ``[start, end)`` spans for strategy 'given' (-1 padded).
        term_mask: ``(B, T)``, 1 on tokens inside term occurrences. Terms come first: every
            unit holding a term token is selected before any other unit, and the other units
            fill the rest of the rate (bernoulli: each at ``q = (p·E - P) / (E - P)`` per row,
            so the expected share stays ``p``; exact: what the terms leave of the budget);
            terms beyond the rate are all selected in bernoulli mode, as far as the budget
            goes in exact mode (see :func:`~tokenmask.masking.select.select_units`). With the
            token strategy a term's tokens form one unit (the word strategies see terms as
            one word each in ``word_ids``).
        backend: ``"numpy"`` masks on the host (a device tensor is copied there and the
            results back); ``"torch"`` masks with torch where ``input_ids`` is and never
            leaves it; ``"auto"`` takes numpy for host data and torch for a tensor on an
            accelerator (the faster of the two on each, as measured by
            ``benchmarks/masking.py``). The numbers are the same whichever runs.

    Returns:
        :class:`MaskedBatch`: corrupted ``input_ids``, ``labels``, the targets' outcomes, the
        units, on ``input_ids``' device (the CPU for numpy input).

    Raises:
        ValueError: a bad shape, a negative id, an unknown backend, or word ids or spans
            missing for the strategy. Ids at or above ``vocab.size`` are ordinary tokens:
            they may be selected, and are never drawn as replacements.

    Example: ``mask_tokens(torch.tensor([[101, 7592, 2088, 102]]), vocab=tables,
    example_ids=torch.tensor([0]), seed=0)`` selects at least one of the two middle tokens
    (``min_masks_per_sequence=1``) and never 101 or 102 when they are protected.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}; got {backend!r}")
    if vocab.replaceable.size == 0 and corruption.random_replace_prob > 0:  # nothing to draw: keep those targets
        corruption = replace(corruption, random_replace_prob=0.0)
    on_device = isinstance(input_ids, torch.Tensor) and input_ids.device.type != "cpu"
    if backend == "torch" or (backend == "auto" and on_device):
        ids, examples = torch.as_tensor(input_ids), torch.as_tensor(example_ids)
        _check_rows(ids, examples)
        result = mask_on_device(
            ids.to(torch.int64).contiguous(), examples, vocab=vocab, seed=seed, epoch=epoch,
            unit_config=unit_config, selection=selection, corruption=corruption,
            attention_mask=_tensor(attention_mask), special_tokens_mask=_tensor(special_tokens_mask),
            word_ids=_tensor(word_ids), given_spans=_tensor(given_spans), term_mask=_tensor(term_mask),
        )  # fmt: skip
        return MaskedBatch(
            result.input_ids, result.labels, result.target_index, result.target_outcome, result.eligible, result.strategy_units
        )
    masked = _mask_on_host(
        input_ids, vocab=vocab, example_ids=example_ids, seed=seed, epoch=epoch, unit_config=unit_config,
        selection=selection, corruption=corruption, attention_mask=attention_mask,
        special_tokens_mask=special_tokens_mask, word_ids=word_ids, given_spans=given_spans, term_mask=term_mask,
    )  # fmt: skip
    if on_device:  # numpy asked for a device batch: the results go back where it came from
        device = input_ids.device
        units = None if masked.strategy_units is None else masked.strategy_units.to(device)
        return MaskedBatch(
            masked.input_ids.to(device), masked.labels.to(device), masked.target_index.to(device),
            masked.target_outcome.to(device), masked.eligible.to(device), units,
        )  # fmt: skip
    return masked


def _tensor(values: torch.Tensor | np.ndarray | None) -> torch.Tensor | None:
    return None if values is None else torch.as_tensor(values)


def _check_rows(ids: torch.Tensor, example_ids: torch.Tensor) -> None:
    """Raises ValueError unless ``ids`` is ``(B, T)`` with one example id per row."""
    if ids.ndim != 2:
        raise ValueError(f"input_ids must be a (batch, length) tensor; got shape {tuple(ids.shape)}")
    if example_ids.numel() != ids.shape[0]:
        raise ValueError(f"example_ids has {example_ids.numel()} entries for {ids.shape[0]} rows")


def _mask_on_host(
    input_ids: torch.Tensor | np.ndarray,
    *,
    vocab: VocabTables,
    example_ids: torch.Tensor | np.ndarray,
    seed: int,
    epoch: int,
    unit_config: UnitConfig,
    selection: SelectionConfig,
    corruption: CorruptionConfig,
    attention_mask: torch.Tensor | np.ndarray | None,
    special_tokens_mask: torch.Tensor | np.ndarray | None,
    word_ids: torch.Tensor | np.ndarray | None,
    given_spans: torch.Tensor | np.ndarray | None,
    term_mask: torch.Tensor | np.ndarray | None,
) -> MaskedBatch:
    """The numpy pass of :func:`mask_tokens`; CPU tensors out."""
    ids, keys = _ids_and_keys(input_ids, example_ids, seed=seed, epoch=epoch)
    attention, special = as_numpy(attention_mask, bool), as_numpy(special_tokens_mask, bool)
    eligible = eligible_positions(ids, vocab, attention_mask=attention, special_tokens_mask=special)  # (B, T)
    if ids.shape[1] == 0:
        return _nothing_to_mask(ids, eligible)
    select_bits = keys.bits(Stream.SELECT, np.arange(ids.shape[1]))  # (B, T) uint64
    select_keys = low32(select_bits)
    targets, units = _select_targets(
        eligible, select_keys, keys, unit_config, selection, word_ids, given_spans, as_numpy(term_mask, bool)
    )
    flat, codes = choose_outcomes(targets, select_bits, corruption, units)
    inputs, labels = apply_outcomes(ids, flat, codes, keys, vocab)
    return MaskedBatch(
        input_ids=torch.from_numpy(inputs),
        labels=torch.from_numpy(labels),
        target_index=torch.from_numpy(flat),
        target_outcome=torch.from_numpy(codes),
        eligible=torch.from_numpy(eligible),
        strategy_units=None if units is None else torch.from_numpy(units),
    )


def _ids_and_keys(
    input_ids: torch.Tensor | np.ndarray, example_ids: torch.Tensor | np.ndarray, *, seed: int, epoch: int
) -> tuple[np.ndarray, RowKeys]:
    """The ``(B, T)`` int64 ids as numpy, and each row's keys.

    Raises:
        ValueError: ``input_ids`` not two-dimensional, or not one example id per row.
    """
    ids = as_numpy(input_ids, np.int64)
    if ids is None or ids.ndim != 2:
        raise ValueError(f"input_ids must be a (batch, length) tensor; got shape {tuple(input_ids.shape)}")
    keys = RowKeys.derive(as_numpy(example_ids, np.int64), seed=seed, epoch=epoch)
    if len(keys) != ids.shape[0]:
        raise ValueError(f"example_ids has {len(keys)} entries for {ids.shape[0]} rows")
    return ids, keys


def _select_targets(
    eligible: np.ndarray,
    select_keys: np.ndarray,
    keys: RowKeys,
    unit_config: UnitConfig,
    selection: SelectionConfig,
    word_ids: torch.Tensor | np.ndarray | None,
    given_spans: torch.Tensor | np.ndarray | None,
    term_mask: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """``(targets, unit map)``, both ``(B, T)``: the token strategy selects among the eligible
    tokens directly and builds no unit map (None); the others select whole units of their map,
    the units holding a term token first (``term_mask``, see :func:`select_units`)."""
    if unit_config.strategy == "token" and term_mask is None:
        return select_tokens(eligible, select_keys, selection), None
    units = build_units(
        unit_config, eligible, keys, word_ids=as_numpy(word_ids, np.int64), given_spans=as_numpy(given_spans, np.int64),
        term_mask=term_mask,
    )  # fmt: skip
    return select_units(units, select_keys, selection, priority=term_mask), units


def _nothing_to_mask(ids: np.ndarray, eligible: np.ndarray) -> MaskedBatch:
    """What masking a ``(B, 0)`` batch gives: empty outputs of the right shape."""
    empty = torch.zeros(0, dtype=torch.int64)
    return MaskedBatch(
        torch.from_numpy(ids.copy()), torch.from_numpy(ids.copy()), empty, empty.to(torch.int8), torch.from_numpy(eligible)
    )
