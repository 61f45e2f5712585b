"""Settings of the recipes: one frozen dataclass each, composed of the stages' own configs.

``PretrainConfig`` = the loop + masking + reading + blocks + what is trained; ``FinetuneConfig``
= the loop (with fine-tuning's defaults) + the labelled data + augmentation. Every field is
declared once (:func:`tokenmask.settings.setting`); the command line, its help and the YAML
configs come from these declarations. Importing this module imports no torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from tokenmask.blocks.config import BlocksConfig
from tokenmask.collate.rate import parse_phases
from tokenmask.hub import HubConfig
from tokenmask.masking.config import MaskingConfig
from tokenmask.settings import build, check, flatten, setting
from tokenmask.text.config import ReadingConfig
from tokenmask.text.streaming import is_hub_name
from tokenmask.train.config import LoopConfig
from tokenmask.train.presets import DETECTOR_FAMILIES, PRESETS, detector_presets

EvalMasking = Literal["own", "common"]
Objective = Literal["mlm", "rtd"]
Packing = Literal["blocks", "documents"]

COMMON_EVAL_MASKING = MaskingConfig()
"""The masking of ``eval_masking="common"`` (at the run's ``eval_mlm_probability``): token-level,
Bernoulli selection, 80/10/10 decided per token, the seed-0 evaluation masks. Runs that trained
with different strategies, corruptions or seeds are scored on exactly the same targets."""


@dataclass(frozen=True)
class PretrainConfig:
    """What to pre-train, on what, for how long, with which masking.

    The defaults are the built-in recipe, chosen by measurement for about 9 minutes on 2 CPU
    cores (README, "Choosing the default recipe"): modernbert-tiny, batch 8 x 128, lr 2e-3.
    """

    loop: LoopConfig = setting(factory=LoopConfig, help="the training loop")
    masking: MaskingConfig = setting(factory=MaskingConfig, help="how training blocks are masked")
    reading: ReadingConfig = setting(factory=ReadingConfig, help="how corpus files are read")
    blocks: BlocksConfig = setting(factory=BlocksConfig, help="how the corpus becomes blocks")
    corpus: tuple[str, ...] = setting(
        (),
        positional=True,
        help="files, folders or globs: .txt/.md (--document-boundary), .jsonl/.json/.csv/.parquet (--text-field), "
        "save_to_disk folders; or a Hub dataset hf:NAME[:CONFIG][:SPLIT] (read with datasets, streaming); "
        "none = the bundled Shakespeare",
    )
    eval_corpus: tuple[str, ...] = setting(
        (),
        help="score on the first --eval-blocks blocks of these files (or hf: dataset) instead of on documents held out "
        "of the corpus (none = hold out --validation-share of the corpus's documents)",
    )
    tokenizer: str | None = setting(
        None,
        help="tokenizer folder, built-in name (bert-base-uncased, roberta-gpt2, minilm: these win over Hub repositories "
        "of the same name) or Hub id ORG/NAME (none = the --init model's own, else bert-base-uncased); with --init, it "
        "must have the model's vocabulary",
    )
    preset: str = setting("modernbert-tiny", help="model size when training from scratch", choices=tuple(PRESETS))
    init: str | None = setting(
        None,
        help="continue from this checkpoint: a local folder, 'minilm' (all-MiniLM-L6-v2, new MLM head) or a Hub id "
        "ORG/NAME (through the Hugging Face cache; a checkpoint without an MLM head gets a new one); the loop's defaults "
        "become the continued-pretraining recipe: --lr 1e-3 --head-warmup-steps 30 --layer-decay 0.8",
    )
    hub: HubConfig = setting(factory=HubConfig, help="the Hub")
    eval_blocks: int = setting(128, help="validation blocks used per evaluation", ge=1, advanced=True)
    dupe_factor: int | None = setting(
        None,
        help="static masking: only this many different masks per block, reused in turn (none = new masks every epoch)",
        ge=1,
        advanced=True,
    )
    packing: Packing = setting(
        "blocks",
        help="what a token of a packed block attends to: blocks = the whole block, across documents (BERT's); "
        "documents = its own document, positions restarting at each (ModernBERT's)",
    )
    batch_warmup_tokens: int | None = setting(
        None,
        help="batch-size warm-up: start each step with one micro-batch (per process) and add one each time another "
        "N / (grad-accum - 1) tokens are read, up to --grad-accum from N tokens on (ModernBERT's, mmBERT's)",
        ge=1,
        advanced=True,
    )
    mlm_probability_end: float | None = setting(
        None,
        help="masking-rate schedule: end at this rate, linearly from --mlm-probability (none = constant)",
        gt=0.0,
        le=1.0,
        advanced=True,
    )
    mlm_phases: tuple[str, ...] = setting(
        (),
        separator=",",
        metavar="SHARE:RATE",
        help="masking rate by phase: from SHARE of the run on, mask at RATE; after --mlm-probability 0.3, "
        "0.6:0.15,0.9:0.05 steps down to 0.15 and then 0.05, as mmBERT",
        advanced=True,
    )
    eval_mlm_probability: float = setting(
        0.15,
        help="masking rate of the fixed evaluation masks (the same for every recipe, so runs compare)",
        gt=0.0,
        le=1.0,
        advanced=True,
    )
    eval_masking: EvalMasking = setting(
        "own",
        help="masks of the fixed evaluation: 'own' = this run's masking at --eval-mlm-probability; 'common' = "
        "token-level 80/10/10 at that rate with the seed-0 masks, the same for every run on the data whatever its "
        "strategy, corruption or seed (what tokenmask study scores), the own-masking score logged beside as eval_own_*",
        advanced=True,
    )
    num_workers: int | None = setting(
        None,
        help="DataLoader worker processes that collate and mask batches (0 = in the training process; "
        "none = 2 on a GPU, where collating beside the step pays, and 0 on a CPU, whose cores train)",
        ge=0,
        advanced=True,
    )
    objective: Objective = setting(
        "mlm",
        help="what pre-training learns: 'mlm' = masked-LM at the targets; 'rtd' = replaced-token detection (ELECTRA): a "
        "smaller generator fills the targets with samples and the model learns at every token which were replaced "
        "(a modernbert or electra preset, or --init an ELECTRA discriminator with a new generator; OUTPUT/model is the "
        "discriminator, OUTPUT/generator the masked LM)",
    )
    rtd_weight: float = setting(
        50.0,
        help="replaced-token detection: weight of the discriminator's loss per token against the generator's per target (ELECTRA's lambda)",
        gt=0.0,
        advanced=True,
    )
    generator_share: float = setting(
        0.25,
        help="replaced-token detection: the generator's size as a share of the discriminator's: ELECTRA, its width at the "
        "same depth; ModernBERT, its layers (at least 1) at the same width",
        gt=0.0,
        le=1.0,
        advanced=True,
    )

    def __post_init__(self) -> None:
        check(self)
        if self.preset not in PRESETS:  # Python callers are not held to the command line's choices
            raise ValueError(f"unknown preset {self.preset!r}; choose one of {', '.join(PRESETS)}")
        _check_streamable(self)
        _check_objective(self)
        parse_phases(self.mlm_phases)
        if self.batch_warmup_tokens is not None and self.loop.grad_accum < 2:
            raise ValueError("batch_warmup_tokens ramps up the micro-batches of a step: give --grad-accum above 1")
        if self.loop.decay_from is not None and self.init is not None:
            raise ValueError("decay_from starts from its own checkpoint's model: give no --init")
        if self.loop.decay_from is not None and self.objective != "mlm":
            raise ValueError("decay_from continues a masked-LM run: it is for --objective mlm")
        if self.mlm_phases and self.mlm_probability_end is not None:
            raise ValueError("mlm_phases and mlm_probability_end are two schedules of the masking rate: give one")
        object.__setattr__(self, "loop", self.loop.with_default_limit())  # frozen: the one resolved default

    def with_loop(self, **changes: Any) -> PretrainConfig:
        """This config with some loop settings changed: ``config.with_loop(resume=True)``."""
        return replace(self, loop=replace(self.loop, **changes))


def _check_streamable(config: PretrainConfig) -> None:
    """PMI masking finds its n-grams in a pass over the corpus, which streaming and Hub corpora skip."""
    streamed = config.blocks.streaming or any(is_hub_name(source) for source in config.corpus)
    if streamed and config.masking.units.strategy == "pmi":
        raise ValueError(
            "strategy 'pmi' finds its n-grams in a pass over the corpus, which --streaming and hf: corpora skip: "
            "use another strategy, or local files without --streaming"
        )


DETECTION_SETTINGS = {"rtd_weight": 50.0, "generator_share": 0.25}
"""Replaced-token detection's own settings and their defaults."""


def changed_detection_setting(config: PretrainConfig) -> str | None:
    """The flag of the first of :data:`DETECTION_SETTINGS` ``config`` changes (``"--rtd-weight"``), else None."""
    return next(("--" + k.replace("_", "-") for k, v in DETECTION_SETTINGS.items() if getattr(config, k) != v), None)


def _check_objective(config: PretrainConfig) -> None:
    """Replaced-token detection trains a ModernBERT or ELECTRA preset from scratch, uncompiled (for now)."""
    if config.objective != "rtd":
        return
    if not config.init and PRESETS[config.preset].family not in DETECTOR_FAMILIES:
        raise ValueError(
            f"--objective rtd trains a ModernBERT or ELECTRA body: choose --preset {detector_presets()} (not {config.preset})"
        )
    if config.loop.compile:
        raise ValueError("--compile is not supported with --objective rtd yet")


CONTINUED_LOOP = LoopConfig(lr=1e-3, head_warmup_steps=30, layer_decay=0.8)
"""The loop's defaults when pre-training continues from ``init``: the from-scratch lr 2e-3 sends
a pre-trained encoder with a new head to the unigram plateau. Chosen on 300-step trials at
equal tokens (README, "Continued pre-training")."""


def pretrain_config(settings: Mapping[str, Any]) -> PretrainConfig:
    """The pre-training config for flat ``settings`` (as on the command line), with the recipe they call for.

    With an ``init``, the loop's defaults are :data:`CONTINUED_LOOP`; without, the from-scratch
    ones. Settings given always win: ``pretrain_config({"init": "minilm", "lr": 3e-4})`` trains
    at 3e-4 with the recipe's head warm-up and layer decay.

    Raises:
        ValueError: a key that is no setting, or a value out of range.
    """
    if not settings.get("init"):
        return build(PretrainConfig, settings)
    # The recipe enters as settings the given ones override, not as a defaults instance: a
    # PretrainConfig resolves its default time limit, which would then add to a given step limit.
    plain = flatten(LoopConfig())
    recipe = {key: value for key, value in flatten(CONTINUED_LOOP).items() if plain[key] != value}
    return build(PretrainConfig, {**recipe, **settings})


FinetuneTask = Literal["classify", "tokens", "qa", "retrieval"]

FINETUNE_METRICS = {
    "classify": ("macro_f1", "accuracy", "loss"),
    "tokens": ("span_f1", "accuracy", "macro_f1", "loss"),
    "qa": ("f1", "exact_match", "loss"),
    "retrieval": ("ndcg@10", "mrr@10", "recall@1", "recall@5", "recall@10", "loss"),
}
"""Metrics ``best_metric`` may name, per task; the first is the default. Loss is lower-better."""

FINETUNE_LOOP = LoopConfig(batch_size=32, lr=1e-4, warmup=0.1, eval_every=150)
"""Fine-tuning's loop defaults: 1e-4 suits minilm on short runs (chosen on 60-step runs, README)."""


@dataclass(frozen=True)
class FinetuneConfig:
    """What to fine-tune, on which labelled data, for how long, with which augmentation.

    The run stops at the first of ``epochs`` (turned into optimizer steps once the data is
    read) and the loop's limits; with none of them, after 9 minutes.
    """

    loop: LoopConfig = setting(factory=lambda: FINETUNE_LOOP, help="the training loop", exclude=("decay_from",))
    data: tuple[str, ...] = setting(
        (),
        positional=True,
        help="labelled files, folders or globs; none = the built-in Rotten Tomatoes snippets, split by movie (qa: squad)",
    )
    eval_data: tuple[str, ...] = setting(
        (), flag="eval", metavar="DATA", help="validation files (none = hold out a deterministic share of DATA)"
    )
    model: str = setting(
        "minilm", help="checkpoint to fine-tune: a folder (e.g. OUTPUT/model of pretrain), minilm, or a Hub id ORG/NAME"
    )
    hub: HubConfig = setting(factory=HubConfig, help="the Hub")
    task: FinetuneTask = setting(
        "classify",
        help="classify = one label per text; tokens = one tag per word (BIO, CoNLL or JSON lists); "
        "qa = the answer's span in a context (SQuAD JSON, or records with question, context, answers); "
        "retrieval = texts that find each other (records with query, positive and an optional negative)",
    )
    text_column: str | None = setting(
        None, help="column of the text (classify: default 'text') or of the word list (tokens: default 'tokens')"
    )
    label_column: str | None = setting(
        None, help="column of the label (classify: default 'label') or of the tag list (tokens: default 'tags')"
    )
    group_by: str | None = setting(
        None, help="column naming each example's group (a movie, an author): the split keeps every group on one side"
    )
    validation_share: float = setting(
        0.1, help="share of the examples (or groups) held out when no --eval is given", gt=0.0, lt=0.5
    )
    max_length: int = setting(
        None, help="tokens per example at most, special tokens included; longer ones are cut and counted "
        "(default 128; qa: 384, a longer context is cut into windows; retrieval: 256)", ge=8,
    )  # fmt: skip
    scale: float = setting(
        20.0, help="retrieval: the cosine similarity's multiplier in the contrastive loss (a temperature of 1/scale)", gt=0
    )
    doc_stride: int = setting(
        None, help="qa: tokens that consecutive windows of a long context share (default a third of max_length: 128)", ge=0
    )
    unpad: bool = setting(
        False,
        help="run each batch as its real tokens only, the examples concatenated with their boundaries: no work on "
        "padding (attention: torch's varlen kernel on CUDA, per example elsewhere); the same results",
        advanced=True,
    )
    epochs: int | None = setting(None, help="stop after this many passes over the training examples", ge=1)
    patience: int = setting(
        3, help="warn when validation loss rose while training loss fell this many evaluations in a row", ge=1
    )
    best_metric: str | None = setting(
        None,
        help="keep the checkpoint best by this metric in OUTPUT/best (default: macro_f1, or span_f1 for tokens)",
        choices=tuple(dict.fromkeys(m for names in FINETUNE_METRICS.values() for m in names)),
    )
    augment_rate: float = setting(
        0.0, help="share of training tokens replaced by [MASK], labels kept (0 = off; never at evaluation)", ge=0.0, lt=1.0
    )
    augment_strategy: Literal["token", "whole_word"] = setting("token", help="mask single tokens or whole words")
    augment_adaptive: bool = setting(
        False, help="halve the augmentation rate each time the divergence warning fires (off below 0.01)"
    )

    def __post_init__(self) -> None:
        check(self)
        if self.augment_adaptive and self.augment_rate == 0:
            raise ValueError("augment_adaptive halves the augmentation rate: give augment_rate > 0 too")
        allowed = FINETUNE_METRICS[self.task]
        if self.best_metric is not None and self.best_metric not in allowed:
            raise ValueError(f"best_metric for task {self.task!r} must be one of {', '.join(allowed)}; got {self.best_metric!r}")
        object.__setattr__(self, "loop", self.loop.with_default_limit(self.epochs))  # frozen: the resolved defaults
        if self.max_length is None:
            object.__setattr__(self, "max_length", {"qa": 384, "retrieval": 256}.get(self.task, 128))
        if self.doc_stride is None:
            object.__setattr__(self, "doc_stride", self.max_length // 3)
        if self.task == "qa" and not 0 <= self.doc_stride < self.max_length // 2:
            raise ValueError(f"doc_stride must be under half of max_length ({self.max_length}); got {self.doc_stride}")

    @property
    def metric(self) -> str:
        """The metric the best checkpoint is chosen by (``best_metric`` or the task's default)."""
        return self.best_metric or FINETUNE_METRICS[self.task][0]

    def with_loop(self, **changes: Any) -> FinetuneConfig:
        """This config with some loop settings changed: ``config.with_loop(seed=1, output="runs/b")``."""
        return replace(self, loop=replace(self.loop, **changes))


def resumed_hub(hub: HubConfig, loop: LoopConfig, name: str | None, *, key: str) -> HubConfig:
    """``hub``, or on ``--resume`` without a revision given, the commit the run started from.

    A run pins the commit its Hub id stood for in ``OUTPUT/config.yaml`` (``revision``); resumed
    after the branch moved on, it must go on from those weights and that tokenizer, and say so in
    the config it writes again. ``key`` names the setting that holds the model (``"init"``,
    ``"model"``); a saved config for another model, or none, leaves ``hub`` as it is.
    """
    from pathlib import Path

    import yaml

    saved_file = Path(loop.output) / "config.yaml"
    if not loop.resume or hub.revision is not None or name is None or not saved_file.is_file():
        return hub
    saved = yaml.safe_load(saved_file.read_text(encoding="utf-8")) or {}
    if saved.get(key) != name or not saved.get("revision"):
        return hub
    return replace(hub, revision=str(saved["revision"]))
