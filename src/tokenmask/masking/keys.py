"""Stateless, counter-based randomness: every random number is a hash of where it is used.

A random draw for token ``t`` of example ``i`` is ``splitmix64(row_key(seed, epoch, i) + t·γ)``,
so it does not depend on the batch the example lands in, its place there, its padding, the
number of workers or what was drawn before. Streams keep independent uses apart. (A cheaper
32-bit Weyl + lowbias32 variant was tried and dropped: its keys at span starts were
over-dispersed across seeds, sd 1.27 of the binomial against 0.90 for SplitMix64.)
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import torch

_MASK64 = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15
"""2^64 / golden ratio: the SplitMix64 increment between consecutive counters (ids, positions)."""
MUL1 = 0xBF58476D1CE4E5B9
"""The first multiplier of the SplitMix64 finaliser (:func:`mix64`)."""
MUL2 = 0x94D049BB133111EB
"""The second multiplier of the SplitMix64 finaliser."""


class Stream(IntEnum):
    """Independent random streams; each use of randomness has its own."""

    SELECT = 1  # per token: low 32 bits = selection key, high 32 bits = mask/random/keep choice
    REPLACE = 2  # which replacement token a random-replaced target gets
    UNIT_LENGTH = 3  # span / n-gram lengths
    SAMPLE = 4  # the uniform a replaced-token-detection generator samples a target's replacement with


def _mix_int(z: int) -> int:
    """SplitMix64 finaliser on a Python int (for scalar keys)."""
    z &= _MASK64
    z = ((z ^ (z >> 30)) * MUL1) & _MASK64
    z = ((z ^ (z >> 27)) * MUL2) & _MASK64
    return z ^ (z >> 31)


def epoch_key(seed: int, epoch: int) -> int:
    """The 64-bit word the row keys of ``(seed, epoch)`` count from: the key of example ``i`` is
    ``mix64(epoch_key + i · GAMMA)``, the i-th output of the SplitMix64 stream it seeds.

    A Python int in ``[0, 2^64)``, shared by :meth:`RowKeys.derive` and :func:`.torch_keys.row_keys`.
    """
    return _mix_int(_mix_int(seed) + epoch * GAMMA)


def stream_word(stream: Stream) -> int:
    """The 64-bit word a stream's keys are xor-ed with (row key ^ stream word), so that streams
    draw independent numbers at the same positions. A Python int in ``[0, 2^64)``."""
    return _mix_int(int(stream) * GAMMA)


def mix64(z: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser, element-wise on a uint64 array. Returns a new array.

    A bijection of 64-bit integers with full avalanche: ``mix64(np.array([0], np.uint64))``
    is ``[0]``, ``mix64(np.array([1], np.uint64))`` is ``[0x5692161d100b05e5]``. Array
    arithmetic on uint64 wraps modulo 2^64 without warnings (unlike numpy scalars).
    """
    z = z ^ (z >> 30)
    z *= MUL1
    z ^= z >> 27
    z *= MUL2
    z ^= z >> 31
    return z


def as_uint64(values: torch.Tensor | np.ndarray) -> np.ndarray:
    """Reinterpret int64 values as uint64 (two's complement), without copying when possible."""
    array = values.detach().cpu().numpy() if isinstance(values, torch.Tensor) else np.asarray(values)
    return array.astype(np.int64, copy=False).view(np.uint64)


@dataclass(frozen=True)
class RowKeys:
    """One 64-bit key per example, derived from ``(seed, epoch, example id)``.

    ``keys`` is a ``(B,)`` uint64 array. ``bits(stream, positions)`` gives ``(B, N)`` uint64
    random words, one per example and position; the same ``(seed, epoch, id, stream, position)``
    always gives the same word.
    """

    keys: np.ndarray

    @classmethod
    def derive(cls, example_ids: torch.Tensor | np.ndarray, *, seed: int, epoch: int = 0) -> RowKeys:
        """Keys for a batch of examples.

        Args:
            example_ids: ``(B,)`` integer ids (any int64 value; negative ids are allowed).
            seed: the run's seed.
            epoch: the epoch (dynamic masking) or ``epoch mod dupe_factor`` (static masking).
        """
        # SplitMix64: the id-th output of the stream seeded by (seed, epoch).
        counters = as_uint64(example_ids).reshape(-1) * GAMMA
        counters += epoch_key(seed, epoch)
        return cls(keys=mix64(counters))

    def __len__(self) -> int:
        return int(self.keys.shape[0])

    def bits(self, stream: Stream, positions: np.ndarray) -> np.ndarray:
        """Random 64-bit words.

        Args:
            stream: which use the words are for.
            positions: ``(N,)`` positions shared by every row, or ``(B, N)`` per row; int64 >= 0.

        Returns:
            ``(B, N)`` uint64.
        """
        return mix64(self._stream_keys(stream)[:, None] + _position_offsets(positions))

    def bits_at(self, stream: Stream, rows: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """Random words at scattered ``(row, position)`` pairs; ``(N,)`` uint64.

        ``bits_at(s, r, p)[k] == bits(s, all positions)[r[k], p[k]]``: the same numbers as
        :meth:`bits`, computed only where needed.
        """
        return mix64(self._stream_keys(stream)[rows] + _position_offsets(positions))

    def _stream_keys(self, stream: Stream) -> np.ndarray:
        """64-bit streams: the row keys xor a per-stream constant."""
        return self.keys ^ np.array([stream_word(stream)], dtype=np.uint64)


def _position_offsets(positions: np.ndarray) -> np.ndarray:
    """``(position + 1) · γ`` in uint64: the counter offset of each position."""
    offsets = np.asarray(positions).astype(np.uint64)
    offsets += 1
    offsets *= GAMMA
    return offsets


_LOW_HALF = 0 if np.little_endian else 1  # uint32 index of the low half of a uint64


def low32(words: np.ndarray) -> np.ndarray:
    """The low 32 bits of uint64 words: a uint32 view, no copy."""
    return words.view(np.uint32).reshape(*words.shape, 2)[..., _LOW_HALF]


def unit_float(words: np.ndarray) -> np.ndarray:
    """Uniform floats in ``[0, 1)`` from the top 53 bits of uint64 words."""
    return (words >> 11).astype(np.float64) * (1.0 / (1 << 53))


def threshold32(probability: float) -> int:
    """The integer ``t`` with ``P(x < t) = probability`` for uniform 32-bit ``x``, up to 2^-32."""
    return round(probability * (1 << 32))


def content_ids(input_ids: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """A fallback example id: a hash of the example's tokens (ignoring padding).

    Identical examples get identical ids, hence identical masks; any change to a token or to
    the length changes the id.

    Args:
        input_ids: ``(B, T)`` int64.
        lengths: ``(B,)`` number of real (non-padding) tokens per row.

    Returns:
        ``(B,)`` int64.
    """
    _batch, width = input_ids.shape
    words = as_uint64(input_ids) * MUL1
    words += _position_offsets(np.arange(width))
    words = mix64(words)
    words[np.arange(width)[None, :] >= lengths[:, None]] = 0
    summed = words.sum(axis=1, dtype=np.uint64)
    summed ^= mix64(np.asarray(lengths).astype(np.uint64) + GAMMA)
    return mix64(summed).view(np.int64)
