"""From a list of examples (dicts) to padded numpy arrays: the shared front half of the collators.

Rows may be Python lists, numpy arrays or tensors. Padding is per batch (to the longest row,
rounded up to ``pad_to_multiple_of``), done with one flat copy instead of a loop over tokens.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

import numpy as np
import torch

from tokenmask.masking import content_ids

Feature = Mapping[str, Any]
"""One example as the collators take it: ``input_ids`` and optional companions (see
:class:`~tokenmask.collate.collator.MaskingCollator`) as lists, arrays or tensors, plus any keys
of the user's that pass through. A :class:`~tokenmask.blocks.pack.Block`,
:class:`~tokenmask.blocks.encode.EncodedExample` or
:class:`~tokenmask.labelled.align.LabelledExample` is one; so is a ``datasets`` row."""


def is_mapping(value: Any) -> TypeGuard[Mapping[str, Any]]:
    """``isinstance(value, Mapping)``, plain dicts (most examples) found without the ABC check:
    0.12 µs against 0.02, twice a row, is 8% of collating 512 rows of 128 tokens."""
    return type(value) is dict or isinstance(value, Mapping)


def row_lengths(rows: Sequence[Any]) -> np.ndarray:
    """``(B,)`` int64 lengths of the rows."""
    return np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))


def _as_row(row: Any) -> Any:
    if isinstance(row, torch.Tensor):
        return row.detach().cpu().numpy().reshape(-1)
    return row


def pad_rows(rows: Sequence[Any], lengths: np.ndarray, width: int, fill: int) -> np.ndarray:
    """Right-pad ``rows`` (lists, arrays or tensors) into a ``(B, width)`` int64 array.

    One slice assignment per row: numpy converts each list in C, faster than one flat
    ``fromiter`` plus a masked scatter.

    ``pad_rows([[5, 6, 7], [8]], np.array([3, 1]), 4, 0)  ->  [[5, 6, 7, 0], [8, 0, 0, 0]]``
    """
    out = np.full((len(rows), width), fill, dtype=np.int64)
    for i, (row, n) in enumerate(zip(rows, lengths.tolist())):
        out[i, :n] = _as_row(row)
    return out


def pad_flags(rows: Sequence[Any], lengths: np.ndarray, width: int) -> np.ndarray:
    """Right-pad 0/1 rows (term masks) into a ``(B, width)`` bool array, False on padding.

    Rows that are all lists of small ints are read as one ``bytes`` string, about twice as fast
    as :func:`pad_rows` (this runs on every batch with terms); others go through :func:`pad_rows`.
    Any non-zero value is True.

    ``pad_flags([[0, 1, 1], [1]], np.array([3, 1]), 4)  ->  [[F, T, T, F], [T, F, F, F]]``
    """
    if all(isinstance(row, list) for row in rows):
        try:
            flat = np.frombuffer(b"".join(map(bytes, rows)), dtype=np.uint8)
        except (TypeError, ValueError):  # not ints, or outside 0..255
            pass
        else:
            out = np.zeros((len(rows), width), dtype=bool)
            out[np.arange(width)[None, :] < lengths[:, None]] = flat != 0
            return out
    return pad_rows(rows, lengths, width, 0).astype(bool)


def pad_word_ids(rows: Sequence[Any], lengths: np.ndarray, width: int) -> np.ndarray:
    """Like :func:`pad_rows` for word ids, where ``None`` (special token) becomes -1."""
    out = np.full((len(rows), width), -1, dtype=np.int64)
    for i, (row, n) in enumerate(zip(rows, lengths.tolist())):
        try:
            out[i, :n] = _as_row(row)
        except TypeError:  # None inside: numpy reads it as NaN in a float array
            values = np.array(row, dtype=np.float64)
            out[i, :n] = np.where(np.isnan(values), -1, values)
    return out


def padded_width(lengths: np.ndarray, pad_to_multiple_of: int | None) -> int:
    """The batch width: the longest row, rounded up to a multiple of ``pad_to_multiple_of``."""
    width = int(lengths.max(initial=0))
    if pad_to_multiple_of:
        width = -(-width // pad_to_multiple_of) * pad_to_multiple_of
    return width


def _stable_id(value: Any) -> int:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return int(value.item())
    if isinstance(value, (str, bytes)):
        data = value.encode("utf-8") if isinstance(value, str) else value
        return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little", signed=True)
    raise ValueError(f"example id must be an integer or a string; got {type(value).__name__}")


def column(features: Sequence[Feature], key: str) -> list[Any] | None:
    """The values of ``key`` in every example, or None when no example has it.

    Raises:
        ValueError: some examples have the key and some do not.
    """
    present = [key in f for f in features]
    if not any(present):
        return None
    if not all(present):
        raise ValueError(f"some examples have a {key!r} entry and some do not")
    return [f[key] for f in features]


def example_ids(features: Sequence[Feature], input_ids: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``(B,)`` int64 stable example ids.

    Taken from each example's ``id`` (or ``idx``) key: integers as they are, strings hashed
    (BLAKE2b, so the same across processes). Without such a key, the fallback is a hash of
    the example's tokens: an example keeps its mask wherever it lands, and identical
    examples get identical masks.
    """
    ids = column(features, "id")
    if ids is None:
        ids = column(features, "idx")
    if ids is None:
        return content_ids(input_ids, lengths)
    if all(type(value) is int for value in ids):  # the common case, without a call per id
        return np.array(ids, dtype=np.int64)
    return np.array([_stable_id(value) for value in ids], dtype=np.int64)


def spans_to_array(spans: Sequence[Any], lengths: np.ndarray, name: str) -> np.ndarray:
    """Per-example ``[start, end)`` token spans to a ``(B, S, 2)`` int64 array, -1 padded.

    Raises:
        ValueError: a span outside its own example (``0 <= start < end <= length``).
    """
    arrays = []
    for row, (example_spans, length) in enumerate(zip(spans, lengths.tolist())):
        array = np.asarray(example_spans, dtype=np.int64).reshape(-1, 2)
        bad = (array[:, 0] < 0) | (array[:, 1] <= array[:, 0]) | (array[:, 1] > length)
        if bad.any():
            start, end = array[bad][0].tolist()
            raise ValueError(f"{name} [{start}, {end}) of example {row} is outside it: need 0 <= start < end <= {length}")
        arrays.append(array)
    out = np.full((len(arrays), max(1, max(len(a) for a in arrays)), 2), -1, dtype=np.int64)
    for row, array in enumerate(arrays):
        out[row, : len(array)] = array
    return out


def to_left_padding(array: np.ndarray, lengths: np.ndarray, fill: int) -> np.ndarray:
    """Move right-padded rows to the right edge (left padding); returns a new array.

    ``to_left_padding([[5, 6, 0]], [2], 0)  ->  [[0, 5, 6]]``
    """
    width = array.shape[1]
    source = np.arange(width)[None, :] - (width - lengths[:, None])  # (B, T)
    moved = np.take_along_axis(array, np.maximum(source, 0), axis=1)
    return np.where(source >= 0, moved, fill)


def left_pad(out: dict[str, Any], lengths: np.ndarray, fills: Mapping[str, int]) -> dict[str, Any]:
    """Move every ``(B, T)`` tensor of a collated batch to left padding (fill 0 unless in ``fills``)."""
    width = next((v.shape[1] for v in out.values() if isinstance(v, torch.Tensor) and v.dim() == 2), None)
    return {
        key: torch.from_numpy(to_left_padding(value.numpy(), lengths, fills.get(key, 0)))
        if isinstance(value, torch.Tensor) and value.dim() == 2 and value.shape[1] == width
        else value
        for key, value in out.items()
    }


@dataclass(frozen=True)
class PaddedBatch:
    """The padded arrays of a batch of examples, all ``(B, T)`` unless noted.

    Attributes:
        input_ids: token ids, right-padded with the pad id.
        attention_mask: 1 on real tokens (from the examples when given, else from lengths).
        lengths: ``(B,)`` real tokens per row.
        special_tokens_mask: 1 on positions never to select, when the examples give it.
        word_ids: word index per token (-1 on special tokens), when the examples give it.
        example_ids: ``(B,)`` stable ids.
        extras: other keys, collated (see :func:`collate_extras`).
        merged_word_ids: word ids with each phrase (PMI n-gram, term) merged, when masking used them.
        term_mask: 1 on tokens inside term occurrences, when masking used them.
    """

    input_ids: np.ndarray
    attention_mask: np.ndarray
    lengths: np.ndarray
    special_tokens_mask: np.ndarray | None
    word_ids: np.ndarray | None
    example_ids: np.ndarray
    extras: dict[str, Any]
    merged_word_ids: np.ndarray | None = None
    term_mask: np.ndarray | None = None


CONSUMED_KEYS = frozenset(
    {"input_ids", "attention_mask", "special_tokens_mask", "word_ids", "merged_word_ids", "term_mask", "id", "idx"}
)


def pad_examples(
    features: Sequence[Feature],
    *,
    pad_token_id: int | None,
    pad_to_multiple_of: int | None = None,
    consumed: frozenset[str] = CONSUMED_KEYS,
    sequence_fills: Mapping[str, int] | None = None,
    with_word_ids: bool = True,
) -> PaddedBatch:
    """Pad a list of examples; ``word_ids`` only when ``with_word_ids`` (they cost a copy).

    Raises:
        ValueError: empty batch, missing ``input_ids``, ragged or partial companion columns,
            rows to pad but no pad id.
    """
    if len(features) == 0:
        raise ValueError("empty batch: the collator got no examples")
    if not all(is_mapping(f) for f in features):
        raise ValueError("each example must be a dict with at least 'input_ids'")
    try:
        rows = [f["input_ids"] for f in features]
    except KeyError:
        raise ValueError("every example needs an 'input_ids' entry") from None
    lengths = row_lengths(rows)
    width = padded_width(lengths, pad_to_multiple_of)
    if pad_token_id is None and np.any(lengths < width):
        raise ValueError(
            "the examples need padding but the tokenizer has no pad token; set one "
            "(e.g. tokenizer.pad_token = tokenizer.eos_token) or pass examples of equal length"
        )
    input_ids = pad_rows(rows, lengths, width, 0 if pad_token_id is None else pad_token_id)

    def companion(key: str) -> list[Any] | None:
        values = column(features, key)
        if values is not None and not np.array_equal(row_lengths(values), lengths):
            raise ValueError(f"'{key}' must have the same length as 'input_ids' in every example")
        return values

    attention = companion("attention_mask")
    special = companion("special_tokens_mask")
    words = companion("word_ids") if with_word_ids else None
    real = (np.arange(width)[None, :] < lengths[:, None]).astype(np.int64)
    return PaddedBatch(
        input_ids=input_ids,
        attention_mask=real if attention is None else pad_rows(attention, lengths, width, 0),
        lengths=lengths,
        special_tokens_mask=None if special is None else pad_rows(special, lengths, width, 1),
        word_ids=None if words is None else pad_word_ids(words, lengths, width),
        example_ids=example_ids(features, input_ids, lengths),
        extras=collate_extras(features, consumed, lengths, width, sequence_fills or {}),
    )


def collate_extras(
    features: Sequence[Feature],
    consumed: frozenset[str],
    lengths: np.ndarray,
    width: int,
    sequence_fills: Mapping[str, int],
) -> dict[str, Any]:
    """Collate the keys the collator does not use itself.

    Numbers become a ``(B,)`` tensor; sequences as long as ``input_ids`` in every example
    (``token_type_ids``…) are padded like it (with ``sequence_fills[key]``, default 0) into a
    ``(B, T)`` tensor; anything else is passed on as a list.
    """
    out: dict[str, Any] = {}
    for key in features[0]:
        if key in consumed:
            continue
        values: list[Any] = [f.get(key) for f in features]
        first = values[0]
        if all(isinstance(v, (int, float, bool, np.integer, np.floating)) for v in values):
            out[key] = torch.tensor(values)
        elif (
            all(isinstance(v, (list, tuple, np.ndarray, torch.Tensor)) for v in values)
            and all(len(v) == n for v, n in zip(values, lengths))
            and not isinstance(first, (str, bytes))
        ):
            try:
                out[key] = torch.from_numpy(pad_rows(values, lengths, width, sequence_fills.get(key, 0)))
            except (TypeError, ValueError):
                out[key] = values
        else:
            out[key] = values
    return out
