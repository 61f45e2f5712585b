"""Fine-tuning scores, by hand: confusion layout, macro-F1 with a class never predicted, BIO spans."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokenmask.use.metrics import (
    bio_spans,
    class_scores,
    confusion_matrix,
    format_confusion,
    plot_confusion,
    span_scores,
)


def test_confusion_rows_are_gold_columns_are_predictions():
    matrix = confusion_matrix([0, 0, 1, 2], [0, 1, 1, 1], 3)
    assert matrix.tolist() == [[1, 1, 0], [0, 1, 0], [0, 1, 0]]
    assert confusion_matrix([1], [0], 2).tolist() == [[0, 0], [1, 0]]  # gold 1 predicted 0: row 1, column 0


def test_confusion_refuses_bad_ids_and_lengths():
    with pytest.raises(ValueError, match=r"in \[0, 2\)"):
        confusion_matrix([0, 2], [0, 0], 2)
    with pytest.raises(ValueError, match="2 gold labels but 1 predictions"):
        confusion_matrix([0, 1], [0], 2)


def test_macro_f1_counts_a_class_never_predicted_as_zero():
    scores = class_scores([0, 0, 1, 2], [0, 1, 1, 1], ["a", "b", "c"])
    assert scores.accuracy == 0.5
    assert scores.precision.tolist() == pytest.approx([1.0, 1 / 3, 0.0])
    assert scores.recall.tolist() == pytest.approx([0.5, 1.0, 0.0])
    assert scores.f1.tolist() == pytest.approx([2 / 3, 0.5, 0.0])
    assert scores.macro_f1 == pytest.approx(7 / 18)
    assert scores.support.tolist() == [2, 1, 1]
    assert scores.per_class()["c"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}


def test_macro_f1_leaves_out_a_class_absent_from_gold_and_predictions():
    # class "c" is in the vocabulary but in neither list: averaging its 0/0 would halve the score
    scores = class_scores([0, 1, 1], [0, 1, 0], ["a", "b", "c"])
    # a: P 1/2 R 1 F 2/3; b: P 1 R 1/2 F 2/3
    assert scores.macro_f1 == pytest.approx(2 / 3)
    assert scores.f1[2] == 0.0


def test_perfect_and_empty():
    assert class_scores([1, 0], [1, 0], ["x", "y"]).macro_f1 == 1.0
    with pytest.raises(ValueError, match="no examples"):
        class_scores([], [], ["x"])


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=1, max_size=40))
def test_scores_agree_with_a_direct_count(pairs):
    gold, predicted = zip(*pairs)
    scores = class_scores(gold, predicted, ["a", "b", "c", "d"])
    assert scores.confusion.sum() == len(pairs)
    assert scores.accuracy == sum(g == p for g, p in pairs) / len(pairs)
    for label in range(4):
        hits = sum(g == p == label for g, p in pairs)
        guessed = sum(p == label for p in predicted)
        assert scores.precision[label] == (hits / guessed if guessed else 0.0)
        assert scores.support[label] == sum(g == label for g in gold)


def test_bio_spans_by_hand():
    assert bio_spans(["B-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-ORG"]) == [
        ("PER", 0, 2),
        ("LOC", 3, 4),  # I- without B-: a span of its own
        ("LOC", 4, 5),  # B- after a span of the same type: a new span
        ("ORG", 5, 6),  # I- of another type: a new span
    ]
    assert bio_spans(["I-MISC", "I-MISC", "O", "O"]) == [("MISC", 0, 2)]  # I- I- without B-: one span
    assert bio_spans(["O", "O"]) == [] and bio_spans([]) == []
    assert bio_spans(["B-X"]) == [("X", 0, 1)]
    assert bio_spans(["LOC", "LOC", "O", "PER"]) == [("LOC", 0, 2), ("PER", 3, 4)]  # IO tags


def test_span_scores_exact_match_only():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
    predicted = [["B-PER", "I-PER", "O", "I-ORG"], ["B-ORG", "B-ORG"]]
    # gold: PER 0-2, LOC 3-4 | ORG 0-1; predicted: PER 0-2, ORG 3-4 | ORG 0-1, ORG 1-2
    scores = span_scores(gold, predicted)
    assert (scores.correct_spans, scores.predicted_spans, scores.gold_spans) == (2, 4, 3)
    assert scores.precision == 0.5 and scores.recall == pytest.approx(2 / 3)
    assert scores.f1 == pytest.approx(2 * 0.5 * (2 / 3) / (0.5 + 2 / 3))
    assert scores.per_type["LOC"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}
    assert scores.per_type["ORG"]["precision"] == pytest.approx(1 / 3) and scores.per_type["ORG"]["recall"] == 1.0


def test_a_span_cut_short_is_wrong_and_an_i_start_can_match_a_b_start():
    assert span_scores([["B-PER", "I-PER"]], [["B-PER", "O"]]).f1 == 0.0
    assert span_scores([["B-PER", "I-PER"]], [["I-PER", "I-PER"]]).f1 == 1.0  # the same span, as seqeval
    assert span_scores([["O"]], [["O"]]).f1 == 0.0  # no span at all: nothing to get right


def test_span_scores_refuse_mismatched_sentences():
    with pytest.raises(ValueError, match="sentence 0: 2 gold tags but 1 predicted"):
        span_scores([["O", "O"]], [["O"]])


def test_confusion_table_layout():
    table = format_confusion(np.array([[5, 1], [2, 17]]), ["fresh", "rotten"])
    assert table.splitlines() == [
        "gold \\ predicted  fresh  rotten",
        "fresh                 5       1",
        "rotten                2      17",
    ]


def test_confusion_png(tmp_path):
    path = plot_confusion(np.array([[5, 1], [2, 17]]), ["fresh", "rotten"], tmp_path / "c.png")
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG") and len(data) > 3000
