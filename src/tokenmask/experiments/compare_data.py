"""The comparison's data, read and encoded once per process: training samples and corrupted sets drawn from it.

Every cell of a comparison fine-tunes on a stratified sample of the same training examples
and is scored on the same validation set and its corrupted copies. :func:`load_compare_data`
reads, splits and encodes them (the sweep runner does it once in each process that runs cells:
the comparison's own, or each of its ``jobs``), and :class:`CompareData` hands each cell its
sample and its sets.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from tokenmask.labelled.align import FinetuneData, LabelledExample, encode_texts_with_labels
from tokenmask.labelled.examples import LabelledText, SideCounts
from tokenmask.labelled.robustness import Corruption, corrupt_texts
from tokenmask.labelled.subsets import stratified_sample
from tokenmask.recipes.config import FinetuneConfig


@dataclass
class CompareData:
    """Everything encoded once: all training examples, the clean validation set, and the raw
    texts that the training samples and the corrupted sets are drawn from."""

    full: FinetuneData
    strata: list[str]
    """The label of each training example (``classify``); one stratum for ``tokens``."""
    train_raw: list[Any]
    validation_raw: list[Any]
    tokenizer: Any
    batch_size: int
    corrupted: dict[tuple[int, str], list[dict[str, Any]]] = field(default_factory=dict)
    """Collated corrupted sets by ``(seed, set name)``, built when first asked for."""

    def training(self, size: int | None, seed: int) -> FinetuneData:
        """The full data with the training side cut to a stratified sample (label vocabulary kept)."""
        chosen = stratified_sample(self.strata, size, seed=seed)
        return replace(
            self.full,
            train=[self.full.train[i] for i in chosen],
            train_counts=SideCounts.of([self.train_raw[i] for i in chosen]),
        )

    def corrupted_batches(self, seed: int, corruption: Corruption) -> list[dict[str, Any]]:
        """The validation set with ``corruption`` drawn with ``seed``, collated as the clean one is."""
        from tokenmask.recipes.finetune import validation_batches

        key = (seed, corruption.name)
        if key not in self.corrupted:
            texts = corrupt_texts(
                [e.text for e in self.validation_raw], corruption, seed=seed, unk_token=self.tokenizer.unk_token
            )
            examples = [LabelledText(t, e.label) for t, e in zip(texts, self.validation_raw)]
            side = encode_texts_with_labels(
                examples, self.tokenizer, self.full.labels, max_length=self.full.max_length, side="validation"
            )
            self.corrupted[key] = validation_batches(
                _ids_after(side.examples, len(self.full.train)), self.tokenizer, self.batch_size
            )
        return self.corrupted[key]


def _ids_after(examples: list[LabelledExample], first: int) -> list[LabelledExample]:
    return [{**e, "id": first + i} for i, e in enumerate(examples)]


def load_compare_data(config: FinetuneConfig, *, tokenizer: Any = None) -> CompareData:
    """Read, split and encode the data of ``config`` with ``tokenizer`` (None: ``config.model``'s);
    keep the examples for samples and corrupted sets.

    Raises:
        ValueError: data that cannot be read, split or encoded (:func:`~tokenmask.recipes.finetune_data.load_finetune_split`).
    """
    from tokenmask.recipes.finetune_data import load_finetune_split
    from tokenmask.train.classifier import load_classifier_tokenizer

    if tokenizer is None:
        tokenizer = load_classifier_tokenizer(config.model, hub=config.hub)
    full, train, validation = load_finetune_split(config, tokenizer)
    strata = [getattr(e, "label", "") for e in train] if config.task == "classify" else [""] * len(train)
    return CompareData(full, strata, train, validation, tokenizer, config.loop.batch_size)
