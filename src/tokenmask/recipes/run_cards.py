"""What each recipe puts on its model cards (laid out by :func:`tokenmask.train.card.model_card`).

Pre-training: the corpus and its blocks, the start (preset or checkpoint), the final fixed-mask
metrics. Fine-tuning: the labelled data, the base checkpoint, the task metrics, for both
OUTPUT/model and OUTPUT/best.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tokenmask.labelled.align import FinetuneData
from tokenmask.recipes.answering import QuestionData
from tokenmask.recipes.config import FinetuneConfig, PretrainConfig
from tokenmask.recipes.pretrain_data import PretrainData
from tokenmask.recipes.retrieval import RetrievalData
from tokenmask.train.card import PipelineTag, model_card
from tokenmask.train.job import TrainResult
from tokenmask.train.presets import PRESETS


def pretrain_card(
    config: PretrainConfig, data: PretrainData, command: str | None, *, part: Literal["model", "generator"] = "model"
) -> Callable[[TrainResult], str]:
    """``result -> README.md`` of OUTPUT/model: command, start, data, steps, tokens, final fixed-mask metrics.

    A replaced-token-detection run has two: OUTPUT/model, the discriminator (its scores at fixed
    replacements), and ``part="generator"``, OUTPUT/generator (its fixed-mask scores); each says
    what the other is.
    """
    start = (
        f"the checkpoint {config.init}{_at(config.hub.revision)}" if config.init else f"a new {config.preset} (random weights)"
    )
    detecting = config.objective == "rtd"
    family = "electra" if config.init else PRESETS[config.preset].family  # --init: ELECTRA discriminators only
    masks = (
        f"on {len(data.evaluation):,} {data.scored_on} blocks at fixed masks ({config.eval_mlm_probability:.0%} of tokens "
        f"selected{_COMMON * (config.eval_masking == 'common')}, the same masks at every evaluation)"
    )

    def card(result: TrainResult) -> str:
        final = result.evaluations[-1]
        scores = {k[len("eval_") :]: v for k, v in final.items() if k.startswith("eval_")}
        if detecting and part == "model":
            metrics = {k[len("detector_") :]: v for k, v in scores.items() if k.startswith("detector_")}
            evaluation = (
                f"At step {final['step']:,}, {masks[3:]}, each target replaced by a random token: whether the "
                "discriminator calls each real token replaced (precision and recall on the replaced ones)"
            )
        else:
            metrics = {k: v for k, v in scores.items() if not k.startswith("detector_")}
            evaluation = f"At step {final['step']:,}, {masks}"
        return model_card(
            pipeline_tag="feature-extraction" if detecting and part == "model" else "fill-mask", command=command,
            start=start, data=data.summary, steps=result.steps, tokens=result.tokens, metrics=metrics, evaluation=evaluation,
            path=str(Path(config.loop.output) / part), base_model=config.init, from_hub=config.hub.revision is not None,
            about=_detector_part(part, family) if detecting else "",
        )  # fmt: skip

    return card


_DISCRIMINATORS = {
    "electra": "an `ElectraForPreTraining`: BERT's body and ELECTRA's detection head",
    "modernbert": (
        "ModernBERT's body and prediction head with one linear layer over every token (`model.*`, `head.*`, "
        "`detection.*`; the `AutoModelFor…` classes leave `detection` out)"
    ),
}


def _detector_part(part: str, family: str) -> str:
    """The card's paragraph on what a replaced-token detection run's ``part`` (model, generator) is."""
    if part == "generator":
        return (
            "The generator of a replaced-token detection run (ELECTRA's objective): a smaller masked LM of the same "
            "family, trained with the masked-LM loss, whose samples the discriminator (`../model`, the model to "
            "fine-tune) learned to detect."
        )
    return (
        f"The discriminator of a replaced-token detection run (ELECTRA's objective): {_DISCRIMINATORS[family]}, which "
        "learned, at every token, whether a generator had replaced it. Fine-tune it (`tokenmask finetune --model` this "
        "folder, or `AutoModelForSequenceClassification` / `AutoModelForTokenClassification`, which add a new "
        "classifier). The run's generator, a masked LM for fill-mask, is saved beside it: in `../generator` for the "
        "run's final model, in a `generator` subfolder of its checkpoints and snapshots."
    )


def _at(revision: str | None) -> str:
    """`` at Hub revision 8e4b2a1…`` (the 40-hex commit) for a checkpoint named by Hub id, else nothing."""
    return f" at Hub revision {revision}" if revision else ""


_COMMON = ", token-level 80/10/10 as for every run on this data (own-masking scores: own_*)"

_HEADS: dict[str, tuple[str, PipelineTag]] = {
    "classify": ("classification", "text-classification"),
    "tokens": ("token-tagging", "token-classification"),
    "qa": ("question-answering", "question-answering"),
    "retrieval": ("sentence-embedding (mean pooling)", "sentence-similarity"),
}


@dataclass(frozen=True)
class FinetuneCards:
    """Writes the model cards of a fine-tuning run: OUTPUT/model (the final model) and OUTPUT/best."""

    config: FinetuneConfig
    data: FinetuneData | QuestionData | RetrievalData
    command: str | None

    def final(self, steps: int, tokens: int, metrics: dict[str, float]) -> str:
        """The card of OUTPUT/model: ``metrics`` of the last evaluation, after ``steps``."""
        return self._text(
            Path(self.config.loop.output) / "model", steps, tokens, metrics, f"At step {steps:,}, the end of the run"
        )

    def best(self, folder: Path, step: int, tokens: int, metrics: dict[str, float]) -> str:
        """The card of ``folder`` (OUTPUT/best): the best evaluation so far, at ``step``."""
        return self._text(folder, step, tokens, metrics, f"At step {step:,}, the run's best evaluation by {self.config.metric}")

    def _text(self, folder: Path, steps: int, tokens: int, metrics: dict[str, float], when: str) -> str:
        config, data = self.config, self.data
        if isinstance(data, RetrievalData):
            (head, tag), queries = _HEADS["retrieval"], len(data.validation.queries)
            described = f"{data.source}: {len(data.train):,} training pairs ({data.negatives:,} with a hard negative)"
            held = f"{queries:,} validation queries over {len(data.validation.corpus):,} texts"
        elif isinstance(data, QuestionData):
            head, tag = _HEADS["qa"]
            described = (
                f"{data.source}: {data.train_questions:,} training questions ({len(data.train):,} windows of "
                f"{data.max_length} tokens) and {len(data.validation):,} validation questions"
            )
            held = f"{len(data.validation):,} validation questions (exact match and F1 as SQuAD v1.1 defines them)"
        else:
            (head, tag), held = _HEADS[data.task], f"{len(data.validation):,} validation examples"
            given = ", ".join(config.data) if config.data else "the built-in Rotten Tomatoes snippets (split by movie)"
            labels = ", ".join(data.labels.labels[:20]) + (", …" if len(data.labels) > 20 else "")
            described = f"{given}: {len(data.train):,} training and {len(data.validation):,} validation examples; labels {labels}"
        return model_card(
            pipeline_tag=tag, command=self.command,
            start=f"the checkpoint {config.model}{_at(config.hub.revision)}, with a new {head} head",
            data=described, steps=steps, tokens=tokens, metrics=metrics, evaluation=f"{when}, on the {held}",
            path=str(folder), base_model=config.model, from_hub=config.hub.revision is not None,
        )  # fmt: skip


def tokens_at(records: Sequence[dict[str, Any]], step: int) -> int:
    """Training tokens seen by ``step``, from the run's log (0 before the first step)."""
    return next((int(r["tokens"]) for r in reversed(records) if r.get("step") == step and "tokens" in r), 0)
