"""Settings of the training loop, shared by pre-training and fine-tuning (each recipe composes one).

The recipes set their own defaults (``PretrainConfig`` trains at lr 2e-3, ``FinetuneConfig`` at
1e-4); the declarations, their ranges and help text are written here once.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from tokenmask.settings import check, setting

DEFAULT_MINUTES = 9.0
"""The time limit of a run given no limit at all: about 10 minutes in all on 2 CPU cores."""

TRACKERS: tuple[str, ...] = ("tensorboard", "wandb", "mlflow", "trackio", "comet_ml", "aim", "clearml", "dvclive")
"""The trackers of Accelerate that ``report_to`` may name."""
Precision = Literal["auto", "fp32", "bf16", "fp16"]


@dataclass(frozen=True)
class LoopConfig:
    """Where a run writes, how it batches and steps, when it stops, evaluates and saves.

    The run stops at the first limit reached (``max_steps``, ``max_tokens``, ``max_time``, or
    the recipe's ``epochs``); with none given it stops after :data:`DEFAULT_MINUTES`
    (:meth:`with_default_limit`).
    """

    output: str = setting("", help="output folder (the model ends in OUTPUT/model); required")
    batch_size: int = setting(8, help="examples (blocks) per micro-batch", ge=1)
    grad_accum: int = setting(1, help="micro-batches per optimizer step", ge=1)
    lr: float = setting(2e-3, help="peak learning rate (AdamW)", gt=0.0)
    weight_decay: float = setting(0.01, help="AdamW weight decay (never on biases and norms)", ge=0.0, advanced=True)
    warmup: float = setting(0.06, help="share of steps spent warming the learning rate up", ge=0.0, lt=1.0)
    schedule: Literal["linear", "cosine", "sqrt"] = setting(
        "linear", help="the decay's shape: linear, cosine, or sqrt (1 - √progress, mmBERT's)", advanced=True
    )
    decay: float = setting(
        1.0,
        help="share of the run, at its end, over which the learning rate decays; before it, after the warm-up, it holds "
        "at its peak (below 1: warm-up/stable/decay, ModernBERT's WSD; 0.1 decays over the last tenth)",
        gt=0.0,
        le=1.0,
        advanced=True,
    )
    decay_from: str | None = setting(
        None,
        help="run only the decay of a warm-up/stable run, from one of its checkpoints (OUTPUT/checkpoints/step-N): its "
        "model and optimizer state; the learning rate falls from --lr over this run's limit, in --schedule's shape, on "
        "this run's corpus (which may be new), read from the start",
        advanced=True,
    )
    layer_decay: float = setting(
        1.0,
        help="layer-wise learning-rate decay: encoder layer i of L trains at lr × layer_decay^(L+1−depth) "
        "(embeddings depth 0, layer i depth i+1); 1 = off",
        gt=0.0,
        le=1.0,
        advanced=True,
    )
    head_warmup_steps: int = setting(
        0, help="train only the parameters outside the base model (the new head) for this many steps first", ge=0, advanced=True
    )
    max_steps: int | None = setting(None, help="stop after this many optimizer steps", ge=1)
    max_tokens: int | None = setting(None, help="stop after this many training tokens", ge=1)
    max_time: float | None = setting(
        None, help=f"stop after this many minutes, counted across resumes ({DEFAULT_MINUTES:g} when no limit is given)", gt=0.0
    )
    eval_every: int = setting(
        250, help="evaluate every N steps, and at the end (and at the start, unless --no-eval-at-start)", ge=1
    )
    eval_at_start: bool = setting(True, help="evaluate before the first step too (the curve's starting point)", advanced=True)
    save_every: int = setting(500, help="write a resumable checkpoint every N steps to OUTPUT/checkpoints/step-N", ge=1)
    keep_last: int = setting(
        2,
        help="keep the N newest valid checkpoints; older ones are removed once a new one is written and verified",
        ge=1,
        advanced=True,
    )
    snapshots: tuple[float, ...] = setting(
        (),
        separator=",",
        metavar="SHARES",
        help="also save the model (no training state) when the run reaches these shares of its token limit (of its "
        "step limit without one), in OUTPUT/snapshots/fraction-F, e.g. 0.25,0.5: a study fine-tunes from them",
        advanced=True,
    )
    resume: bool = setting(
        False, help="continue the run in OUTPUT from its newest valid checkpoint (from the start if it has none)"
    )
    overwrite: bool = setting(False, help="start afresh in an OUTPUT that already holds a run")
    seed: int = setting(0, help="random seed (model init, order, masks, dropout)", ge=0)
    precision: Precision = setting(
        "auto",
        help="auto = bf16 autocast where the hardware has it (recent GPUs, AMX/AVX512-BF16 CPUs), else fp32; "
        "fp16 = fp16 autocast with a gradient scaler, for GPUs without bf16 (V100, T4)",
    )
    cpu: bool = setting(False, help="train on the CPU even if a GPU is present")
    report_to: str = setting(
        "tensorboard",
        help="comma-separated trackers that get the logged numbers, through Accelerate: tensorboard (in "
        "OUTPUT/tensorboard), wandb, mlflow, trackio, comet_ml, aim, clearml, dvclive; or none. "
        "OUTPUT/metrics.jsonl is always written",
    )
    compile: bool = setting(
        False,
        help="compile the encoder's layers with torch.compile (not a last layer that runs at the targets only): "
        "its first step takes a while (20 s for the default model on 2 CPU cores); for GPUs and long runs",
        advanced=True,
    )
    peak_tflops: float | None = setting(
        None,
        help="one device's dense bf16 peak in TFLOP/s, for the model FLOPs utilisation (MFU) logged with each step "
        "(none = known GPUs' own: H100, H200, A100, L4, A10, T4; no MFU on a CPU)",
        gt=0.0,
        advanced=True,
    )
    max_bad_steps: int = setting(
        5,
        help="stop after this many steps in a row with a NaN or infinite loss or gradient (each is skipped)",
        ge=1,
        advanced=True,
    )

    def __post_init__(self) -> None:
        check(self)
        unknown = [name for name in self.trackers if name not in TRACKERS]
        if unknown or (self.trackers == () and self.report_to.strip() != "none"):
            raise ValueError(f"report_to must be 'none' or names from {', '.join(TRACKERS)}; got {self.report_to!r}")
        for share in self.snapshots:
            if not 0.0 < share < 1.0:
                raise ValueError(f"snapshots are shares of the run's limit, in (0, 1); got {share:g} (the end is OUTPUT/model)")
        if self.snapshots and self.max_tokens is None and self.max_steps is None:
            raise ValueError("snapshots are taken at shares of a token or step limit: give --max-tokens or --max-steps")

    @property
    def trackers(self) -> tuple[str, ...]:
        """The trackers ``report_to`` names (empty for 'none')."""
        names = tuple(name.strip() for name in self.report_to.split(",") if name.strip())
        return () if names == ("none",) else names

    @property
    def has_limit(self) -> bool:
        return self.max_steps is not None or self.max_tokens is not None or self.max_time is not None

    def reached(self, steps: int, tokens: int, seconds: float) -> bool:
        """Whether a run at ``steps``, ``tokens`` and ``seconds`` has reached one of its limits."""
        return (
            (self.max_steps is not None and steps >= self.max_steps)
            or (self.max_tokens is not None and tokens >= self.max_tokens)
            or (self.max_time is not None and seconds > self.max_time * 60)
        )

    def with_default_limit(self, *other_limits: object) -> LoopConfig:
        """This config, with ``max_time`` = :data:`DEFAULT_MINUTES` if no limit (nor any of ``other_limits``) is set."""
        if self.has_limit or any(limit is not None for limit in other_limits):
            return self
        return replace(self, max_time=DEFAULT_MINUTES)

    def snapshot_due(self, share: float, steps: int, tokens: int) -> bool:
        """Whether a run at ``steps`` and ``tokens`` has reached ``share`` of its token limit (of its
        step limit without one): ``max_tokens=1000``, share 0.25 -> due from 250 tokens on."""
        if self.max_tokens is not None:
            return tokens >= share * self.max_tokens
        return self.max_steps is not None and steps >= share * self.max_steps

    def describe_limits(self, *, epochs: int | None = None) -> str:
        """The limits in force, in words: ``"stops at 9 min or 2,000 steps, whichever comes first"``."""
        parts = [f"{epochs} epochs"] if epochs is not None else []
        if self.max_steps is not None:
            parts.append(f"{self.max_steps:,} steps")
        if self.max_tokens is not None:
            parts.append(f"{self.max_tokens:,} tokens")
        if self.max_time is not None:
            parts.append(f"{self.max_time:g} min")
        return "stops at " + " or ".join(parts) + (", whichever comes first" if len(parts) > 1 else "")
