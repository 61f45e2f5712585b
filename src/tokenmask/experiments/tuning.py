"""One fine-tuning run of a sweep, scored on the clean and the corrupted sets: the comparison's cells and the study's.

Both sweeps fine-tune on a stratified sample of the same encoded examples
(:class:`~tokenmask.experiments.compare_data.CompareData`) and score the final model on the
clean validation set and on corrupted copies of it (:mod:`tokenmask.labelled.robustness`);
:func:`tune_and_score` is that run, spelled once.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tokenmask.experiments.compare_data import CompareData
from tokenmask.experiments.compare_stats import CLEAN
from tokenmask.labelled.robustness import Corruption
from tokenmask.recipes.config import FinetuneConfig
from tokenmask.settings import flatten
from tokenmask.train.job import Reporter

SCORED_METRICS = {"classify": ("accuracy", "macro_f1"), "tokens": ("accuracy", "macro_f1", "span_f1")}
"""What every evaluation set is scored by, per task (higher is better for each)."""


def tune_and_score(
    run: FinetuneConfig,
    data: CompareData,
    reporter: Reporter,
    *,
    size: int | None,
    corruptions: Sequence[Corruption],
    keep: Sequence[str],
    command: str | None,
) -> dict[str, Any]:
    """Fine-tune ``run`` on ``size`` training examples drawn with its seed (stratified, nested:
    :meth:`CompareData.training`), score its final model on the clean validation set and on each
    of ``corruptions`` (drawn with the same seed), then remove the run's folders but ``keep``
    (``"model"``, ``"best"``, ``"checkpoints"``: kept only until now, since an unfinished run
    needs its checkpoints to resume).

    Returns:
        ``{"examples", "steps", "seconds", "divergence_warnings", "scores": {set: {metric: value}}, "config"}``.
    """
    from tokenmask.recipes.finetune import BEST_FOLDER, finetune
    from tokenmask.train.runs import CHECKPOINTS
    from tokenmask.use.classifier_scores import evaluate_classifier

    seed, folder = run.loop.seed, Path(run.loop.output)
    subset = data.training(size, seed)
    result = finetune(run, reporter, data=subset, command=command)
    scores = {CLEAN: _scored(result.final.metrics(), run)}
    for corruption in corruptions:
        batches = data.corrupted_batches(seed, corruption)
        scores[corruption.name] = _scored(
            evaluate_classifier(result.model, batches, task="classify", labels=subset.labels).metrics(), run
        )
    for name in (BEST_FOLDER, "model", CHECKPOINTS):
        if name not in keep:
            shutil.rmtree(folder / name, ignore_errors=True)
    return {
        "examples": len(subset.train), "steps": result.steps, "seconds": result.seconds,
        "divergence_warnings": len(result.warnings), "scores": scores, "config": flatten(run),
    }  # fmt: skip


def _scored(metrics: Mapping[str, float], run: FinetuneConfig) -> dict[str, float]:
    return {name: float(metrics[name]) for name in SCORED_METRICS[run.task]}
