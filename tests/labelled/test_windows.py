"""Questions cut into overlapping windows with the answer's tokens as labels; the round trip through the
post-processing recovers the gold answers of SQuAD dev from one-hot logits."""

import numpy as np
import pytest

from tokenmask.labelled.questions import Answer, Question, read_questions, squad_file
from tokenmask.labelled.windows import question_windows
from tokenmask.use.answer_scores import answer_scores
from tokenmask.use.answers import Answered, best_answers

CONTEXT = "Denver Broncos defeated the Carolina Panthers in Santa Clara."
WON = Question("q1", "Who won?", CONTEXT, (Answer("Denver Broncos", 0),))
WHERE = Question("q2", "Where?", CONTEXT, (Answer("Santa Clara", 49),))


def test_a_long_context_is_cut_into_overlapping_windows_labelled_where_they_hold_the_answer(bert_tokenizer):
    # [CLS] where ? [SEP] + 7 context tokens + [SEP] = 12: the 12 context tokens (denver broncos defeated the
    # carolina panthers in santa clara .) go into windows of 7, each overlapping the one before by 3
    windows = question_windows([WHERE], bert_tokenizer, max_length=12, stride=3)
    spans = [[CONTEXT[s:e] for s, e in (o for o in w.offsets if o is not None)] for w in windows]
    assert spans == [
        ["Denver", "Broncos", "defeated", "the", "Carolina", "Panthers", "in"],
        ["Carolina", "Panthers", "in", "Santa", "Clara", "."],
    ]  # fmt: skip
    first, second = windows
    assert (first.start, first.end) == (0, 0)  # "santa clara" is not in it: both labels on [CLS]
    assert CONTEXT[second.offsets[second.start][0] : second.offsets[second.end][1]] == "Santa Clara"
    assert first.input_ids[0] == bert_tokenizer.cls_token_id and first.token_type_ids[-2] == 1
    assert all(o is None for o in first.offsets[:4])  # [CLS] where ? [SEP]: not the context


def test_a_question_too_long_for_its_windows_is_cut_to_leave_the_context_more_than_the_stride(bert_tokenizer):
    # 14 tokens of question in windows of 16 sharing 4: 16 - 3 specials - 4 - 1 = 8 question tokens kept, so each
    # window gets 5 context tokens (the fast tokenizer refuses a window whose context is not over the stride)
    long = Question("q3", "who " * 13 + "won?", CONTEXT, (Answer("Santa Clara", 49),))
    windows = question_windows([long, WON], bert_tokenizer, max_length=16, stride=4)
    cut = [w for w in windows if w.question == "q3"]
    assert cut and all(w.cut and len(w.input_ids) <= 16 and sum(o is None for o in w.offsets) == 8 + 3 for w in cut)
    assert not any(w.cut for w in windows if w.question == "q1")
    assert any(CONTEXT[w.offsets[w.start][0] : w.offsets[w.end][1]] == "Santa Clara" for w in cut if w.start)


def test_an_answer_cut_by_a_window_labels_the_window_that_holds_it_whole(bert_tokenizer):
    windows = question_windows([WON], bert_tokenizer, max_length=10, stride=2)
    held = [w for w in windows if (w.start, w.end) != (0, 0)]
    assert held and all(CONTEXT[w.offsets[w.start][0] : w.offsets[w.end][1]] == "Denver Broncos" for w in held)


def test_the_best_span_over_the_windows_within_the_length_and_the_context(bert_tokenizer):
    window = question_windows([WON], bert_tokenizer, max_length=32, stride=8)[0]
    # tokens: [CLS] who won ? [SEP] denver(5) broncos(6) defeated(7) the(8) carolina(9) panthers(10) ...
    starts, ends = np.zeros(len(window.offsets)), np.zeros(len(window.offsets))
    starts[[0, 5, 9]], ends[[0, 6, 10, 2, 9]] = [9.0, 3.0, 2.0], [9.0, 3.0, 2.5, 8.0, 2.8]
    # [CLS] (9 + 9) and "won" (end 8) are not in the context; 5..6 scores 6.0, 5..9 5.8, 5..10 5.5, 9..9 4.8;
    # one token at most: 9..9 (4.8) beats 5..5 and 6..6 (3.0)
    found = best_answers([window], [starts], [ends], {"q1": CONTEXT})
    assert found == {"q1": Answered("Denver Broncos", CONTEXT.index("Denver"), 6.0)}
    assert best_answers([window], [starts], [ends], {"q1": CONTEXT}, max_answer_length=1)["q1"].text == "Carolina"
    assert best_answers([window], [starts], [ends], {"q1": CONTEXT}, n_best=1) == {}  # only [CLS] offered: nothing


def test_one_hot_logits_at_the_labels_give_back_squad_dev_answers(bert_tokenizer):
    questions = read_questions(squad_file("dev"))[:300]
    windows = question_windows(questions, bert_tokenizer, max_length=128, stride=32)
    assert len(windows) > len(questions)  # some contexts need several windows
    logits = [np.eye(len(w.input_ids))[[w.start, w.end]] for w in windows]  # the labels as the model's best guess
    found = best_answers(windows, [s for s, _ in logits], [e for _, e in logits], {q.id: q.context for q in questions})
    answers = {q: answer.text for q, answer in found.items()}
    scores = answer_scores(answers, {q.id: [a.text for a in q.answers] for q in questions})
    # a miss only where the first answer is part of a word ("8" of "18", "gold" of "golden"): its tokens reach past it
    missed = [q for q in questions if answer_scores({q.id: answers[q.id]}, {q.id: [q.answers[0].text]})["exact_match"] < 1]
    assert len(found) == len(questions) and all(q.answers[0].text in answers[q.id] for q in missed)
    assert scores["exact_match"] >= 0.95  # 290 of these 300 (10 answers inside a word)


def test_a_tokenizer_without_offsets_and_a_stride_the_windows_cannot_keep_are_refused(bert_tokenizer):
    class Slow:
        is_fast = False

    with pytest.raises(ValueError, match="fast tokenizer"):
        question_windows([WON], Slow())
    with pytest.raises(ValueError, match="stride"):
        question_windows([WON], bert_tokenizer, max_length=12, stride=6)
