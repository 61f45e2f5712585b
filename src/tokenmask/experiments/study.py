"""Which masking pays? A pre-training ablation grid on the sweep runner, every cell its own resumable run.

Each cell of the :class:`~tokenmask.experiments.study_grid.StudyGrid` is one
:func:`~tokenmask.recipes.pretrain.pretrain` run in ``OUTPUT/cells/<name>/pretrain``, with the
study's base settings, budget and seeds; only the masking differs. Every cell is scored on the
same fixed masks (``eval_masking="common"``: token-level 80/10/10 at the evaluation rate), its
own-masking score beside. With ``finetune``, each cell's model, and per seed a baseline (the
same model untrained), is also fine-tuned on the built-in Rotten Tomatoes snippets
(``OUTPUT/cells/<name>/finetune``).

The bookkeeping is the sweep runner's (:mod:`tokenmask.experiments.sweep`): ``OUTPUT/study.json``
(the plan and every cell), each cell's ``cell.json``, resume, ``jobs``. The page is
:mod:`tokenmask.experiments.study_report`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tokenmask.experiments.plan import RUN_KEYS, Cell, SweepRun, replayable
from tokenmask.experiments.study_grid import (
    DEFAULT_CELL_TOKENS,
    GRID_KEYS,
    StudyGrid,
    baseline_cells,
    cell_config,
)
from tokenmask.experiments.study_report import STUDY_FILE, write_study_report
from tokenmask.experiments.sweep import run_sweep
from tokenmask.recipes.config import FINETUNE_LOOP, FinetuneConfig, PretrainConfig, pretrain_config
from tokenmask.settings import build, check, flatten, leaves, setting
from tokenmask.train.config import LoopConfig
from tokenmask.train.job import QuietReporter, Reporter

_SCORES = ("loss", "perplexity", "accuracy", "targets")
"""The fixed-mask scores a cell's result keeps (from the last evaluation of metrics.jsonl)."""


@dataclass(frozen=True)
class StudyConfig:
    """A study: the base pre-training settings every cell shares, the grid, optional fine-tuning.

    Attributes:
        base: every cell's settings but the masking (``base.loop.output`` is the study's
            folder, ``base.loop.seed`` its first seed, ``base.loop.resume`` continues it).

    Raises:
        ValueError: a base config that sets what the grid sets per cell (``strategy``…), no
            output folder, or a setting out of range.
    """

    base: PretrainConfig = setting(
        factory=lambda: PretrainConfig(loop=LoopConfig(max_tokens=DEFAULT_CELL_TOKENS)),
        help="pre-training (every cell)",
        exclude=(*GRID_KEYS, "overwrite"),
        reword={
            "output": "the study's folder: OUTPUT/study.json, OUTPUT/report.html, each cell's runs in OUTPUT/cells/NAME; "
            "required",
            "resume": "continue the study in OUTPUT: finished cells are kept as they are, an interrupted one continues "
            "from its newest checkpoint, the others start",
            "seed": "the first seed: each cell runs with seeds SEED .. SEED + --seeds - 1",
            "max_time": "stop each cell after this many minutes, counted across resumes",
        },
    )
    grid: StudyGrid = setting(factory=StudyGrid, help="the grid: what the cells cross")
    jobs: int = setting(1, help="cells trained at once, each in its own process", ge=1)
    finetune: bool = setting(
        False, help="also fine-tune each cell's model and an untrained baseline on the built-in classification data"
    )
    finetune_max_steps: int = setting(300, help="with --finetune: steps of each fine-tuning", ge=1)
    finetune_lr: float = setting(FINETUNE_LOOP.lr, help="with --finetune: its learning rate", gt=0.0)

    def __post_init__(self) -> None:
        check(self)
        if not self.base.loop.output:
            raise ValueError("--output is required: the folder the study writes to")
        given, default = flatten(self.base), flatten(PretrainConfig())
        for key in GRID_KEYS:
            if given[key] != default[key]:
                raise ValueError(
                    f"{key} is set per cell by the grid: leave it at its default ({default[key]}) in the base config"
                )

    @property
    def output(self) -> Path:
        return Path(self.base.loop.output)

    @property
    def finetune_config(self) -> FinetuneConfig | None:
        """Each cell's fine-tuning (``model``, ``output`` and ``seed`` are set per cell): on the
        built-in data, on the device and at the precision of the pre-training; None without ``finetune``."""
        if not self.finetune:
            return None
        loop = replace(
            FINETUNE_LOOP, max_steps=self.finetune_max_steps, lr=self.finetune_lr, eval_every=self.finetune_max_steps,
            cpu=self.base.loop.cpu, precision=self.base.loop.precision,
        )  # fmt: skip
        return FinetuneConfig(loop=loop, max_length=self.base.blocks.max_length)

    def cells(self) -> list[Cell]:
        """The grid's cells, then (with fine-tuning) one baseline per seed."""
        seeds = self.grid.seed_list(self.base.loop.seed)
        return self.grid.cells(self.base.loop.seed) + (baseline_cells(seeds) if self.finetune else [])

    def plan(self) -> dict[str, Any]:
        """What the study trains, JSON-ready: the part of ``study.json`` a resumed study must match."""
        settings = {k: v for k, v in flatten(self.base).items() if k not in (*GRID_KEYS, *RUN_KEYS)}
        tuned = self.finetune_config
        finetune = None if tuned is None else {k: v for k, v in flatten(tuned).items() if k not in (*RUN_KEYS, "model", "seed")}
        return {"grid": self.grid.to_dict(), "settings": settings, "finetune": finetune}

    def settings(self) -> dict[str, Any]:
        """The flat settings that replay the study (``config.yaml``): all but what each cell sets,
        and where the study ran but not how (a replay neither resumes nor overwrites unasked)."""
        return replayable(flatten(self))


def study_config(settings: Mapping[str, Any]) -> StudyConfig:
    """A study from flat settings (as on the command line or in its ``config.yaml``): the
    pre-training ones (with the recipe :func:`~tokenmask.recipes.config.pretrain_config`
    picks), the grid's and the study's own. With no limit given, each cell stops at
    :data:`~tokenmask.experiments.study_grid.DEFAULT_CELL_TOKENS` tokens.

    ``study_config({"output": "runs/study", "max_steps": 300, "rates": "0.15,0.3"})``

    Raises:
        ValueError: a setting the grid sets per cell, an unknown setting, or a value out of range.
    """
    for key in GRID_KEYS:
        if key in settings:
            raise ValueError(f"{key} is set per cell by the grid (--strategies, --rates, --rate-ends, --corruption)")
    sections: dict[str, dict[str, Any]] = {"base": {}, "grid": {}, "study": {}}
    where = {leaf.key: leaf.path[0] for leaf in leaves(StudyConfig)}
    for key, value in settings.items():
        section = where.get(str(key).replace("-", "_"))
        if section is None:
            raise ValueError(f"unknown setting {key!r}")
        sections[section if section in sections else "study"][key] = value
    base = sections["base"]
    if not {"max_steps", "max_tokens", "max_time"} & {str(k).replace("-", "_") for k in base}:
        base = {**base, "max_tokens": DEFAULT_CELL_TOKENS}
    return build(StudyConfig, sections["study"], StudyConfig(base=pretrain_config(base), grid=build(StudyGrid, sections["grid"])))


@dataclass(frozen=True)
class StudyExperiment:
    """The study as the sweep runner runs it (:class:`~tokenmask.experiments.plan.Experiment`)."""

    config: StudyConfig
    kind: str = "study"
    record_file: str = STUDY_FILE

    def plan(self) -> dict[str, Any]:
        return self.config.plan()

    def settings(self) -> dict[str, Any]:
        return self.config.settings()

    def cells(self) -> list[Cell]:
        return self.config.cells()

    def load(self) -> None:
        """Nothing: each cell reads its corpus as a pre-training run does (through the block cache)."""
        return None

    def introduce(self, loaded: None, finished: int) -> str:
        """The study's first line: the grid, the budget of each cell, the common evaluation."""
        base, tuned = self.config.base, self.config.finetune_config
        after = f"; each model then fine-tuned ({tuned.loop.describe_limits()}), beside an untrained baseline" if tuned else ""
        kept = f"; {finished} finished before, kept" if finished else ""
        return (
            f"study: {self.config.grid.describe()}, each {base.preset if not base.init else base.init}, "
            f"{base.loop.describe_limits()}; scored on the same token-level 80/10/10 masks at "
            f"{base.eval_mlm_probability:g}{after}{kept}"
        )

    def run_cell(
        self, cell: Cell, folder: Path, reporter: Reporter, *, loaded: None, resume: bool, command: str | None
    ) -> dict[str, Any]:
        """Pre-train the cell (a baseline cell: nothing), then fine-tune it with ``finetune``.

        The result: the cell's coordinates; for a pre-trained cell ``steps``, ``tokens``,
        ``common`` (the final fixed-mask ``loss``, ``perplexity``, ``accuracy``, ``targets`` on
        the common masks), ``own`` (the same on its own masks, or None where they are the
        common ones) and ``curve`` (``step``, ``tokens``, ``loss``, ``accuracy`` at each
        evaluation); with fine-tuning, ``finetune`` (the final validation metrics and ``steps``).
        """
        from tokenmask.recipes.finetune import finetune
        from tokenmask.recipes.pretrain import pretrain

        result: dict[str, Any] = dict(cell.coordinates)
        coordinates = cell.coordinates
        if coordinates["strategy"] is not None:
            run = cell_config(self.config.base, coordinates, folder / "pretrain", resume=resume)
            trained = pretrain(run, reporter, command=command)
            result.update(_pretrain_result(folder / "pretrain", trained.steps, trained.tokens))
            model = str(folder / "pretrain" / "model")
        else:
            model = baseline_model(self.config.base, coordinates["seed"], folder / "untrained")
        tuning = self.config.finetune_config
        if tuning is not None:
            loop = replace(tuning.loop, output=str(folder / "finetune"), seed=coordinates["seed"], resume=resume)
            # the baseline fine-tunes --init itself, at the study's pinned commit; a cell its own folder
            base_hub = self.config.base.hub
            hub = base_hub if model == self.config.base.init else replace(base_hub, revision=None)
            tuned = finetune(replace(tuning, loop=loop, model=model, hub=hub), reporter, command=command)
            result["finetune"] = {"steps": tuned.steps, "metric": tuned.metric, **tuned.final.metrics()}
        return result

    def finished_line(self, result: Mapping[str, Any]) -> str:
        """``done in 3.1 min; fixed-mask accuracy 0.1234 (own masks 0.1100); fine-tuned accuracy 0.7100``."""
        parts = [f"done in {result['minutes']:.1f} min"]
        if result.get("common"):
            own = f" (own masks {result['own']['accuracy']:.4f})" if result.get("own") else ""
            parts.append(f"fixed-mask accuracy {result['common']['accuracy']:.4f}{own}")
        if result.get("finetune"):
            parts.append(f"fine-tuned accuracy {result['finetune']['accuracy']:.4f}")
        return "; ".join(parts)

    def summary(self, finished: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """How every cell is scored (the report's tables are built from the cells themselves)."""
        base = self.config.base
        return {
            "evaluation": {
                "masking": "token-level 80/10/10",
                "mlm_probability": base.eval_mlm_probability,
                "blocks": base.eval_blocks,
            }
        }


def run_study(config: StudyConfig, reporter: Reporter = QuietReporter(), *, command: str | None = None) -> dict[str, Any]:
    """Train every cell not finished yet, then write ``OUTPUT/study.json`` and ``OUTPUT/report.html``;
    returns the content of ``study.json``.

    ``study.json``: ``plan`` (grid, settings, fine-tuning), ``cells`` (one result per cell in
    grid order, baselines last: :meth:`StudyExperiment.run_cell`), ``complete``. With
    ``config.base.loop.resume``, finished cells are read back as they are and the others
    continue (from their newest checkpoint, if any). ``command`` goes into the model cards.

    Raises:
        ValueError: an OUTPUT that holds another study (or a run), or ``resume`` on a study of
            another plan; all before anything is written. The errors of the cells (bad input
            refused by the first cell of a new study leaves no ``study.json`` behind).
        Interrupted: SIGINT or SIGTERM (the running cells saved a checkpoint first).
    """
    from tokenmask.recipes.pretrain import pin_revision

    config = replace(config, base=pin_revision(config.base)[0])  # every cell starts from the same Hub commit
    run = SweepRun(config.output, resume=config.base.loop.resume, jobs=config.jobs)
    study = run_sweep(StudyExperiment(config), run, reporter, command=command)
    write_study_report(config.output)
    return study


def _pretrain_result(folder: Path, steps: int, tokens: int) -> dict[str, Any]:
    from tokenmask.train.logs import read_metrics

    evaluations = [r for r in read_metrics(folder) if "eval_loss" in r]
    final = evaluations[-1]
    common = {name: final[f"eval_{name}"] for name in _SCORES}
    own = {name: final[f"eval_own_{name}"] for name in _SCORES} if "eval_own_loss" in final else None
    curve = [
        {"step": r["step"], "tokens": r["tokens"], "loss": r["eval_loss"], "accuracy": r["eval_accuracy"]} for r in evaluations
    ]
    return {"steps": steps, "tokens": tokens, "common": common, "own": own, "curve": curve}


def baseline_model(base: PretrainConfig, seed: int, folder: Path) -> str:
    """The model the cells start from, untrained: ``base.init`` itself, or a new ``preset`` model
    initialised as the cells of ``seed`` are (saved once to ``folder`` with its tokenizer)."""
    if base.init:
        return base.init
    if not (folder / "config.json").exists():
        import torch

        from tokenmask.text.token_tables import require_mask_token
        from tokenmask.train.checkpoint import save_model
        from tokenmask.train.models import paired_tokenizer
        from tokenmask.train.presets import build_model

        tokenizer = paired_tokenizer(None, base.tokenizer, hub=base.hub)
        require_mask_token(tokenizer)
        torch.manual_seed(seed)  # as the loop seeds before it builds a cell's model: the same weights
        model = build_model(
            base.preset, vocab_size=len(tokenizer), max_length=base.blocks.max_length, pad_token_id=tokenizer.pad_token_id
        )
        save_model(folder, model, tokenizer, card="")
    return str(folder)
