"""Exact match and F1 as the official SQuAD v1.1 evaluation defines them, on cases worked out by hand."""

import pytest

from tokenmask.use.answer_scores import answer_scores, exact_match, f1, normalize_answer


@pytest.mark.parametrize(
    "text, normalised",
    [
        ("The Cat!", "cat"),  # lower case, punctuation out, "the" out
        ("  an   apple, a day ", "apple day"),  # articles out as words, white space collapsed
        ("Theatre", "theatre"),  # "the" inside a word stays
        ("Denver Broncos.", "denver broncos"),
        ("U.S.-based", "usbased"),  # punctuation removed, not turned into spaces
        ("A", ""),  # only an article
    ],
)
def test_normalisation(text, normalised):
    assert normalize_answer(text) == normalised


def test_exact_match_compares_normalised_text():
    assert exact_match("the Denver Broncos", "Denver Broncos!") == 1.0
    assert exact_match("Broncos", "Denver Broncos") == 0.0


def test_f1_by_hand():
    # (big, red, fox) against (red, fox, jumped): 2 shared, precision 2/3, recall 2/3 -> F1 2/3
    assert f1("the big red fox", "red fox jumped") == pytest.approx(2 / 3)
    # (denver) against (denver, broncos): precision 1, recall 1/2 -> F1 2 x 1/2 / 1.5 = 2/3
    assert f1("Denver", "Denver Broncos") == pytest.approx(2 / 3)
    # a word counts as often as it is in both: (a, a) -> after normalising (), nothing shared
    assert f1("the the", "the") == 0.0
    # (new, new, york) against (new, york): 2 shared, precision 2/3, recall 1 -> F1 0.8
    assert f1("new new york", "New York") == pytest.approx(0.8)
    assert f1("Paris", "London") == 0.0


def test_each_question_takes_its_best_gold_answer_and_the_set_its_mean():
    gold = {"q1": ["Denver Broncos", "Broncos"], "q2": ["1887"], "q3": ["in the park", "the park"]}
    predictions = {"q1": "Broncos", "q2": "1888"}  # q3 unanswered: 0
    scores = answer_scores(predictions, gold)
    # exact match: q1 1 (the second answer), q2 0, q3 0 -> 1/3; F1: q1 1, q2 0, q3 0 -> 1/3
    assert scores == pytest.approx({"exact_match": 1 / 3, "f1": 1 / 3})
    # "park" against "in the park" (in, park): precision 1, recall 1/2 -> 2/3; against "the park" (park): 1
    assert answer_scores({"q3": "park"}, {"q3": ["in the park", "the park"]}) == {"exact_match": 1.0, "f1": 1.0}


def test_nothing_to_score_is_refused():
    with pytest.raises(ValueError, match="no question"):
        answer_scores({}, {})
    with pytest.raises(ValueError, match="q1 has no gold answer"):
        answer_scores({"q1": "x"}, {"q1": []})
