"""Masked-LM evaluation at fixed masks: loss, perplexity and masked-token accuracy.

The evaluation collator uses its own seed and never changes epoch, so every evaluation of a
run (and of any checkpoint on the same data) sees exactly the same masks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch

from tokenmask.data.collator import MaskingCollator
from tokenmask.train.heads import masked_lm_loss

EVAL_SEED_OFFSET = 1_000_003  # eval masks differ from any training epoch's


@dataclass(frozen=True)
class MlmMetrics:
    """Loss (mean cross-entropy per target), perplexity, accuracy, number of targets."""

    loss: float
    perplexity: float
    accuracy: float
    targets: int

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


@torch.no_grad()
def evaluate_mlm(
    model: torch.nn.Module,
    blocks: Sequence[dict[str, Any]],
    collator: MaskingCollator,
    *,
    batch_size: int = 32,
    device: torch.device | str = "cpu",
) -> MlmMetrics:
    """Evaluate ``model`` on ``blocks`` masked by ``collator`` (epoch 0 masks).

    Raises:
        ValueError: no blocks, or no target in them.
    """
    if not blocks:
        raise ValueError("no validation blocks to evaluate on")
    was_training = model.training
    model.eval()
    loss_sum, targets, correct = 0.0, 0, 0
    for start in range(0, len(blocks), batch_size):
        batch = {k: v.to(device) for k, v in collator(list(blocks[start : start + batch_size])).items() if isinstance(v, torch.Tensor)}
        out = masked_lm_loss(model, batch)
        loss_sum += float(out.loss_sum)
        targets += out.targets
        correct += out.correct
    model.train(was_training)
    if targets == 0:
        raise ValueError("the validation blocks hold no maskable token")
    loss = loss_sum / targets
    return MlmMetrics(loss=loss, perplexity=math.exp(min(loss, 50.0)), accuracy=correct / targets, targets=targets)
