"""Extractive questions read from SQuAD JSON and JSON lines; the built-in SQuAD v1.1; bad files named."""

import json

import pytest

from tokenmask.labelled.questions import Answer, Question, read_questions, squad_file

CONTEXT = "Denver Broncos defeated the Carolina Panthers in Santa Clara."


def squad(answers: list[dict]) -> dict:
    question = {"id": "q1", "question": "Who won?", "answers": answers}
    return {"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": CONTEXT, "qas": [question]}]}]}


def test_squad_json_and_json_lines_give_the_same_questions(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps(squad([{"text": "Denver Broncos", "answer_start": 0}])))
    lines = [
        {"id": "q1", "question": "Who won?", "context": CONTEXT, "answers": {"text": ["Denver Broncos"], "answer_start": [0]}},
        {"question": "Where?", "context": CONTEXT, "answers": [{"text": "Santa Clara", "answer_start": 49}]},
    ]
    (tmp_path / "b.jsonl").write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    expected = Question("q1", "Who won?", CONTEXT, (Answer("Denver Broncos", 0),))
    assert read_questions(tmp_path / "a.json") == [expected]
    # records are named by where they are: the shared record reader's "path:line"
    won, where = read_questions(tmp_path / "b.jsonl")
    assert (won.id, where.id) == (f"{tmp_path / 'b.jsonl'}:1", f"{tmp_path / 'b.jsonl'}:2")
    assert (won.question, won.answers, where.answers) == ("Who won?", expected.answers, (Answer("Santa Clara", 49),))


@pytest.mark.parametrize(
    "content, message",
    [
        (squad([{"text": "Carolina", "answer_start": 0}]), "question q1: the answer 'Carolina' is not at character 0"),
        (squad([{"text": "Denver"}]), "question q1 has no 'answer_start'"),
        ({"data": [{"title": "t", "paragraphs": [{"qas": []}]}]}, "paragraph 0 has no 'context'"),
        ({"version": "1.1"}, "has no 'data'"),
        ({"data": []}, "no question in it"),
    ],
)
def test_bad_files_are_refused_naming_the_question_and_the_field(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(content))
    with pytest.raises(ValueError, match="bad.json: .*" + message.replace("(", r"\(")):
        read_questions(path)


def test_a_broken_json_lines_file_is_named(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"question": "x", "context": "y"}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:1: no 'answers' column or field; there are: 'question', 'context' \(every"):
        read_questions(path)
    path.write_text("{not json\n")
    with pytest.raises(ValueError, match="bad.jsonl:1: not valid JSON"):
        read_questions(path)


def test_the_built_in_squad_dev_set():
    questions = read_questions(squad_file("dev"))  # every answer checked against its context as it is read
    assert len(questions) == 10_570 and len({q.context for q in questions}) == 2_067
    assert all(1 <= len(q.answers) <= 6 for q in questions)
    with pytest.raises(ValueError, match="splits train and dev"):
        squad_file("test")
