"""A study's downstream factors: every model fine-tuned on the user's labelled data, at label budgets and seeds.

With ``--finetune DATA``, a study answers on the user's own task: each model it has (the
``--init`` checkpoint itself, the *baseline*, and every pre-training cell at the shares of its
budget in ``pretrain_fractions``) is fine-tuned at every label budget x [MASK] augmentation rate
x fine-tuning seed, and scored on the held-out set and its corrupted copies. Each fine-tuning is a
cell of the sweep (:func:`finetune_cells`) that runs after the cell whose model it starts from;
:func:`run_finetune_cell` is one, on the data :func:`load_downstream_data` read once per process.
The numbers are :mod:`tokenmask.experiments.downstream_stats`'.

No torch here at import: the command line validates a plan before anything loads.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokenmask.experiments.compare_data import CompareData
from tokenmask.experiments.compare_stats import CLEAN
from tokenmask.experiments.downstream_stats import FINETUNE
from tokenmask.experiments.plan import Axis, Cell, Coordinates, check_axis, cross
from tokenmask.labelled.robustness import Corruption, parse_corruptions
from tokenmask.recipes.config import FINETUNE_LOOP, FinetuneConfig, PretrainConfig
from tokenmask.settings import check, setting

if TYPE_CHECKING:
    from tokenmask.train.models import Checkpoint

BUILTIN = "builtin"
"""``--finetune builtin``: the built-in Rotten Tomatoes snippets, split by movie."""

DEFAULT_CORRUPTIONS = ("typo=0.1", "delete=0.2", "unk=0.2")
"""The corrupted sets a study scores by default: one of each kind, at a middle rate."""

BEST_MODEL = "best-model"
"""OUTPUT/best-model: the fine-tuned model with the best held-out score, with a card saying so."""

TUNED = ("task", "text_column", "label_column", "group_by", "augment_strategy")
"""The fine-tuning settings a study offers as they are (the others it names ``finetune_*`` or sets per cell)."""


@dataclass(frozen=True)
class DownstreamPlan:
    """What every model of a study is fine-tuned on, and what the fine-tuning runs vary.

    Raises:
        ValueError: a budget below 1 or given twice, an augmentation rate outside [0, 1), a
            pre-training share outside (0, 1], corrupted sets for token labelling or malformed;
            each names the setting.
    """

    finetune: tuple[str, ...] = setting(
        (),
        separator=",",
        metavar="DATA",
        help="labelled data to fine-tune every model on (comma-separated files, folders or globs, read as finetune "
        "reads them; 'builtin' = the built-in Rotten Tomatoes snippets); none = pre-training only",
    )
    finetune_eval: tuple[str, ...] = setting(
        (),
        separator=",",
        metavar="DATA",
        help="held-out labelled data every fine-tuned model is scored on (none = hold out a deterministic share of --finetune)",
    )
    tuning: FinetuneConfig = setting(factory=FinetuneConfig, help="each fine-tuning", only=TUNED)
    finetune_validation_share: float = setting(
        0.1, help="share of --finetune held out when no --finetune-eval is given", gt=0.0, lt=0.5
    )
    label_budgets: tuple[int | None, ...] = setting(
        (None,),
        separator=",",
        none="all",
        help="training-set sizes every model is fine-tuned at, stratified by label and nested (a seed's 100 "
        "examples are among its 300), e.g. 100,300,1000; all = every training example",
    )
    finetune_seeds: int = setting(
        3,
        help="fine-tuning runs per model and budget, seeds --seed, --seed + 1, … (each draws its own sample); "
        "fewer than 2 give no interval",
        ge=1,
    )
    augment_rates: tuple[float, ...] = setting(
        (0.0,), separator=",", help="comma-separated [MASK] augmentation rates while fine-tuning; 0 = none"
    )
    pretrain_fractions: tuple[float, ...] = setting(
        (1.0,),
        separator=",",
        help="fine-tune each pre-training cell's model at these shares of its budget (snapshots), e.g. 0.25,0.5,1; "
        "the starting model itself (share 0, the baseline: --init, or the untrained --preset model) is always fine-tuned",
    )
    finetune_max_steps: int = setting(150, help="steps of each fine-tuning", ge=1)
    finetune_max_time: float | None = setting(
        None,
        help="minutes of each fine-tuning: each stops at the first of this and --finetune-max-steps (an equal-time "
        "comparison; the steps then depend on each model's speed and on what runs beside it); none = steps only",
        gt=0.0,
    )
    finetune_max_length: int | None = setting(
        None,
        help="tokens per fine-tuning example at most, special tokens included; longer ones are cut (and counted before "
        "the study starts); none = --max-length, the pre-training block length",
        ge=8,
    )
    finetune_lr: float = setting(FINETUNE_LOOP.lr, help="learning rate of each fine-tuning", gt=0.0)
    finetune_batch_size: int = setting(FINETUNE_LOOP.batch_size, help="examples per fine-tuning step", ge=1)
    robustness: bool = setting(
        True,
        help="also score every fine-tuned model on corrupted copies of the held-out set (typos in 10% of words, "
        "20% of words deleted, 20% replaced by the unknown token; classification only)",
    )
    robustness_sets: tuple[str, ...] = setting(
        DEFAULT_CORRUPTIONS,
        metavar="KIND=RATES",
        help="the corrupted sets of --robustness, KIND one of typo, delete, unk: e.g. --robustness-sets typo=0.1,0.2 unk=0.2",
    )
    keep_models: bool = setting(
        False,
        help="keep every fine-tuned model; by default only the best one stays (OUTPUT/best-model), the others' "
        "results, metrics and plots are kept",
    )

    def __post_init__(self) -> None:
        check(self)
        check_axis("label budgets", self.label_budgets, lambda n: n is None or n >= 1, "whole numbers >= 1 or 'all'")
        check_axis("augmentation rates", self.augment_rates, lambda r: 0.0 <= r < 1.0, "in [0, 1)")
        check_axis("pre-training fractions", self.pretrain_fractions, lambda f: 0.0 < f <= 1.0, "in (0, 1]")
        if BUILTIN in self.finetune and len(self.finetune) > 1:
            raise ValueError(f"--finetune: '{BUILTIN}' stands alone; got {','.join(self.finetune)}")
        if self.finetune_eval and not self.finetune:
            raise ValueError("--finetune-eval scores the fine-tuned models: give --finetune DATA too")
        if self.enabled:
            try:
                self.corruption_sets  # noqa: B018 (malformed sets are refused here, before anything runs)
            except ValueError as error:
                raise ValueError(f"--robustness-sets: {error}") from None
        if self.tuning.task != "classify" and self.robustness_sets != DEFAULT_CORRUPTIONS:
            raise ValueError(
                "--robustness-sets corrupt the text of classification examples; for --task tokens a deleted word would "
                "have to take its tag along, which is not supported"
            )

    @property
    def enabled(self) -> bool:
        """Whether the study fine-tunes at all."""
        return bool(self.finetune)

    @property
    def corruption_sets(self) -> tuple[Corruption, ...]:
        """The corrupted held-out sets every model is scored on (none without ``robustness``, or for tokens)."""
        if not self.robustness or self.tuning.task != "classify":
            return ()
        return parse_corruptions(self.robustness_sets)

    def seed_list(self, first_seed: int) -> tuple[int, ...]:
        return tuple(range(first_seed, first_seed + self.finetune_seeds))

    def finetune_config(self, base: PretrainConfig) -> FinetuneConfig:
        """Every fine-tuning's settings but ``model``, ``output``, ``seed`` and ``augment_rate`` (set
        per cell): on the device and at the precision of the pre-training, evaluated once, at the
        end (the score the study compares), a checkpoint every third of the run (a killed study
        resumes there)."""
        loop = replace(
            FINETUNE_LOOP, max_steps=self.finetune_max_steps, max_time=self.finetune_max_time, lr=self.finetune_lr,
            batch_size=self.finetune_batch_size,
            eval_every=self.finetune_max_steps, eval_at_start=False, save_every=self._save_every,
            keep_last=1, cpu=base.loop.cpu, precision=base.loop.precision, report_to="none",
        )  # fmt: skip
        data = () if self.finetune == (BUILTIN,) else self.finetune
        longest = self.finetune_max_length or base.blocks.max_length
        return replace(
            self.tuning, loop=loop, data=data, eval_data=self.finetune_eval, max_length=longest,
            validation_share=self.finetune_validation_share, hub=base.hub,
        )  # fmt: skip

    @property
    def _save_every(self) -> int:
        """A checkpoint every third of a fine-tuning's steps (a killed study resumes there); with a
        time limit, whose steps are not known ahead, every 50 steps (under a minute at MiniLM's pace here)."""
        thirds = max(1, self.finetune_max_steps // 3)
        return thirds if self.finetune_max_time is None else min(thirds, 50)

    def to_dict(self, base: PretrainConfig) -> dict[str, Any]:
        """The plan's part a resumed study must match (JSON-ready): what varies, and every run's settings."""
        from tokenmask.settings import flatten

        tuned = flatten(self.finetune_config(base))
        settings = {k: v for k, v in tuned.items() if k not in ("output", "resume", "overwrite", "model", "seed", "augment_rate")}
        return {
            "label_budgets": [size_name(n) for n in self.label_budgets],
            "seeds": list(self.seed_list(base.loop.seed)),
            "augment_rates": list(self.augment_rates),
            "pretrain_fractions": list(self.pretrain_fractions),
            "robustness": [c.name for c in self.corruption_sets],
            "settings": settings,
        }

    def describe(self) -> str:
        """``each model fine-tuned at 3 label budgets x 2 augmentation rates x 3 seeds, 150 steps each``
        (``at most 5,000 steps or 3 min each`` with a time limit)."""
        parts = [
            f"{len(self.label_budgets)} label budget{'s' * (len(self.label_budgets) != 1)}",
            f"{len(self.augment_rates)} augmentation rate{'s' * (len(self.augment_rates) != 1)}",
            f"{self.finetune_seeds} seed{'s' * (self.finetune_seeds != 1)}",
        ]
        limit = f"{self.finetune_max_steps:,} steps each"
        if self.finetune_max_time is not None:
            limit = f"at most {self.finetune_max_steps:,} steps or {self.finetune_max_time:g} min each"
        return f"each model fine-tuned at {' x '.join(parts)}, {limit}"


def size_name(size: int | None) -> str:
    """``100 -> "100"``, ``None -> "all"``."""
    return "all" if size is None else str(size)


def finetune_cells(sources: Sequence[Cell], plan: DownstreamPlan, first_seed: int) -> list[Cell]:
    """Each source cell, followed by its fine-tuning cells (size by size, then seed, augmentation
    and pre-training share), each one after its source.

    A pre-training source is fine-tuned at every share of ``plan.pretrain_fractions``; a baseline
    source (``strategy`` None) at share 0. ``token-0.15-bert-seed0`` gives
    ``token-0.15-bert-seed0/fraction-1/size-100/augment-0/tune-seed-0`` in the folder
    ``cells/token-0.15-bert-seed0/tune/fraction-1/size-100/augment-0/seed-0``.
    """
    cells: list[Cell] = []
    for source in sources:
        baseline = source.coordinates["strategy"] is None
        axes = (
            Axis("size", tuple(size_name(n) for n in plan.label_budgets)),
            Axis("seed", plan.seed_list(first_seed)),
            Axis("augment", plan.augment_rates),
            Axis("fraction", (0.0,) if baseline else plan.pretrain_fractions),
        )
        tuned = cross(axes, name=_tune_name, folder=finetune_folder, derive=_origin(source), after=_after)
        cells += [source, *(replace(cell, inputs=source.inputs) for cell in tuned)]  # what made the model, they depend on
    return cells


def _origin(source: Cell) -> Callable[[Coordinates], Coordinates]:
    """A fine-tuning cell's coordinates from its source: its grid point and pre-training seed."""
    keys = ("point", "objective", "strategy", "rate", "rate_end", "corruption")  # an objective where the grid crosses them
    shared = {key: source.coordinates[key] for key in keys if key in source.coordinates}
    return lambda _: {
        "role": FINETUNE, **shared, "pretrain_seed": source.coordinates["seed"], "source": source.name,
        "source_folder": source.folder,
    }  # fmt: skip


def _after(c: Coordinates) -> tuple[str, ...]:
    return (c["source"],)


def _tune_name(c: Coordinates) -> str:
    return f"{c['source']}/fraction-{c['fraction']:g}/size-{c['size']}/augment-{c['augment']:g}/tune-seed-{c['seed']}"


def finetune_folder(c: Coordinates) -> str:
    """A fine-tuning cell's folder under the study's, from its coordinates (or its result)."""
    return f"{c['source_folder']}/tune/fraction-{c['fraction']:g}/size-{c['size']}/augment-{c['augment']:g}/seed-{c['seed']}"


def source_model(output: Path, coordinates: Coordinates) -> tuple[str, int]:
    """The pre-trained model a fine-tuning cell starts from, and the tokens it was pre-trained
    for: the source cell's snapshot at its share, or its final model at share 1.

    Raises:
        ValueError: the snapshot or model is missing (a source cell's folder changed by hand).
    """
    from tokenmask.experiments.cells import MARKER
    from tokenmask.train.checkpoint import NOTES_FILE, snapshot_folder

    runs = output / coordinates["source_folder"] / "pretrain"
    if coordinates["fraction"] == 1.0:
        model = runs / "model"
        marker = output / coordinates["source_folder"] / MARKER
        tokens = json.loads(marker.read_text(encoding="utf-8"))["tokens"] if marker.exists() else 0
    else:
        model = snapshot_folder(runs, coordinates["fraction"])
        notes = model / NOTES_FILE
        tokens = json.loads(notes.read_text(encoding="utf-8"))["tokens"] if notes.exists() else 0
    if not (model / "config.json").exists():
        raise ValueError(f"{model} is missing: the pre-training cell {coordinates['source']} did not save it")
    return str(model), int(tokens)


def check_finetune_length(start: Checkpoint, base: PretrainConfig, longest: int) -> None:
    """``ValueError`` unless the ``--init`` checkpoint has positions for ``longest`` tokens: a study
    asked for longer fine-tuning examples than its pre-training blocks loads it once to know, before
    any cell runs (a model's position limit is its embeddings', not a config key's)."""
    from tokenmask.train.models import load_model, paired_tokenizer, position_limit

    tokenizer = paired_tokenizer(start, base.tokenizer, hub=base.hub)
    limit = position_limit(load_model(start, vocab_size=len(tokenizer), max_length=None))
    if limit is not None and longest > limit:
        raise ValueError(f"--finetune-max-length {longest} is over the {limit} positions of {start.name}: give {limit} or less")


def load_downstream_data(plan: DownstreamPlan, base: PretrainConfig) -> CompareData:
    """The labelled data every fine-tuning cell draws its sample and its sets from, read and encoded
    once, with the tokenizer every model of the study shares (the pre-training's).

    Raises:
        ValueError: data that cannot be read, split or encoded; a tokenizer that cannot be loaded.
    """
    from tokenmask.experiments.compare_data import load_compare_data
    from tokenmask.train.models import paired_tokenizer

    return load_compare_data(plan.finetune_config(base), tokenizer=paired_tokenizer(base.init, base.tokenizer, hub=base.hub))


def best_model(tuned: Sequence[Mapping[str, Any]], metric: str) -> dict[str, Any]:
    """The fine-tuned model with the highest held-out ``metric`` (the first of equals), and how it was chosen.

    ``best_model([{"name": "a", "scores": {"clean": {"macro_f1": 0.7}}}, {"name": "b", …0.8…}], "macro_f1")``
    -> ``{"name": "b", "folder": "best-model", "metric": "macro_f1", "value": 0.8, "how": "…"}``
    """
    best = max(tuned, key=lambda cell: float(cell["scores"][CLEAN][metric]))
    value = float(best["scores"][CLEAN][metric])
    how = (
        f"the highest held-out {metric} ({value:.4f}) of the {len(tuned)} fine-tuned models of the study, cell "
        f"{best['name']}; that set chose it, so its score there is optimistic: score it on data none of them saw"
    )
    return {"name": best["name"], "folder": BEST_MODEL, "metric": metric, "value": value, "how": how}


def keep_best_model(output: Path, study: Mapping[str, Any], *, keep_others: bool) -> dict[str, Any]:
    """Copy the best fine-tuned model (``study["best_model"]``) to ``OUTPUT/best-model``, its card
    saying how it was chosen and its ``tokenmask.json`` naming the cell; then remove the other
    fine-tuned models unless ``keep_others`` (their results, metrics and plots stay). Returns
    what ``best-model`` holds, in ``study["best_model"]``'s form.

    Done once per best cell: a study resumed after it finds it done, and one grown by more
    cells replaces it when a new cell did better. The plan's best replaces it whenever that
    model's own copy exists, even below a model kept from a cell the plan dropped (a resume
    that changed the label budgets and ran new cells). When the best cell's own copy is gone (a
    resumed study that dropped the kept model's cell, or a tie in another order), the model
    kept stays, and what is returned says so and which scores higher: the kept one when its
    cell left the plan, the plan's best as high or higher in a tie.
    """
    from tokenmask.train.checkpoint import CARD_FILE, NOTES_FILE

    best = dict(study["best_model"])
    target = output / BEST_MODEL
    cells = {cell["name"]: cell for cell in study["cells"]}
    source = output / finetune_folder(cells[best["name"]]) / "model"
    notes = target / NOTES_FILE
    kept = json.loads(notes.read_text(encoding="utf-8")) if notes.exists() else {}
    if source.is_dir() and kept.get("name") != best["name"]:
        partial = output / f".{BEST_MODEL}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(source, partial)
        card = (partial / CARD_FILE).read_text(encoding="utf-8") if (partial / CARD_FILE).exists() else ""
        (partial / CARD_FILE).write_text(with_section(card, _chosen(best)), encoding="utf-8")
        (partial / NOTES_FILE).write_text(json.dumps(best, indent=1), encoding="utf-8")
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
        kept = best
    elif kept.get("name") == best["name"] and kept != best:  # the same cell, best of more models now: say so
        card = (target / CARD_FILE).read_text(encoding="utf-8")
        (target / CARD_FILE).write_text(card.replace(_chosen(kept), _chosen(best)), encoding="utf-8")
        notes.write_text(json.dumps(best, indent=1), encoding="utf-8")
        kept = best
    if not keep_others:
        for cell in study["cells"]:
            if cell.get("role") == FINETUNE:
                shutil.rmtree(output / finetune_folder(cell) / "model", ignore_errors=True)
    if kept and kept.get("name") != best["name"]:
        value = f"{best['metric']} {best['value']:.4f}"
        if best["value"] < kept["value"]:  # the kept cell left the plan; the plan's best was removed beside it
            note = (
                "kept from before, from a cell no longer in the study's plan: the best of the plan's models, "
                f"{best['name']} ({value}), scores lower"
            )
        else:
            note = (
                f"kept from before: {best['name']} ({value}) scores as high or higher, "
                "but its model was removed when the study first ended"
            )
        return {**kept, "how": f"{kept['how']}; {note}"}
    return best


def _chosen(best: Mapping[str, Any]) -> str:
    """The model card's section on how the study chose ``best``."""
    return f"## How this model was chosen\n\nBy `tokenmask study`: {best['how']}.\n\n"


def with_section(card: str, section: str) -> str:
    """``card`` with ``section`` first after its YAML metadata block (the Hub reads that block only at the top).

    ``with_section("---\\nlicense: mit\\n---\\n# Model", "## Chosen\\n")`` -> ``"---\\nlicense: mit\\n---\\n## Chosen\\n# Model"``
    """
    if card.startswith("---\n"):
        end = card.find("\n---\n", 4)
        if end != -1:
            return card[: end + 5] + section + card[end + 5 :]
    return section + card


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
