"""Labelled examples to fine-tuning inputs: label ids, labels aligned to sub-tokens, truncation counted.

The fine-tuning sibling of :mod:`tokenmask.blocks.build`: instead of packing documents into
blocks, each example stays one row (padded per batch later, see
:class:`tokenmask.labelled.sampler.LengthGroupedBatches`) and carries its task ``labels``: a class
id, or one id per token where the first piece of each word carries the word's tag and every
other position carries ``IGNORE_INDEX`` (-100). Rows also keep ``word_ids``, so
:class:`~tokenmask.collate.augment.MaskingAugmenter` can mask whole words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict, TypeGuard

from tokenmask.blocks.pack import batched
from tokenmask.labelled.examples import (
    Example,
    LabelledText,
    LabelVocab,
    SideCounts,
    SplitBy,
    TaggedSentence,
    Task,
    class_vocab,
    split_examples,
    tag_vocab,
)
from tokenmask.masking.config import IGNORE_INDEX

if TYPE_CHECKING:  # annotations only: importing transformers would slow `tokenmask --help`
    from transformers import PreTrainedTokenizerBase

DEFAULT_MAX_LENGTH = 128
DEFAULT_VALIDATION_SHARE = 0.1
"""Share of the examples (or groups) held out when no validation data is given."""

_BATCH = 1000  # examples tokenized per call


class LabelledExample(TypedDict):
    """An encoded fine-tuning example, as :class:`~tokenmask.collate.augment.MaskingAugmenter` takes it."""

    input_ids: list[int]
    """Token ids, special tokens included."""
    word_ids: list[int]
    """Word index per token, -1 on special tokens."""
    labels: int | list[int]
    """Task ``classify``: the class id; ``tokens``: one id per token, on the first piece of
    each word, ``IGNORE_INDEX`` elsewhere (:func:`align_labels`)."""
    id: int
    """A stable example id, unique across training and validation."""


def align_labels(word_ids: Sequence[int | None], word_labels: Sequence[int]) -> list[int]:
    """One label per token: the first piece of each word gets its word's label, the other
    pieces and special tokens (word id None or -1) get ``IGNORE_INDEX``.

    ``[CLS] un ##para ##lle ##led film [SEP]``: word ids ``[-1, 0, 0, 0, 0, 1, -1]``, word
    labels ``[3, 0]``  ->  ``[-100, 3, -100, -100, -100, 0, -100]``
    """
    labels = []
    previous = None
    for word in word_ids:
        if word is not None and word >= 0 and word != previous:  # the first piece of a word
            labels.append(word_labels[word])
        else:
            labels.append(IGNORE_INDEX)
        previous = word
    return labels


@dataclass(frozen=True)
class EncodedSide:
    """Encoded examples of one side (:class:`LabelledExample`) and what encoding cost them."""

    examples: list[LabelledExample]
    truncated: int
    """Examples cut at ``max_length`` tokens (their end is lost, never silently)."""
    lost_words: int = 0
    """Token labelling: tagged words with no token in the model input (cut off by truncation,
    or words the tokenizer turns into nothing), whose tags are never trained on."""


def encode_texts_with_labels(
    examples: Sequence[LabelledText],
    tokenizer: PreTrainedTokenizerBase,
    labels: LabelVocab,
    *,
    max_length: int = DEFAULT_MAX_LENGTH,
    first_id: int = 0,
    side: str = "training",
) -> EncodedSide:
    """Encode classification examples: ``labels`` is the class id, ids count from ``first_id``.

    ``LabelledText("A fine film.", "fresh")`` with labels ``("fresh", "rotten")``  ->
    ``{"input_ids": [101, 1037, 2986, 2143, 1012, 102], "word_ids": [-1, 0, 1, 2, 3, -1],
    "labels": 0, "id": 0}``

    Raises:
        ValueError: a slow tokenizer, a ``max_length`` with no room for text, a label not in
            ``labels`` (naming ``side``).
    """
    label_ids = labels.ids((e.label for e in examples), side=side)
    rows, words, truncated = _tokenize(tokenizer, [e.text for e in examples], max_length, split_into_words=False)
    encoded: list[LabelledExample] = [
        {"input_ids": ids, "word_ids": word_ids, "labels": label, "id": first_id + i}
        for i, (ids, word_ids, label) in enumerate(zip(rows, words, label_ids))
    ]
    return EncodedSide(encoded, truncated)


def encode_tagged_sentences(
    examples: Sequence[TaggedSentence],
    tokenizer: PreTrainedTokenizerBase,
    labels: LabelVocab,
    *,
    max_length: int = DEFAULT_MAX_LENGTH,
    first_id: int = 0,
    side: str = "training",
) -> EncodedSide:
    """Encode token-labelling examples: words are tokenized with ``is_split_into_words=True``
    and tags aligned to the pieces (:func:`align_labels`).

    ``TaggedSentence(("Paris", "unparalleled"), ("B-LOC", "O"))`` with labels ``("O", "B-LOC")``
    -> ``input_ids`` of ``[CLS] paris un ##para ##lle ##led [SEP]``, ``word_ids``
    ``[-1, 0, 1, 1, 1, 1, -1]``, ``labels`` ``[-100, 1, 0, -100, -100, -100, -100]``.

    Raises:
        ValueError: as :func:`encode_texts_with_labels`.
    """
    tag_ids = [labels.ids(e.tags, side=side) for e in examples]
    rows, words, truncated = _tokenize(tokenizer, [list(e.words) for e in examples], max_length, split_into_words=True)
    encoded: list[LabelledExample] = []
    lost = 0
    for i, (ids, word_ids, tags) in enumerate(zip(rows, words, tag_ids)):
        lost += len(tags) - len({w for w in word_ids if w >= 0})
        labels_per_token = align_labels(word_ids, tags)
        encoded.append({"input_ids": ids, "word_ids": word_ids, "labels": labels_per_token, "id": first_id + i})
    return EncodedSide(encoded, truncated, lost)


def _tokenize(
    tokenizer: PreTrainedTokenizerBase, inputs: list[Any], max_length: int, *, split_into_words: bool
) -> tuple[list[list[int]], list[list[int]], int]:
    """``(input_ids, word_ids, truncated)``; only the examples longer than ``max_length`` are
    tokenized a second time, with truncation, so the count of truncated ones is exact."""
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError("fine-tuning data needs a fast tokenizer (word ids align labels to tokens)")
    room = max_length - tokenizer.num_special_tokens_to_add(pair=False)
    if room < 1:
        raise ValueError(f"max_length must leave room for text after the special tokens; got {max_length}")
    rows: list[list[int]] = []
    words: list[list[int]] = []
    truncated = 0
    if split_into_words:
        # Byte-level BPE (RoBERTa, ModernBERT) spells the space before a word into its first piece
        # ("Ġvisited"), and transformers 5 tokenizes each given word as if it began the text
        # ("v is it ed"): the words after the first get their space back, as in running text.
        # WordPiece and SentencePiece-style tokenizers split on it and give the same pieces.
        inputs = [[word if i == 0 else f" {word}" for i, word in enumerate(words)] for words in inputs]
    for chunk in batched(inputs, _BATCH):
        encoding = tokenizer(chunk, is_split_into_words=split_into_words, add_special_tokens=True)
        ids = encoding["input_ids"]
        word_ids = [encoding.word_ids(i) for i in range(len(chunk))]
        long = [i for i, row in enumerate(ids) if len(row) > max_length]
        if long:
            cut = tokenizer(
                [chunk[i] for i in long],
                is_split_into_words=split_into_words,
                add_special_tokens=True,
                truncation=True,
                max_length=max_length,
            )
            for j, i in enumerate(long):
                ids[i], word_ids[i] = cut["input_ids"][j], cut.word_ids(j)
        truncated += len(long)
        rows.extend(ids)
        words.extend([-1 if w is None else w for w in row] for row in word_ids)
    return rows, words, truncated


@dataclass(frozen=True)
class FinetuneData:
    """Encoded training and validation examples of one task, their labels and what was kept.

    ``train`` / ``validation`` rows are :class:`LabelledExample`; validation ids start after
    the training ones, so ids are unique.
    """

    task: Task
    labels: LabelVocab
    train: list[LabelledExample]
    validation: list[LabelledExample]
    train_counts: SideCounts
    validation_counts: SideCounts
    max_length: int
    truncated: tuple[int, int]
    """Examples cut at ``max_length``: ``(training, validation)``."""
    lost_words: tuple[int, int] = (0, 0)
    """Token labelling: tagged words with no token left, ``(training, validation)``."""
    repaired: str = ""
    """What reading repaired, e.g. ``"2 lines with invalid UTF-8 replaced (first: a.csv: row 7)"``."""

    def describe(self) -> str:
        """A few lines for the console: sizes, label balance, truncation."""
        lines = [
            f"task {self.task}: {len(self.labels)} labels ({', '.join(self.labels.labels[:10])}"
            f"{', …' if len(self.labels) > 10 else ''})",
            f"  train:      {self.train_counts.describe()}",
            f"  validation: {self.validation_counts.describe()}",
            f"  truncated at {self.max_length} tokens: {self.truncated[0]:,} train, {self.truncated[1]:,} validation",
        ]
        if self.task == "tokens":
            train, validation = self.lost_words
            lines.append(f"  tagged words without a token: {train:,} train, {validation:,} validation")
        if self.repaired:
            lines.append(f"  {self.repaired}")
        return "\n".join(lines)


def prepare_finetune_data(
    examples: Sequence[LabelledText] | Sequence[TaggedSentence],
    tokenizer: PreTrainedTokenizerBase,
    *,
    validation: Sequence[LabelledText] | Sequence[TaggedSentence] | None = None,
    validation_share: float = DEFAULT_VALIDATION_SHARE,
    split_by: SplitBy = "text",
    max_length: int = DEFAULT_MAX_LENGTH,
) -> FinetuneData:
    """Split (unless ``validation`` is given), build the label vocabulary from the training
    side, encode both sides.

    The task follows the examples' type: :class:`LabelledText` -> ``"classify"``,
    :class:`TaggedSentence` -> ``"tokens"``.

    Args:
        examples: the labelled examples (all of one type).
        tokenizer: a fast tokenizer.
        validation: held-out examples of the same type; None splits ``examples``.
        validation_share: share held out by the split, in [0, 1).
        split_by: ``"text"`` (a hash of each text) or ``"group"`` (of each example's group:
            e.g. no movie on both sides).
        max_length: tokens per example at most, special tokens included.

    Raises:
        ValueError: no examples, mixed types, no training example left, a validation label
            unseen in training, and the errors of the split and the encoders.
    """
    task = _task_of(examples, "examples")
    if validation is not None and validation and _task_of(validation, "validation examples") != task:
        raise ValueError(f"validation examples are not for task {task!r} like the training ones")
    # one type on both sides, as _task_of checked (an empty validation list passes for either)
    train: list[LabelledText] | list[TaggedSentence]
    held_out: list[LabelledText] | list[TaggedSentence]
    if _all_texts(examples) and (validation is None or _all_texts(validation)):
        train, held_out = _sides(examples, validation, validation_share, split_by)
        labels = class_vocab(e.label for e in train)
        fit = encode_texts_with_labels(train, tokenizer, labels, max_length=max_length, side="training")
        check = encode_texts_with_labels(
            held_out, tokenizer, labels, max_length=max_length, first_id=len(train), side="validation"
        )
    elif _all_sentences(examples) and (validation is None or _all_sentences(validation)):
        train, held_out = _sides(examples, validation, validation_share, split_by)
        labels = tag_vocab(tag for e in train for tag in e.tags)
        fit = encode_tagged_sentences(train, tokenizer, labels, max_length=max_length, side="training")
        check = encode_tagged_sentences(
            held_out, tokenizer, labels, max_length=max_length, first_id=len(train), side="validation"
        )
    else:  # unreachable: _task_of refused mixed types above
        raise AssertionError("unreachable")
    return FinetuneData(
        task=task, labels=labels, train=fit.examples, validation=check.examples, max_length=max_length,
        train_counts=SideCounts.of(train), validation_counts=SideCounts.of(held_out),
        truncated=(fit.truncated, check.truncated), lost_words=(fit.lost_words, check.lost_words),
    )  # fmt: skip


def _sides(
    examples: Sequence[Example], validation: Sequence[Example] | None, validation_share: float, split_by: SplitBy
) -> tuple[list[Example], list[Example]]:
    """``(train, held_out)``: ``examples`` split unless ``validation`` is given.

    Raises:
        ValueError: no training example left, and the errors of the split.
    """
    if validation is None:
        train, held_out = split_examples(examples, validation_share=validation_share, by=split_by)
    else:
        train, held_out = list(examples), list(validation)
    if not train:
        raise ValueError("no training example left after the split; lower validation_share")
    return train, held_out


def _all_texts(examples: Sequence[object]) -> TypeGuard[Sequence[LabelledText]]:
    return all(isinstance(e, LabelledText) for e in examples)


def _all_sentences(examples: Sequence[object]) -> TypeGuard[Sequence[TaggedSentence]]:
    return all(isinstance(e, TaggedSentence) for e in examples)


def _task_of(examples: Sequence[Any], name: str) -> Task:
    if not examples:
        raise ValueError(f"no {name}: fine-tuning needs labelled examples")
    if _all_texts(examples):
        return "classify"
    if _all_sentences(examples):
        return "tokens"
    raise ValueError(f"{name} must all be LabelledText (task 'classify') or all TaggedSentence (task 'tokens')")
