"""Labelled data: every format read exactly, CoNLL parsing, label vocabularies, leak-free splits,
the Rotten Tomatoes default."""

import json
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenmask.labelled.examples import (
    LabelledText,
    LabelVocab,
    SideCounts,
    TaggedSentence,
    class_vocab,
    read_conll,
    read_labelled_texts,
    read_tagged_sentences,
    rotten_tomatoes,
    split_examples,
    tag_vocab,
)

ROWS = [
    {"text": "A three-hour master class.", "label": "fresh", "movie": "a_grin"},
    {"text": 'Dull, "long" and\nslow.', "label": "rotten", "movie": "abandon"},
    {"text": "Fun.", "label": "fresh", "movie": "abandon"},
]
EXPECTED = [LabelledText(r["text"], r["label"], r["movie"]) for r in ROWS]


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def write_table(path, rows, separator):
    def cell(value):
        return '"' + value.replace('"', '""') + '"' if any(c in value for c in ',"\n\t') else value

    lines = [separator.join(rows[0])] + [separator.join(cell(r[k]) for k in rows[0]) for r in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_every_format_gives_exactly_its_examples(tmp_path, datasets_quiet):
    sources = {
        "csv": write_table(tmp_path / "r.csv", ROWS, ","),
        "tsv": write_table(tmp_path / "r.tsv", ROWS, "\t"),
        "jsonl": write_jsonl(tmp_path / "r.jsonl", ROWS),
        "json": tmp_path / "r.json",
        "parquet": tmp_path / "r.parquet",
        "dataset": tmp_path / "r_data",
    }
    sources["json"].write_text(json.dumps(ROWS), encoding="utf-8")
    pq.write_table(pa.Table.from_pylist(ROWS), sources["parquet"], row_group_size=2)
    datasets_quiet.DatasetDict(
        {"train": datasets_quiet.Dataset.from_list(ROWS[:2]), "test": datasets_quiet.Dataset.from_list(ROWS[2:])}
    ).save_to_disk(str(sources["dataset"]))
    for kind, path in sources.items():
        assert read_labelled_texts([path], group_by="movie") == EXPECTED, kind
    assert read_labelled_texts([sources["dataset"]], split="test") == [LabelledText("Fun.", "fresh")]
    ungrouped = [LabelledText(r["text"], r["label"]) for r in ROWS]
    assert read_labelled_texts([sources["csv"], sources["jsonl"]]) == ungrouped * 2


def test_labels_become_strings_whatever_their_type(tmp_path):
    write_jsonl(tmp_path / "n.jsonl", [{"text": "a", "label": 1}, {"text": "b", "label": 0.5}])
    (tmp_path / "n.csv").write_text("text,label\na,1\n", encoding="utf-8")
    assert [e.label for e in read_labelled_texts([tmp_path / "n.jsonl", tmp_path / "n.csv"])] == ["1", "0.5", "1"]


def test_missing_column_names_it_and_the_columns_there_are(tmp_path):
    path = write_table(tmp_path / "r.csv", [{"review": "good", "stars": "5"}], ",")
    message = r"r.csv: no 'label' column or field; there are: 'review', 'stars' \(choose with text_column"
    with pytest.raises(ValueError, match=message):
        read_labelled_texts([path], text_column="review")
    write_jsonl(tmp_path / "r.jsonl", [{"text": "good", "label": "fresh"}])
    with pytest.raises(ValueError, match=r"r.jsonl:1: no 'movie' column or field; there are: 'text', 'label'"):
        read_labelled_texts([tmp_path / "r.jsonl"], group_by="movie")


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"text": "a", "label": None}, "the 'label' field is missing \\(null\\)"),
        ({"text": "a", "label": ""}, "the 'label' field is empty"),
        ({"text": "a", "label": [1, 0]}, "the 'label' field is a list"),
        ({"text": "a", "label": True}, "the 'label' field is a bool"),
        ({"text": None, "label": "x"}, "the 'text' field is missing \\(null\\), not a string"),
    ],
)
def test_bad_values_are_named_with_their_record(tmp_path, record, message):
    write_jsonl(tmp_path / "r.jsonl", [{"text": "fine", "label": "x"}, record])
    with pytest.raises(ValueError, match=f"r.jsonl:2: {message}"):
        read_labelled_texts([tmp_path / "r.jsonl"])


CONLL = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC


Peter NNP B-NP B-PER
Blackburn NNP B-NP I-PER
-DOCSTART- -X- -X- O
BRUSSELS NNP B-NP B-LOC"""


def test_conll_sentences_tag_last_docstart_and_blank_lines_skipped(tmp_path):
    path = tmp_path / "train.conll"
    path.write_text(CONLL, encoding="utf-8")  # no blank line at the end; a -DOCSTART- right after a sentence
    assert list(read_conll(path)) == [
        TaggedSentence(("EU", "rejects", "German"), ("B-ORG", "O", "B-MISC")),
        TaggedSentence(("Peter", "Blackburn"), ("B-PER", "I-PER")),
        TaggedSentence(("BRUSSELS",), ("B-LOC",)),
    ]
    (tmp_path / "two.txt").write_text("Paris\tB-LOC\n\n\n\nrocks O\n\n", encoding="utf-8")  # tabs, runs of blanks
    assert list(read_conll(tmp_path / "two.txt")) == [
        TaggedSentence(("Paris",), ("B-LOC",)),
        TaggedSentence(("rocks",), ("O",)),
    ]


def test_conll_line_without_a_tag_is_named(tmp_path):
    (tmp_path / "bad.conll").write_text("EU B-ORG\nrejects\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad.conll:2: expected a token and a tag, got 'rejects'"):
        list(read_conll(tmp_path / "bad.conll"))


def test_tagged_records_and_conll_files_in_one_folder(tmp_path):
    (tmp_path / "a.conll").write_text("EU B-ORG\n", encoding="utf-8")
    write_jsonl(tmp_path / "b.jsonl", [{"tokens": ["Paris", "rocks"], "tags": ["B-LOC", "O"], "doc": 7}])
    (tmp_path / "notes.md").write_text("not data\n", encoding="utf-8")  # not a tagged type: passed over
    assert read_tagged_sentences([tmp_path]) == [
        TaggedSentence(("EU",), ("B-ORG",)),
        TaggedSentence(("Paris", "rocks"), ("B-LOC", "O")),
    ]
    assert read_tagged_sentences([tmp_path / "b.jsonl"], group_by="doc")[0].group == "7"


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"tokens": ["a", "b"], "tags": ["O"]}, "r.jsonl:1: 2 words but 1 tags"),
        ({"tokens": [], "tags": []}, "r.jsonl:1: a tagged sentence needs at least one word"),
        ({"tokens": "a b", "tags": ["O", "O"]}, "r.jsonl:1: the 'tokens' field is a str, not a list"),
        ({"tokens": ["a", 1], "tags": ["O", "O"]}, "the 'tokens' field must be a list of strings"),
        ({"words": ["a"], "tags": ["O"]}, r"no 'tokens' column or field; there are: 'words', 'tags' \(choose"),
    ],
)
def test_bad_tagged_records_are_named(tmp_path, record, message):
    write_jsonl(tmp_path / "r.jsonl", [record])
    with pytest.raises(ValueError, match=message):
        read_tagged_sentences([tmp_path / "r.jsonl"])


def test_label_vocabularies_are_sorted_from_the_training_labels():
    assert class_vocab(["rotten", "fresh", "rotten"]).labels == ("fresh", "rotten")
    assert class_vocab(["10", "2", "0", "1"]).labels == ("0", "1", "2", "10")  # numbers sort as numbers
    assert class_vocab(["10", "2", "b"]).labels == ("10", "2", "b")
    assert tag_vocab(["B-PER", "O", "I-PER", "B-LOC", "O"]).labels == ("O", "B-LOC", "B-PER", "I-PER")
    assert tag_vocab(["I-X", "B-X"]).labels == ("B-X", "I-X")
    vocab = class_vocab(["rotten", "fresh"])
    assert vocab.label2id == {"fresh": 0, "rotten": 1} and vocab.id2label == {0: "fresh", 1: "rotten"}
    assert vocab.ids(["rotten", "fresh", "rotten"]) == [1, 0, 1]
    with pytest.raises(ValueError, match="at least one label"):
        class_vocab([])
    with pytest.raises(ValueError, match="unique"):
        LabelVocab(("a", "a"))


def test_unseen_label_is_refused_naming_it_and_the_known_ones():
    vocab = tag_vocab(["O", "B-PER"])
    message = r"validation labels not seen in training: 'B-LOC', 'I-LOC'; training labels: 'O', 'B-PER'"
    with pytest.raises(ValueError, match=message):
        vocab.ids(["O", "I-LOC", "B-LOC", "I-LOC"])


@settings(max_examples=60, deadline=None)
@given(
    groups=st.lists(st.integers(0, 40), min_size=1, max_size=300),
    share=st.floats(0.0, 0.95),
    seed=st.integers(0, 2**16),
)
def test_group_split_keeps_every_group_whole_whatever_the_order(groups, share, seed):
    examples = [LabelledText(f"text {i}", "x", f"group {g}") for i, g in enumerate(groups)]
    train, validation = split_examples(examples, validation_share=share, by="group")
    assert not {e.group for e in train} & {e.group for e in validation}
    assert sorted(train + validation, key=lambda e: e.text) == sorted(examples, key=lambda e: e.text)
    assert [e.text for e in train] == [e.text for e in examples if e in set(train)]  # order kept
    shuffled = examples[:]
    random.Random(seed).shuffle(shuffled)
    _again_train, again_validation = split_examples(shuffled, validation_share=share, by="group")
    assert {e.text for e in again_validation} == {e.text for e in validation}  # the side follows the group only


def test_text_split_and_its_errors():
    examples = [LabelledText(f"snippet {i}", "a") for i in range(2000)]
    train, validation = split_examples(examples, validation_share=0.1)
    # Binomial(2000, 0.1): mean 200, sd 13.4; +-4 sd.
    assert 146 <= len(validation) <= 254
    assert split_examples(examples, validation_share=0.1) == (train, validation)
    assert split_examples(examples, validation_share=0.0) == (examples, [])
    tagged = [TaggedSentence(("snippet", str(i)), ("O", "O")) for i in range(2000)]
    assert [e.text for e in split_examples(tagged, validation_share=0.1)[1]] == [e.text for e in validation]
    with pytest.raises(ValueError, match="no group"):
        split_examples(examples, validation_share=0.1, by="group")
    with pytest.raises(ValueError, match=r"validation_share must be in \[0, 1\); got 1.0"):
        split_examples(examples, validation_share=1.0)
    with pytest.raises(ValueError, match="split by must be one of text, group"):
        split_examples(examples, validation_share=0.1, by="label")


def test_side_counts_count_labels_tags_and_groups():
    counts = SideCounts.of(
        [LabelledText("a", "fresh", "m1"), LabelledText("b", "rotten", "m1"), LabelledText("c", "fresh", "m2")]
    )
    assert counts == SideCounts(examples=3, labels={"fresh": 2, "rotten": 1}, groups=2)
    assert counts.describe() == "3 examples (2 groups); fresh 2 (66.7%), rotten 1 (33.3%)"
    tags = SideCounts.of([TaggedSentence(("EU", "rejects"), ("B-ORG", "O"))])
    assert tags == SideCounts(examples=1, labels={"B-ORG": 1, "O": 1}, groups=None)


def test_rotten_tomatoes_is_two_balanced_sides_with_no_movie_on_both():
    examples = rotten_tomatoes()
    assert len(examples) == 12808  # 7,403 fresh + 5,405 rotten; the 1,097 plot summaries left out
    assert class_vocab(e.label for e in examples).labels == ("fresh", "rotten")
    assert len({e.group for e in examples}) == 508
    assert all(e.text.strip() for e in examples)
    train, validation = split_examples(examples, validation_share=0.1, by="group")
    assert not {e.group for e in train} & {e.group for e in validation}
    # Movies are held out ~ Binomial(508, 0.1): 51 +- 6.8; +-4 sd at ~25 snippets a movie is a 5%-15% share.
    assert 0.05 <= len(validation) / len(examples) <= 0.15
    # 57.8% fresh overall; a movie's fresh share varies (sd 0.28), so over ~51 held-out movies the
    # validation share has sd ~0.04: +-4 sd is [0.42, 0.74]. The much larger training side stays near 57.8%.
    assert 0.42 <= sum(e.label == "fresh" for e in validation) / len(validation) <= 0.74
    assert 0.53 <= sum(e.label == "fresh" for e in train) / len(train) <= 0.63
