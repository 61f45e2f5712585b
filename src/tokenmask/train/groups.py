"""The optimizer and its parameter groups: weight decay, layer-wise learning rates, and the head-only warm-up.

With the defaults (``layer_decay`` 1, no head warm-up) there are exactly two groups, decayed
matrices then biases and norms, as the loop always had: old checkpoints resume and runs repeat
bit for bit. The continued-pre-training recipe (README, "Continued pre-training") uses both
mechanisms to keep a pre-trained encoder off the unigram plateau while its new MLM head learns.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from tokenmask.train.config import LoopConfig

if TYPE_CHECKING:
    from tokenmask.train.schedule import Schedule

_LAYER = re.compile(r"\.layers?\.(\d+)\.")


def adamw(model: torch.nn.Module, config: LoopConfig) -> torch.optim.Optimizer:
    """AdamW without weight decay on biases and norms, with layer-wise learning rates and the head
    apart where the config asks (:func:`parameter_groups`); the fused kernel (as the HF Trainer
    uses since torch 2.8) where the parameters' device has it."""
    groups = parameter_groups(model, config)
    fused = all(p.device.type in ("cpu", "cuda") and p.is_floating_point() for p in model.parameters())
    return torch.optim.AdamW(groups, lr=config.lr, betas=(0.9, 0.98), eps=1e-6, fused=fused)


def lr_scheduler(
    optimizer: torch.optim.Optimizer, schedule: Schedule, config: LoopConfig, steps: int
) -> torch.optim.lr_scheduler.LambdaLR:
    """The learning rate of each parameter group, ``steps`` in (a resumed run's): the schedule times
    the group's multiplier (:func:`lr_multipliers`: layer-wise scale; the body still during a head-only warm-up)."""
    multipliers = lr_multipliers(
        optimizer.param_groups, schedule, head_warmup_steps=config.head_warmup_steps, ramp_steps=lambda: schedule.warmup_steps
    )
    return torch.optim.lr_scheduler.LambdaLR(optimizer, multipliers, last_epoch=steps - 1)


def is_head(model: torch.nn.Module, name: str) -> bool:
    """A parameter outside the base model (``bert.``, ``roberta.``, ``model.``…): the task head.

    A decoder tied to the word embeddings is the embedding tensor itself: ``named_parameters``
    names it once, under the base model, so it is no head parameter.
    """
    prefix = getattr(model, "base_model_prefix", "")
    return not (prefix and name.startswith(prefix + "."))


def depth(model: torch.nn.Module, name: str, layers: int) -> int:
    """0 = embeddings, ``i + 1`` = encoder layer ``i``, ``layers + 1`` = the head and the rest (a final norm).

    ``"bert.encoder.layer.2.output.dense.weight"`` with 6 layers -> 3; ``"cls.predictions.bias"`` -> 7.
    """
    if is_head(model, name):
        return layers + 1
    found = _LAYER.search(name)
    if found:
        return int(found.group(1)) + 1
    return 0 if "embed" in name.lower() else layers + 1


def parameter_groups(model: torch.nn.Module, config: LoopConfig) -> list[dict[str, Any]]:
    """AdamW groups: no weight decay on biases and norms; ``lr_scale`` per depth; head apart from body.

    A parameter at depth ``d`` of a model with ``L`` layers has ``lr_scale = layer_decay ** (L + 1 - d)``
    (:func:`depth`): with ``layer_decay`` 0.8 and 6 layers the embeddings train at 0.8⁷ ≈ 0.21 × lr,
    layer 5 at 0.8, the head at 1. Groups are split by depth only when ``layer_decay`` < 1 and
    into head / body only with a head warm-up, so the defaults give the two groups
    ``[decayed, not decayed]``. Each group carries ``lr_scale`` and ``head`` for
    :func:`lr_multipliers`.
    """
    layers = int(getattr(getattr(model, "config", None), "num_hidden_layers", 0) or 0)
    by_key: dict[tuple[bool, int, bool], list[torch.nn.Parameter]] = {}
    for name, parameter in model.named_parameters():  # a tied tensor appears once, under its first name
        no_decay = parameter.ndim < 2 or "norm" in name.lower()
        level = depth(model, name, layers) if config.layer_decay != 1 else layers + 1
        head = is_head(model, name) and config.head_warmup_steps > 0
        by_key.setdefault((no_decay, level, head), []).append(parameter)
    return [
        {
            "params": params,
            "weight_decay": 0.0 if no_decay else config.weight_decay,
            "lr_scale": config.layer_decay ** (layers + 1 - level),
            "head": head,
        }
        for (no_decay, level, head), params in sorted(by_key.items(), key=lambda item: item[0])
    ]


def lr_multipliers(
    groups: list[dict[str, Any]],
    schedule: Callable[[int], float],
    *,
    head_warmup_steps: int,
    ramp_steps: Callable[[], int | None],
) -> list[Callable[[int], float]]:
    """LambdaLR multipliers, one per group: ``lr_scale × schedule(step)``.

    During a head-only warm-up the body's multiplier is 0 for the first ``head_warmup_steps``
    steps, then ramps linearly from 0 over ``ramp_steps()`` steps (the schedule's warm-up
    length, known once it is fitted), so the encoder meets a head that already predicts
    something and is not shaken by the full learning rate at once.
    """

    def multiplier(group: dict[str, Any]) -> Callable[[int], float]:
        scale = group["lr_scale"]
        if group["head"] or head_warmup_steps <= 0:
            return lambda step: scale * schedule(step)

        def body(step: int) -> float:
            if step < head_warmup_steps:
                return 0.0
            ramp = max(1, ramp_steps() or 1)
            return scale * schedule(step) * min(1.0, (step - head_warmup_steps + 1) / ramp)

        return body

    return [multiplier(group) for group in groups]


class HeadWarmup:
    """Keeps the base model still for the first ``steps`` optimizer steps; the head trains.

    Its learning-rate multiplier is 0 then (:func:`lr_multipliers`), so AdamW leaves it
    unchanged (weight decay is scaled by the learning rate too). With ``freeze`` (one process)
    its parameters also have ``requires_grad`` False: no gradient, no backward cost, no Adam
    state, and gradient clipping sees the head's gradient only. Under DDP / FSDP every process
    must reduce the same parameters, so ``freeze`` is off: the body gets gradients (counted in
    the clipped norm) at learning rate 0, and its Adam state is dropped at step ``steps``, so
    the encoder starts from fresh moments as it does in one process.
    """

    def __init__(self, model: torch.nn.Module, steps: int, *, freeze: bool) -> None:
        self.body = [p for name, p in model.named_parameters() if not is_head(model, name)]
        self.steps, self.freeze, self.frozen = steps, freeze, False

    def before_step(self, step: int, optimizer: torch.optim.Optimizer) -> None:
        """Called before optimizer step ``step`` (0-based): freeze, unfreeze, or nothing."""
        if self.steps <= 0:
            return
        if self.freeze and (step < self.steps) != self.frozen:
            self.frozen = step < self.steps
            for parameter in self.body:
                parameter.requires_grad_(not self.frozen)
        if not self.freeze and step == self.steps:
            for parameter in self.body:
                optimizer.state.pop(parameter, None)
