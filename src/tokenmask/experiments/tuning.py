"""A study's fine-tunings: the labelled data read once per process, and one fine-tuning scored on every held-out set.

Each draws a stratified sample of the same encoded examples (nested: a seed's 100 are among its 300;
a question's windows and retrieval pairs are one stratum), and is scored on the clean held-out set
and, for classifiers, on corrupted copies drawn with its seed.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from tokenmask.experiments.stats import CLEAN, SCORED
from tokenmask.labelled.align import FinetuneData, encode_texts_with_labels
from tokenmask.labelled.examples import LabelledText, SideCounts
from tokenmask.labelled.robustness import Corruption, corrupt_texts
from tokenmask.labelled.subsets import stratified_sample
from tokenmask.recipes.config import FinetuneConfig
from tokenmask.train.job import Reporter

if TYPE_CHECKING:
    from tokenmask.recipes.tasks import TaskData


@dataclass
class TuningData:
    """Every example encoded once, and the raw ones the samples and corrupted sets are drawn from."""

    full: TaskData
    strata: list[str]  # the label of each training example (classify); one stratum for tokens
    train_raw: list[Any]
    validation_raw: list[Any]
    tokenizer: Any
    batch_size: int
    corrupted: dict[tuple[int, str], list[dict[str, Any]]] = field(default_factory=dict)  # by (seed, set), when first asked

    def training(self, size: int | None, seed: int) -> TaskData:
        """The data with its training side cut to a stratified sample drawn with ``seed`` (labels kept)."""
        chosen, full = stratified_sample(self.strata, size, seed=seed), cast(Any, self.full)  # mypy: replace() on a union
        counts = {"train_counts": SideCounts.of([self.train_raw[i] for i in chosen])} if self.train_raw else {}
        return replace(full, train=[full.train[i] for i in chosen], **counts)

    def corrupted_batches(self, seed: int, corruption: Corruption) -> list[dict[str, Any]]:
        """The held-out set with ``corruption`` drawn with ``seed``, collated as the clean one is."""
        from tokenmask.recipes.tasks import validation_batches

        key, full = (seed, corruption.name), self.full
        assert isinstance(full, FinetuneData)  # corrupted sets are a classifier's (Downstream.robustness)
        if key not in self.corrupted:
            raw = self.validation_raw
            texts = corrupt_texts([e.text for e in raw], corruption, seed=seed, unk_token=self.tokenizer.unk_token)
            examples = [LabelledText(t, e.label) for t, e in zip(texts, raw)]
            side = encode_texts_with_labels(examples, self.tokenizer, full.labels, max_length=full.max_length,
                                            side="validation")  # fmt: skip
            ided: list[Any] = [{**e, "id": len(full.train) + i} for i, e in enumerate(side.examples)]
            self.corrupted[key] = validation_batches(ided, self.tokenizer, self.batch_size)
        return self.corrupted[key]


def load_tuning_data(config: FinetuneConfig, tokenizer: Any) -> TuningData:
    """Read, split and encode the data of ``config`` with ``tokenizer`` (ValueError for data that cannot be)."""
    from tokenmask.recipes.finetune_data import load_finetune_split
    from tokenmask.recipes.tasks import load_task_data

    if config.task in ("qa", "retrieval"):  # one stratum; nothing to corrupt
        data = load_task_data(config, tokenizer)
        return TuningData(data, [""] * len(data.train), [], [], tokenizer, config.loop.batch_size)
    full, train, validation = load_finetune_split(config, tokenizer)
    strata = [getattr(e, "label", "") for e in train] if config.task == "classify" else [""] * len(train)
    return TuningData(full, strata, train, validation, tokenizer, config.loop.batch_size)


def tune_and_score(
    run: FinetuneConfig, data: TuningData, reporter: Reporter, *, size: int | None, corruptions: tuple[Corruption, ...],
    keep_checkpoints: bool,
) -> dict[str, Any]:  # fmt: skip
    """Fine-tune ``run`` on ``size`` training examples drawn with its seed, score its final model
    on the clean held-out set and each of ``corruptions``; then remove its checkpoints and best
    folder (kept until now: an unfinished run resumes from them) unless ``keep_checkpoints``.

    Returns:
        ``{"examples", "steps", "seconds", "divergence_warnings", "scores": {set: {metric: value}}}``.
    """
    from tokenmask.recipes.finetune import BEST_FOLDER, finetune
    from tokenmask.train.runs import CHECKPOINTS
    from tokenmask.use.classifier_scores import evaluate_classifier

    subset = data.training(size, run.loop.seed)
    result = finetune(run, reporter, data=subset)
    scores = {CLEAN: result.final.metrics()}
    for corruption in corruptions:
        assert isinstance(subset, FinetuneData)  # corrupted sets are a classifier's (Downstream.robustness)
        batches = data.corrupted_batches(run.loop.seed, corruption)
        scores[corruption.name] = evaluate_classifier(result.model, batches, task="classify", labels=subset.labels).metrics()
    if not keep_checkpoints:
        for name in (BEST_FOLDER, CHECKPOINTS):
            shutil.rmtree(Path(run.loop.output) / name, ignore_errors=True)
    return {
        "examples": len(subset.train), "steps": result.steps, "seconds": result.seconds,
        "divergence_warnings": len(result.warnings),
        "scores": {name: {m: float(found[m]) for m in SCORED[run.task]} for name, found in scores.items()},
    }  # fmt: skip


def source_model(output: Path, c: dict[str, Any]) -> tuple[str, int]:
    """The model a fine-tuning cell starts from (its source's snapshot at its share, or its final model) and
    its pre-training tokens; ValueError if it is missing (a source cell's folder changed by hand)."""
    from tokenmask.experiments.runner import MARKER
    from tokenmask.train.checkpoint import NOTES_FILE, snapshot_folder

    runs = output / c["source_folder"] / "pretrain"
    model = runs / "model" if c["fraction"] == 1.0 else snapshot_folder(runs, c["fraction"])
    notes = output / c["source_folder"] / MARKER if c["fraction"] == 1.0 else model / NOTES_FILE
    if not (model / "config.json").exists():
        raise ValueError(f"{model} is missing: the pre-training cell {c['source']} did not save it")
    return str(model), int(json.loads(notes.read_text(encoding="utf-8"))["tokens"]) if notes.exists() else 0
