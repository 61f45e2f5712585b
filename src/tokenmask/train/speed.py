"""How fast a run goes: tokens per second, the share of step time spent waiting for data, and model FLOPs utilisation.

MFU is the model's training FLOPs per token (:func:`flops_per_token`) times tokens per second,
over the devices' peak (:func:`peak_flops`: dense bf16 / fp16 of known GPUs, else the user's
``--peak-tflops``; none on a CPU without it). The :class:`Speedometer` gives each step's numbers
to the run log and says once when the data loader holds the steps back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from tokenmask.train.heads import split_masked_lm
from tokenmask.train.last_layer import last_layer

PEAK_TFLOPS: dict[str, float] = {
    "H100 PCIe": 756.0, "H100": 989.0, "H200": 989.0, "GH200": 989.0, "A100": 312.0, "L4": 121.0, "A10": 125.0,
    "T4": 65.0,  # fp16: the T4 has no bf16
}  # fmt: skip
"""Dense (not 2:4 sparse) bf16 tensor-core peaks in TFLOP/s, by a part of the CUDA device name, first match wins."""
DATA_WARNING_SHARE = 0.10
"""The share of step time spent waiting for batches above which the run warns (over :data:`WINDOW` steps)."""
WINDOW = 50


def peak_flops(device: torch.device, given_tflops: float | None = None) -> float | None:
    """One device's peak in FLOP/s: ``given_tflops`` if set, else a known GPU's (:data:`PEAK_TFLOPS`), else None."""
    if given_tflops is not None:
        return given_tflops * 1e12
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((tflops * 1e12 for part, tflops in PEAK_TFLOPS.items() if part in name), None)


def flops_per_token(model: nn.Module, *, length: int, target_share: float | None = None) -> float:
    """Training FLOPs (forward and backward, 3 × forward) per token of sequences of ``length``.

    6 × the encoder's parameters less its embeddings, plus attention, 12 × attended length ×
    hidden per layer (a sliding-window layer attends to at most its window); with
    ``target_share`` (a masked LM) and a known sparse head (:func:`~tokenmask.train.heads.split_masked_lm`),
    the MLM head (hidden² + hidden × vocabulary) at the targets only, and the last layer's
    queries, attention and feed-forward too where it runs there; an MLM head not known runs its
    vocabulary projection at every token. Without ``target_share`` (a task head) every parameter
    counts at every token. BERT-base at 128 tokens, 15%: 6 × 85.0M + 14.2M of attention, less
    0.85 × (6 × 5.9M + 1.2M) in the last layer, plus 6 × 24.0M × 0.15 of head: 0.515 GFLOP.
    """
    config: Any = model.config
    hidden, vocab = config.hidden_size, config.vocab_size
    embedding = sum(p.numel() for name, p in model.named_parameters() if "embeddings" in name)
    windows = [_attended(config, kind, length) for kind in _layer_kinds(config)]
    attention = 12.0 * hidden * sum(windows)
    if target_share is None:
        return 6.0 * (sum(p.numel() for p in model.parameters()) - embedding) + attention
    parts = split_masked_lm(model)
    if parts is None:  # the full head, its vocabulary projection (tied to the embeddings) at every token
        return 6.0 * (sum(p.numel() for p in model.parameters()) - embedding + hidden * vocab) + attention
    encoder = sum(p.numel() for p in parts.encoder.parameters()) - embedding
    last = last_layer(parts.encoder)
    if last is not None:  # keys and values at every token; the rest of the layer at the targets
        encoder -= (sum(p.numel() for p in last.parameters()) - 2 * hidden * hidden) * (1 - target_share)
        attention -= 12.0 * hidden * windows[-1] * (1 - target_share)
    return 6.0 * encoder + attention + 6.0 * (hidden * hidden + hidden * vocab) * target_share


def _layer_kinds(config: Any) -> list[str]:
    kinds = getattr(config, "layer_types", None)
    return list(kinds) if kinds else ["full_attention"] * config.num_hidden_layers


def _attended(config: Any, kind: str, length: int) -> int:
    window = getattr(config, "local_attention", None)
    return min(length, window + 1) if kind == "sliding_attention" and window else length


class Speedometer:
    """Each step's speed for the run log, a line of it every ``every`` steps, and one warning when the
    data loader holds the run back.

    Args:
        flops_per_token: the model's (:func:`flops_per_token`), or None: no MFU.
        peak: all processes' peak FLOP/s together, or None: no MFU.
        say: gets the lines (the run's reporter).
        every: steps between lines (the evaluation interval).
    """

    def __init__(
        self, flops_per_token: float | None, peak: float | None, say: Callable[[str], None], *, every: int, trained: float = 0.0
    ) -> None:
        self.flops, self.peak, self.say, self.every = flops_per_token, peak, say, every
        self.trained = trained  # the run's training seconds (evaluation left out) at the end of the last step
        self.window: list[tuple[float, float]] = []  # (step seconds, data seconds) of the steps since the last check
        self.since = [0, 0.0, 0.0]  # tokens, step seconds, data seconds since the last line
        self.warned = False

    def step(self, step: int, *, tokens: int, trained: float, data_seconds: float) -> dict[str, float]:
        """``tokens`` (all processes') in the step that ended when the run had trained ``trained`` seconds
        (evaluation left out: the step is everything since the last one's end), ``data_seconds`` of it spent
        waiting for batches -> ``tokens_per_second``, ``data_share`` and (when known) ``mfu``, for its record."""
        seconds, self.trained = max(trained - self.trained, 1e-9), trained
        speed = self._speed(tokens, seconds, data_seconds)
        self.since = [self.since[0] + tokens, self.since[1] + seconds, self.since[2] + data_seconds]
        if step % self.every == 0:
            shown = self._speed(int(self.since[0]), max(self.since[1], 1e-9), self.since[2])
            mfu = f", MFU {shown['mfu']:.1%}" if "mfu" in shown else ""
            self.say(
                f"step {step}: {shown['tokens_per_second']:,.0f} tokens/s, {shown['data_share']:.0%} of it waiting for data{mfu}"
            )
            self.since = [0, 0.0, 0.0]
        self.window.append((seconds, data_seconds))
        if len(self.window) == WINDOW:
            share = sum(d for _, d in self.window) / sum(s for s, _ in self.window)
            if share > DATA_WARNING_SHARE and not self.warned and step > WINDOW:  # the first steps warm up
                self.warned = True
                self.say(
                    f"step {step}: the data loader held back {share:.0%} of the step time over the last {WINDOW} steps "
                    "(collating and masking batches; pre-training's --num-workers moves that into worker processes)"
                )
            self.window = []
        return speed

    def _speed(self, tokens: int, seconds: float, data_seconds: float) -> dict[str, float]:
        speed = {"tokens_per_second": tokens / seconds, "data_share": data_seconds / seconds}
        if self.flops is not None and self.peak is not None:
            speed["mfu"] = self.flops * tokens / seconds / self.peak
        return speed
