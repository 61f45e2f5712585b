"""Replaced-token detection (ELECTRA) on top of a mask: the generator's samples and the discriminator's labels.

Selection and corruption stay :func:`~tokenmask.masking.mask_tokens`'s; this module adds the
three pure steps between a generator's logits at the targets and a discriminator's batch:
a per-position uniform keyed like the masks (:func:`replacement_noise`), a sample drawn
with it by inverse CDF (:func:`sample_replacements`), and the discriminator's inputs and
labels (:func:`detector_inputs`). Deterministic: the same ``(seed, epoch, example id,
position)`` and the same logits give the same sample, in any batch.
"""

from __future__ import annotations

import numpy as np
import torch

from tokenmask.masking.config import IGNORE_INDEX
from tokenmask.masking.keys import RowKeys, Stream, unit_float

ORIGINAL, REPLACED = 0, 1
"""The discriminator's labels: the token is the original one / a generator's sample that differs from it."""


def replacement_noise(example_ids: np.ndarray, width: int, *, seed: int, epoch: int) -> np.ndarray:
    """One uniform in ``[0, 1)`` per example and position, from the :attr:`~.keys.Stream.SAMPLE` stream.

    Args:
        example_ids: ``(B,)`` int64, the ids the batch's masks were keyed on.
        width: ``T``, the batch's padded width.
        seed: the masks' seed.
        epoch: the masks' epoch.

    Returns:
        ``(B, T)`` float32 (every device has it); the numbers at a position do not depend on the
        batch or its width.
    """
    keys = RowKeys.derive(example_ids, seed=seed, epoch=epoch)
    return unit_float(keys.bits(Stream.SAMPLE, np.arange(width, dtype=np.int64))).astype(np.float32)


def sample_replacements(logits: torch.Tensor, noise: torch.Tensor, allowed: torch.Tensor, *, chunk: int = 1024) -> torch.Tensor:
    """Draw one id per row from ``softmax(logits)`` restricted to ``allowed`` ids, by inverse CDF.

    Row ``n`` gets the first id whose cumulative probability exceeds ``noise[n]``: one uniform
    per draw (not one per vocabulary entry, as Gumbel-max needs), so a draw is a pure function
    of the logits and the noise. Ids outside ``allowed`` (specials, ``[MASK]``, padding) have
    probability 0 and are never drawn, so the discriminator never sees them as replacements.

    ``sample_replacements(tensor([[0., 0., 0.]]), tensor([0.5]), tensor([True, False, True]))``
    -> ``tensor([2])``: ids 0 and 2 share the mass, the CDF is ``[0.5, 0.5, 1.0]``.

    Args:
        logits: ``(N, V)`` generator logits at the targets (any float dtype; no gradient flows).
        noise: ``(N,)`` uniforms in ``[0, 1)``.
        allowed: ``(V,)`` bool, at least one True.
        chunk: rows sampled at once: the float32 CDF of a chunk is ``chunk x V`` (1,024 rows of a
            30k vocabulary: 125 MB), whatever the batch.

    Returns:
        ``(N,)`` int64 ids, on ``logits``' device.
    """
    last_allowed = int(torch.nonzero(allowed).max())
    starts = range(0, logits.shape[0], chunk)
    drawn = [_inverse_cdf(logits[i : i + chunk], noise[i : i + chunk], allowed, last_allowed) for i in starts]
    return torch.cat(drawn) if drawn else torch.zeros(0, dtype=torch.long, device=logits.device)


def _inverse_cdf(logits: torch.Tensor, noise: torch.Tensor, allowed: torch.Tensor, last_allowed: int) -> torch.Tensor:
    with torch.no_grad():
        scores = logits.detach().float().masked_fill(~allowed, float("-inf"))
        cdf = torch.softmax(scores, dim=-1).cumsum(dim=-1)  # (n, V)
        wanted = noise.to(cdf) * cdf[:, -1]  # the last entry is 1 up to rounding
        drawn = torch.searchsorted(cdf, wanted.unsqueeze(-1), right=True).squeeze(-1)
        drawn = drawn.clamp_(max=logits.shape[-1] - 1)
        # rounding can land on a disallowed id just past the mass: take the last allowed one instead
        return torch.where(allowed[drawn], drawn, torch.full_like(drawn, last_allowed))


def detector_inputs(
    input_ids: torch.Tensor, labels: torch.Tensor, samples: torch.Tensor, attention_mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The discriminator's inputs and labels, from a masked batch and the generator's samples.

    The inputs are the original tokens with every target (``labels != -100``) replaced by its
    sample, whatever its corruption outcome was ([MASK], random or kept): the discriminator
    never sees [MASK]. Labels: :data:`REPLACED` where the sample differs from the original,
    :data:`ORIGINAL` at every other real token (a sample equal to the original, specials, the
    rest), -100 at padding (``attention_mask == 0``). As in ELECTRA, a unit (a whole word, a
    span) is judged token by token.

    ``input_ids [[CLS, MASK, MASK, SEP]]``, ``labels [[-100, a, b, -100]]``, ``samples [x, b]``
    -> inputs ``[[CLS, x, b, SEP]]``, labels ``[[0, 1, 0, 0]]``.

    Args:
        input_ids: ``(B, T)`` the generator's (corrupted) inputs.
        labels: ``(B, T)`` the original ids at the targets, -100 elsewhere.
        samples: ``(N,)`` one id per target, in row-major order of ``labels != -100``.
        attention_mask: ``(B, T)``, 0 at padding.

    Returns:
        ``(inputs, replaced)``, both ``(B, T)`` int64; the arguments are not changed.
    """
    targets = labels != IGNORE_INDEX
    original = torch.where(targets, labels, input_ids)
    inputs = original.clone()
    inputs[targets] = samples
    replaced = (inputs != original).long()
    return inputs, replaced.masked_fill(attention_mask == 0, IGNORE_INDEX)
