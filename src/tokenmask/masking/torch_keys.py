""":mod:`.keys` in torch: the same counter-based random words, on int64 tensors where they are.

The 64-bit words are int64 tensors read as two's complement: products and sums wrap modulo
2^64 as uint64 ones do, and right shifts are made logical by masking (torch has no uint64
arithmetic on every device). Same numbers bit for bit, on the CPU or an accelerator.
"""

from __future__ import annotations

import torch

from tokenmask.masking.keys import GAMMA, MUL1, MUL2, Stream, epoch_key, stream_word


def signed(word: int) -> int:
    """A 64-bit word (a Python int in ``[0, 2^64)``) as the int64 with the same bits.

    ``signed(2**64 - 1)  ->  -1``; ``signed(5)  ->  5``
    """
    return word - (1 << 64) if word >= 1 << 63 else word


_GAMMA, _MUL1, _MUL2 = signed(GAMMA), signed(MUL1), signed(MUL2)
_LOW32 = (1 << 32) - 1


def shift_right(words: torch.Tensor, bits: int) -> torch.Tensor:
    """Logical right shift of int64 words read as uint64 (torch's ``>>`` copies the sign bit)."""
    return (words >> bits) & ((1 << (64 - bits)) - 1)


def mix64(words: torch.Tensor) -> torch.Tensor:
    """:func:`tokenmask.masking.keys.mix64` on int64 tensors: the SplitMix64 finaliser."""
    words = words ^ shift_right(words, 30)
    words = words * _MUL1
    words = words ^ shift_right(words, 27)
    words = words * _MUL2
    return words ^ shift_right(words, 31)


def row_keys(example_ids: torch.Tensor, *, seed: int, epoch: int) -> torch.Tensor:
    """:meth:`RowKeys.derive <tokenmask.masking.keys.RowKeys.derive>`: ``(B,)`` int64 keys."""
    return mix64(example_ids.reshape(-1).to(torch.int64) * _GAMMA + signed(epoch_key(seed, epoch)))


def stream_bits(keys: torch.Tensor, stream: Stream, positions: torch.Tensor) -> torch.Tensor:
    """:meth:`RowKeys.bits <tokenmask.masking.keys.RowKeys.bits>`: ``(B, N)`` int64 words for
    ``(N,)`` shared or ``(B, N)`` per-row positions."""
    stream_keys = keys ^ signed(stream_word(stream))
    return mix64(stream_keys[:, None] + (positions + 1) * _GAMMA)


def stream_bits_at(keys: torch.Tensor, stream: Stream, rows: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """:meth:`RowKeys.bits_at <tokenmask.masking.keys.RowKeys.bits_at>`: ``(N,)`` words at ``(row, position)`` pairs."""
    stream_keys = keys ^ signed(stream_word(stream))
    return mix64(stream_keys[rows] + (positions + 1) * _GAMMA)


def low32(words: torch.Tensor) -> torch.Tensor:
    """:func:`tokenmask.masking.keys.low32`: the low 32 bits of the words, as non-negative int64."""
    return words & _LOW32


def high32(words: torch.Tensor) -> torch.Tensor:
    """The high 32 bits of the words, as non-negative int64 (the numpy path writes ``words >> 32``)."""
    return shift_right(words, 32)


def unit_float(words: torch.Tensor) -> torch.Tensor:
    """:func:`tokenmask.masking.keys.unit_float`: uniform float64 in ``[0, 1)`` from the top 53 bits."""
    return shift_right(words, 11).to(torch.float64) * (1.0 / (1 << 53))
