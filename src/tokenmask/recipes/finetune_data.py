"""The labelled examples of a fine-tuning run, read and encoded as its config says.

:func:`load_finetune_data` reads ``config.data`` (or the built-in Rotten Tomatoes snippets) with
the task's column names, splits them (unless ``config.eval_data`` is given) and encodes both
sides (:func:`tokenmask.labelled.align.prepare_finetune_data`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from tokenmask.labelled.align import FinetuneData, prepare_finetune_data
from tokenmask.labelled.examples import (
    LabelledText,
    SplitBy,
    TaggedSentence,
    read_labelled_texts,
    read_tagged_sentences,
    rotten_tomatoes,
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


def load_finetune_data(config: FinetuneConfig, tokenizer: PreTrainedTokenizerBase) -> FinetuneData:
    """Read, split (unless ``eval_data`` is given) and encode the run's examples.

    Without ``data``, the built-in Rotten Tomatoes snippets, split by movie. With ``data``, the
    split hashes each example's group when ``group_by`` is set, else its text.

    Raises:
        ValueError: unreadable data, token labelling without data, no validation example.
    """
    stats = ReadStats()
    split_by: SplitBy
    if config.data:
        examples = read_examples(config.data, config, stats=stats)
        split_by = "group" if config.group_by else "text"
    elif config.task == "classify":
        examples, split_by = rotten_tomatoes(), "group"
    else:
        raise ValueError("the built-in data (Rotten Tomatoes reviews) is for --task classify; give token-labelled DATA")
    # given validation files are not split, so they need no group column
    validation = read_examples(config.eval_data, config, grouped=False, stats=stats) if config.eval_data else None
    data = prepare_finetune_data(
        examples,
        tokenizer,
        validation=validation,
        validation_share=config.validation_share,
        split_by=split_by,
        max_length=config.max_length,
    )
    if not data.validation:
        raise ValueError("no validation example: give --eval DATA or more examples (or groups) to hold out")
    return replace(data, repaired=stats.describe())
