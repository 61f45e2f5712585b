"""The labelled examples of a fine-tuning run, read and encoded as its config says.

:func:`load_finetune_data` reads ``config.data`` (or the built-in Rotten Tomatoes snippets) with
the task's column names, splits them (unless ``config.eval_data`` is given) and encodes both
sides (:func:`tokenmask.labelled.align.prepare_finetune_data`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, cast

from tokenmask.labelled.align import FinetuneData, prepare_finetune_data
from tokenmask.labelled.examples import (
    LabelledText,
    SplitBy,
    TaggedSentence,
    read_labelled_texts,
    read_tagged_sentences,
    rotten_tomatoes,
    split_examples,
)
from tokenmask.recipes.config import FinetuneConfig
from tokenmask.text.byte_checks import ReadStats

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


def read_examples(
    paths: Sequence[str], config: FinetuneConfig, *, grouped: bool = True, stats: ReadStats | None = None
) -> list[LabelledText] | list[TaggedSentence]:
    """The labelled examples of ``paths``, read for ``config.task`` with its column names
    (and its ``group_by`` column unless ``grouped`` is False); replaced bytes counted in ``stats``."""
    group_by = config.group_by if grouped else None
    if config.task == "classify":
        text, label = config.text_column or "text", config.label_column or "label"
        return read_labelled_texts(paths, text_column=text, label_column=label, group_by=group_by, stats=stats)
    words, tags = config.text_column or "tokens", config.label_column or "tags"
    return read_tagged_sentences(paths, tokens_column=words, tags_column=tags, group_by=group_by, stats=stats)


Examples = list[LabelledText] | list[TaggedSentence]
"""Examples of one task: all texts with a class, or all tagged sentences."""


def split_finetune_examples(config: FinetuneConfig, *, stats: ReadStats | None = None) -> tuple[Examples, Examples]:
    """``(train, validation)``: the run's examples read and, unless ``eval_data`` is given, split.

    Without ``data``, the built-in Rotten Tomatoes snippets, split by movie. With ``data``, the
    split hashes each example's group when ``group_by`` is set, else its text. Raw examples,
    not encoded: what a comparison samples training sets from and corrupts evaluation text of.

    Raises:
        ValueError: unreadable data, token labelling without data, no training example left.
    """
    split_by: SplitBy
    if config.data:
        examples = read_examples(config.data, config, stats=stats)
        split_by = "group" if config.group_by else "text"
    elif config.task == "classify":
        examples, split_by = rotten_tomatoes(), "group"
    else:
        raise ValueError("the built-in data (Rotten Tomatoes reviews) is for --task classify; give token-labelled DATA")
    if config.eval_data:  # given validation files are not split, so they need no group column
        return examples, read_examples(config.eval_data, config, grouped=False, stats=stats)
    # split_examples keeps the examples' type; mypy cannot follow a TypeVar through a union of lists
    train, validation = cast(
        tuple[Examples, Examples], split_examples(examples, validation_share=config.validation_share, by=split_by)
    )
    if not train:
        raise ValueError("no training example left after the split; lower validation_share")
    return train, validation


def load_finetune_data(config: FinetuneConfig, tokenizer: PreTrainedTokenizerBase) -> FinetuneData:
    """Read, split (unless ``eval_data`` is given) and encode the run's examples (:func:`split_finetune_examples`).

    Raises:
        ValueError: unreadable data, token labelling without data, no training or validation example.
    """
    return load_finetune_split(config, tokenizer)[0]


def load_finetune_split(config: FinetuneConfig, tokenizer: PreTrainedTokenizerBase) -> tuple[FinetuneData, list, list]:
    """:func:`load_finetune_data` and the examples it encoded: ``(data, train examples, validation examples)``
    (a ``study`` draws each label budget's training sample and its corrupted held-out sets from them)."""
    stats = ReadStats()
    train, validation = split_finetune_examples(config, stats=stats)
    data = prepare_finetune_data(train, tokenizer, validation=validation, max_length=config.max_length)
    if not data.validation:
        raise ValueError("no validation example: give --eval DATA or more examples (or groups) to hold out")
    return replace(data, repaired=stats.describe()), list(train), list(validation)
