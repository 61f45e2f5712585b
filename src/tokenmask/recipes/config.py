"""Settings of the training recipes (pre-training, fine-tuning): one frozen, validated dataclass each; the CLI builds them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from tokenmask.text.byte_checks import MAX_LINE_BYTES
from tokenmask.blocks.build import DEFAULT_VALIDATION_SHARE
from tokenmask.train.models import PRESETS


def _doc(text: str) -> dict[str, str]:
    return {"help": text}


@dataclass(frozen=True)
class PretrainConfig:
    """What to train, on what, for how long. Masking settings live in ``masking``.

    The defaults are the built-in recipe, chosen by measurement for about 9 minutes on 2 CPU
    cores (README, "Choosing the default recipe"): modernbert-tiny, batch 8 x 128, lr 2e-3.
    """

    output: str = field(metadata=_doc("output folder: checkpoints, metrics, resolved config"))
    corpus: tuple[str, ...] = field(default=(), metadata=_doc("files, folders or globs; none = the bundled Shakespeare"))
    document_unit: Literal["paragraph", "file", "line"] = field(
        default="paragraph", metadata=_doc("one document per paragraph, file or line of .txt/.md files")
    )
    text_field: str = field(default="text", metadata=_doc("the text field of JSON records, column of CSV/Parquet files and datasets"))
    strict: bool = field(
        default=False,
        metadata=_doc(
            "refuse bytes that are not UTF-8 in text, JSON and CSV files (an error naming file and line); "
            "without it they become U+FFFD and the lines holding them are counted in the run's first line"
        ),
    )
    max_line_bytes: int = field(
        default=MAX_LINE_BYTES,
        metadata=_doc(
            "longest line of a text or JSON Lines file (or JSON array record), in bytes; a longer one is an error "
            "naming file, line and length, found after reading no more than the limit (a 50 MB line would take "
            "minutes to tokenize as one document)"
        ),
    )
    cache_dir: str | None = field(default=None, metadata=_doc("block cache folder (none = $TOKENMASK_CACHE or ~/.cache/tokenmask)"))
    no_cache: bool = field(default=False, metadata=_doc("encode the corpus afresh, without reading or writing the block cache"))
    tokenizer: str | None = field(
        default=None,
        metadata=_doc(
            "tokenizer folder or built-in name (none = the --init model's own, else bert-base-uncased); "
            "with --init, it must have the model's vocabulary"
        ),
    )
    preset: str = field(default="modernbert-tiny", metadata=_doc(f"model size when training from scratch: {', '.join(PRESETS)}"))
    init: str | None = field(default=None, metadata=_doc("continue from this local checkpoint folder, or 'minilm' (all-MiniLM-L6-v2, new MLM head)"))
    max_length: int = field(default=128, metadata=_doc("block length in tokens"))
    batch_size: int = field(default=8, metadata=_doc("blocks per micro-batch"))
    grad_accum: int = field(default=1, metadata=_doc("micro-batches per optimizer step"))
    lr: float = field(default=2e-3, metadata=_doc("peak learning rate (AdamW)"))
    weight_decay: float = field(default=0.01, metadata=_doc("AdamW weight decay"))
    warmup: float = field(default=0.06, metadata=_doc("share of steps spent warming the learning rate up"))
    schedule: Literal["linear", "cosine"] = field(default="linear", metadata=_doc("decay after warm-up"))
    max_steps: int | None = field(default=None, metadata=_doc("stop after this many optimizer steps"))
    max_time: float | None = field(default=None, metadata=_doc("stop after this many minutes"))
    max_tokens: int | None = field(default=None, metadata=_doc("stop after this many training tokens"))
    eval_every: int = field(default=250, metadata=_doc("evaluate (at fixed masks) every N steps"))
    eval_blocks: int = field(default=128, metadata=_doc("validation blocks used per evaluation"))
    save_every: int = field(default=500, metadata=_doc("write a resumable checkpoint every N steps to OUTPUT/checkpoints/step-N"))
    keep_last: int = field(
        default=2, metadata=_doc("keep the N newest valid checkpoints; older ones are removed once a new one is written and verified")
    )
    resume: bool = field(default=False, metadata=_doc("continue the run in OUTPUT from its newest valid checkpoint (from the start if it has none)"))
    overwrite: bool = field(default=False, metadata=_doc("start afresh in an OUTPUT that already holds a run"))
    validation_share: float = field(default=DEFAULT_VALIDATION_SHARE, metadata=_doc("share of documents held out"))
    seed: int = field(default=0, metadata=_doc("random seed (model init, order, masks)"))
    dupe_factor: int | None = field(
        default=None,
        metadata=_doc("static masking: only this many different masks per block, reused in turn (none = new masks every epoch)"),
    )
    mlm_probability_end: float | None = field(
        default=None,
        metadata=_doc("masking-rate schedule: end at this rate, linearly from --mlm-probability (none = constant)"),
    )
    eval_mlm_probability: float = field(
        default=0.15, metadata=_doc("masking rate of the fixed evaluation masks (the same for every recipe, so runs compare)")
    )
    precision: Literal["auto", "fp32", "bf16"] = field(
        default="auto", metadata=_doc("auto = bf16 autocast where the hardware has it (recent GPUs, AMX/AVX512-BF16 CPUs), else fp32")
    )
    cpu: bool = field(default=False, metadata=_doc("train on the CPU even if a GPU is present"))
    num_workers: int = field(
        default=0, metadata=_doc("DataLoader worker processes that collate and mask batches (0 = in the training process)")
    )
    max_bad_steps: int = field(
        default=5, metadata=_doc("stop after this many steps in a row with a NaN or infinite loss or gradient (each is skipped)")
    )
    masking: dict[str, Any] = field(default_factory=dict, metadata=_doc("MaskingCollator keyword arguments"))

    def __post_init__(self) -> None:
        positive = ("max_length", "batch_size", "grad_accum", "eval_every", "eval_blocks", "save_every", "keep_last", "max_bad_steps")
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1; got {getattr(self, name)}")
        if self.max_length < 8:
            raise ValueError(f"max_length must be >= 8; got {self.max_length}")
        if self.lr <= 0:
            raise ValueError(f"lr must be > 0; got {self.lr}")
        if not 0.0 <= self.warmup < 1.0:
            raise ValueError(f"warmup must be in [0, 1); got {self.warmup}")
        if self.schedule not in ("linear", "cosine"):
            raise ValueError(f"schedule must be 'linear' or 'cosine'; got {self.schedule!r}")
        if not 0.0 < self.validation_share < 0.5:
            raise ValueError(f"validation_share must be in (0, 0.5); got {self.validation_share}")
        if self.dupe_factor is not None and self.dupe_factor < 1:
            raise ValueError(f"dupe_factor must be >= 1; got {self.dupe_factor}")
        if self.max_steps is None and self.max_time is None and self.max_tokens is None:
            raise ValueError("give max_steps, max_tokens or max_time (any of them; the first reached stops the run)")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1; got {self.max_tokens}")
        for name in ("mlm_probability_end", "eval_mlm_probability"):
            value = getattr(self, name)
            if value is not None and not 0.0 < value <= 1.0:
                raise ValueError(f"{name} must be in (0, 1]; got {value}")
        if self.document_unit not in ("paragraph", "file", "line"):
            raise ValueError(f"document_unit must be 'paragraph', 'file' or 'line'; got {self.document_unit!r}")
        if self.precision not in ("auto", "fp32", "bf16"):
            raise ValueError(f"precision must be 'auto', 'fp32' or 'bf16'; got {self.precision!r}")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1; got {self.max_steps}")
        if self.max_time is not None and self.max_time <= 0:
            raise ValueError(f"max_time must be > 0 minutes; got {self.max_time}")
        if self.num_workers < 0:
            raise ValueError(f"num_workers must be >= 0; got {self.num_workers}")
        if self.num_workers and self.mlm_probability_end is not None:
            raise ValueError("mlm_probability_end changes the masking rate as the run goes, which worker processes "
                             "do not see: use num_workers 0 with it")  # fmt: skip
        if self.max_line_bytes < 1:
            raise ValueError(f"max_line_bytes must be >= 1; got {self.max_line_bytes}")
        if self.init is None and self.preset not in PRESETS:
            raise ValueError(f"unknown preset {self.preset!r}; choose one of {', '.join(PRESETS)}")


FINETUNE_TASKS = ("classify", "tokens")
FINETUNE_METRICS = {"classify": ("macro_f1", "accuracy", "loss"), "tokens": ("span_f1", "accuracy", "macro_f1", "loss")}
"""Metrics ``best_metric`` may name, per task; the first is the default. Loss is lower-better."""


@dataclass(frozen=True)
class FinetuneConfig:
    """What to fine-tune, on which labelled data, for how long, with which augmentation.

    Satisfies the loop's ``LoopSettings``. The run stops at the first of ``epochs`` (turned
    into optimizer steps once the data is read), ``max_steps``, ``max_tokens`` and ``max_time``.
    """

    output: str = field(metadata=_doc("output folder: model, best checkpoint, metrics, results.json"))
    data: tuple[str, ...] = field(
        default=(), metadata=_doc("labelled files, folders or globs; none = the built-in Rotten Tomatoes snippets, split by movie")
    )
    eval_data: tuple[str, ...] = field(default=(), metadata=_doc("validation files (none = hold out a deterministic share of DATA)"))
    model: str = field(default="minilm", metadata=_doc("checkpoint folder (e.g. OUTPUT/model of pretrain) or minilm"))
    task: Literal["classify", "tokens"] = field(
        default="classify", metadata=_doc("classify = one label per text; tokens = one tag per word (BIO, CoNLL or JSON lists)")
    )
    text_column: str | None = field(
        default=None, metadata=_doc("column of the text (classify: default 'text') or of the word list (tokens: default 'tokens')")
    )
    label_column: str | None = field(
        default=None, metadata=_doc("column of the label (classify: default 'label') or of the tag list (tokens: default 'tags')")
    )
    group_by: str | None = field(
        default=None, metadata=_doc("column naming each example's group (a movie, an author): the split keeps every group on one side")
    )
    validation_share: float = field(default=0.1, metadata=_doc("share of the examples (or groups) held out when no --eval is given"))
    max_length: int = field(default=128, metadata=_doc("tokens per example at most, special tokens included; longer ones are cut (and counted)"))
    batch_size: int = field(default=32, metadata=_doc("examples per micro-batch (grouped by length, padded per batch)"))
    grad_accum: int = field(default=1, metadata=_doc("micro-batches per optimizer step"))
    lr: float = field(default=1e-4, metadata=_doc("peak learning rate (AdamW); 1e-4 suits minilm on short runs"))
    weight_decay: float = field(default=0.01, metadata=_doc("AdamW weight decay"))
    warmup: float = field(default=0.1, metadata=_doc("share of steps spent warming the learning rate up"))
    schedule: Literal["linear", "cosine"] = field(default="linear", metadata=_doc("decay after warm-up"))
    epochs: int | None = field(default=None, metadata=_doc("stop after this many passes over the training examples"))
    max_steps: int | None = field(default=None, metadata=_doc("stop after this many optimizer steps"))
    max_time: float | None = field(default=None, metadata=_doc("stop after this many minutes"))
    max_tokens: int | None = field(default=None, metadata=_doc("stop after this many training tokens"))
    eval_every: int = field(default=150, metadata=_doc("evaluate on the validation examples every N steps (and at the start and end)"))
    save_every: int = field(default=500, metadata=_doc("write a resumable checkpoint every N steps to OUTPUT/checkpoints/step-N"))
    keep_last: int = field(
        default=2, metadata=_doc("keep the N newest valid checkpoints (OUTPUT/best is never removed); older ones go once a new one is verified")
    )
    patience: int = field(
        default=3, metadata=_doc("warn when validation loss rose while training loss fell this many evaluations in a row")
    )
    best_metric: str | None = field(
        default=None, metadata=_doc("keep the checkpoint best by this metric in OUTPUT/best (default: macro_f1, or span_f1 for tokens)")
    )
    augment_rate: float = field(default=0.0, metadata=_doc("share of training tokens replaced by [MASK], labels kept (0 = off; never at evaluation)"))
    augment_strategy: Literal["token", "whole_word"] = field(default="token", metadata=_doc("mask single tokens or whole words"))
    augment_adaptive: bool = field(
        default=False, metadata=_doc("halve the augmentation rate each time the divergence warning fires (off below 0.01)")
    )
    seed: int = field(default=0, metadata=_doc("random seed (head init, order, augmentation masks, dropout)"))
    resume: bool = field(default=False, metadata=_doc("continue the run in OUTPUT from its newest valid checkpoint (from the start if it has none)"))
    overwrite: bool = field(default=False, metadata=_doc("start afresh in an OUTPUT that already holds a run"))
    precision: Literal["auto", "fp32", "bf16"] = field(
        default="auto", metadata=_doc("auto = bf16 autocast where the hardware has it, else fp32")
    )
    cpu: bool = field(default=False, metadata=_doc("train on the CPU even if a GPU is present"))
    max_bad_steps: int = field(
        default=5, metadata=_doc("stop after this many steps in a row with a NaN or infinite loss or gradient (each is skipped)")
    )

    @property
    def metric(self) -> str:
        """The metric the best checkpoint is chosen by (``best_metric`` or the task's default)."""
        return self.best_metric or FINETUNE_METRICS[self.task][0]

    def __post_init__(self) -> None:
        for name in ("max_length", "batch_size", "grad_accum", "eval_every", "save_every", "keep_last", "patience", "max_bad_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1; got {getattr(self, name)}")
        if self.max_length < 8:
            raise ValueError(f"max_length must be >= 8; got {self.max_length}")
        if self.task not in FINETUNE_TASKS:
            raise ValueError(f"task must be 'classify' or 'tokens'; got {self.task!r}")
        if self.lr <= 0:
            raise ValueError(f"lr must be > 0; got {self.lr}")
        if not 0.0 <= self.warmup < 1.0:
            raise ValueError(f"warmup must be in [0, 1); got {self.warmup}")
        if not 0.0 < self.validation_share < 0.5:
            raise ValueError(f"validation_share must be in (0, 0.5); got {self.validation_share}")
        if self.epochs is None and self.max_steps is None and self.max_time is None and self.max_tokens is None:
            raise ValueError("give epochs, max_steps, max_tokens or max_time (any of them; the first reached stops the run)")
        for name in ("epochs", "max_steps", "max_tokens"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1; got {getattr(self, name)}")
        if self.max_time is not None and self.max_time <= 0:
            raise ValueError(f"max_time must be > 0 minutes; got {self.max_time}")
        if self.seed < 0:
            raise ValueError(f"seed must be >= 0; got {self.seed}")
        self._check_choices()

    def _check_choices(self) -> None:
        if self.schedule not in ("linear", "cosine"):
            raise ValueError(f"schedule must be 'linear' or 'cosine'; got {self.schedule!r}")
        if self.precision not in ("auto", "fp32", "bf16"):
            raise ValueError(f"precision must be 'auto', 'fp32' or 'bf16'; got {self.precision!r}")
        if not 0.0 <= self.augment_rate < 1.0:
            raise ValueError(f"augment_rate must be in [0, 1); got {self.augment_rate}")
        if self.augment_strategy not in ("token", "whole_word"):
            raise ValueError(f"augment_strategy must be 'token' or 'whole_word'; got {self.augment_strategy!r}")
        if self.augment_adaptive and self.augment_rate == 0:
            raise ValueError("augment_adaptive halves the augmentation rate: give augment_rate > 0 too")
        allowed = FINETUNE_METRICS[self.task]
        if self.best_metric is not None and self.best_metric not in allowed:
            raise ValueError(f"best_metric for task {self.task!r} must be one of {', '.join(allowed)}; got {self.best_metric!r}")
