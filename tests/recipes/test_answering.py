"""Question answering end to end on a tiny model and a slice of SQuAD: windows, augmentation that spares the
answer, the command line, the saved model, and the answer command."""

import json

import pytest
import torch
from transformers import AutoModelForQuestionAnswering

from tokenmask.cli.main import main
from tokenmask.collate.augment import MaskingAugmenter
from tokenmask.labelled.questions import read_questions, squad_file
from tokenmask.recipes.answering import SQUAD_VALIDATION, load_question_data, split_questions
from tokenmask.recipes.config import FinetuneConfig
from tokenmask.settings import build
from tokenmask.use.answers import answer_question, evaluate_answers, window_batches


@pytest.fixture(scope="module")
def squad_slice(tmp_path_factory):
    """120 SQuAD train questions as JSON lines (Hugging Face's columns), over about 25 contexts."""
    path = tmp_path_factory.mktemp("squad") / "qa.jsonl"
    with path.open("w", encoding="utf-8") as handle:
        for q in read_questions(squad_file("train"))[:120]:
            answers = {"text": [a.text for a in q.answers], "answer_start": [a.start for a in q.answers]}
            handle.write(json.dumps({"question": q.question, "context": q.context, "answers": answers}) + "\n")
    return path


def test_windows_of_a_file_split_by_context_keep_every_paragraph_on_one_side(squad_slice, bert_tokenizer):
    config = build(FinetuneConfig, {"data": (str(squad_slice),), "task": "qa", "validation_share": 0.3})
    assert (config.max_length, config.doc_stride) == (384, 128)  # the task's defaults, as run_qa.py's
    train, validation, _ = split_questions(config)
    assert len(train) + len(validation) == 120 and validation
    assert not {q.context for q in train} & {q.context for q in validation}
    data = load_question_data(build(FinetuneConfig, {**config_settings(squad_slice), "max_length": 64}), bert_tokenizer)
    assert len(data.train) > data.train_questions  # contexts over 64 tokens take several windows
    answered = [f for f in data.train if f["labels"][0] > 0]
    assert 0 < data.outside == len(data.train) - len(answered)
    for feature in answered[:20]:  # the labels hold the answer's tokens; the spans protect them
        start, end = feature["labels"]
        assert feature["protected_spans"] == [[start, end + 1]] and 0 < start <= end < len(feature["input_ids"])


def config_settings(data, **more):
    return {"data": (str(data),), "task": "qa", "validation_share": 0.3, **more}


def test_augmentation_masks_the_question_and_context_but_never_the_answer(squad_slice, bert_tokenizer):
    data = load_question_data(build(FinetuneConfig, config_settings(squad_slice, max_length=96)), bert_tokenizer)
    features = [f for f in data.train if f["labels"][0] > 0][:32]
    batch = MaskingAugmenter(bert_tokenizer, rate=0.5, seed=3)(features)
    masked = batch["input_ids"] == bert_tokenizer.mask_token_id  # (B, T)
    assert masked.float().mean() > 0.3  # half of the eligible tokens
    for row, feature in enumerate(features):
        start, end = feature["labels"]
        assert not masked[row, start : end + 1].any()
        assert batch["labels"][row].tolist() == [start, end]  # labels kept


def test_the_built_in_squad_validates_on_a_fixed_spread_of_dev_questions():
    train, validation, source = split_questions(build(FinetuneConfig, {"task": "qa"}))
    dev = read_questions(squad_file("dev"))
    assert len(train) == 87_599 and "squad" in source
    assert [q.id for q in validation] == [q.id for q in dev[::10][:SQUAD_VALIDATION]]
    assert len({q.context.split(" ")[0] for q in validation}) > 100  # many paragraphs, not one article


def test_finetune_qa_writes_a_question_answering_model_that_answers(squad_slice, tiny_mlm_folder, tmp_path, capsys):
    out = tmp_path / "qa"
    argv = ["finetune", str(squad_slice), "--task", "qa", "--model", str(tiny_mlm_folder), "--output", str(out),
            "--max-steps", "6", "--eval-every", "3", "--batch-size", "8", "--max-length", "96", "--lr", "5e-3",
            "--augment-rate", "0.1", "--validation-share", "0.3"]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "fine-tuned 6 steps" in printed and "confusion" not in printed
    results = json.loads((out / "results.json").read_text())
    assert results["task"] == "qa" and set(results["final"]) >= {"loss", "exact_match", "f1", "questions"}
    assert 0 <= results["final"]["f1"] <= 1 and results["final"]["exact_match"] <= results["final"]["f1"]
    assert (out / "best").is_dir() and not (out / "confusion.png").exists()
    assert "pipeline_tag: question-answering" in (out / "model" / "README.md").read_text()
    model = AutoModelForQuestionAnswering.from_pretrained(out / "model")
    assert type(model).__name__ == "BertForQuestionAnswering"

    # the saved model scores as the run's last evaluation did
    config = build(FinetuneConfig, config_settings(squad_slice, max_length=96))
    data = load_question_data(config, bert_tokenizer_of(out))
    batches = window_batches(data.validation_windows, bert_tokenizer_of(out), 8)
    again = evaluate_answers(model, data.validation_windows, batches, data.validation)
    assert again.f1 == pytest.approx(results["final"]["f1"], abs=1e-6)
    assert again.loss == pytest.approx(results["final"]["loss"], rel=1e-4)

    context = "the castle of the king stands on a hill above the river."
    found = answer_question(out / "model", "where does the castle stand?", context, max_length=64, stride=16)
    assert found is not None and context[found.start : found.start + len(found.text)] == found.text
    assert main(["answer", str(out / "model"), "--question", "where?", "--context", context, "--json"]) == 0
    answered = json.loads(capsys.readouterr().out)["answer"]
    assert answered["text"] in context and isinstance(answered["score"], float)


def bert_tokenizer_of(folder):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder / "model")


def test_the_span_loss_is_the_mean_of_the_start_and_end_cross_entropies(squad_slice, bert_tokenizer, tiny_mlm_folder):
    """As Hugging Face's BertForQuestionAnswering computes it from start_positions and end_positions."""
    from tokenmask.train.classifier import load_classifier, span_loss_sum

    model = load_classifier(tiny_mlm_folder, task="qa").model.eval()
    data = load_question_data(build(FinetuneConfig, config_settings(squad_slice, max_length=96)), bert_tokenizer)
    batch = MaskingAugmenter(bert_tokenizer, rate=0.0)(data.train[:8])
    with torch.no_grad():
        ours = span_loss_sum(model, batch) / (2 * 8)
        theirs = model(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], token_type_ids=batch["token_type_ids"],
            start_positions=batch["labels"][:, 0], end_positions=batch["labels"][:, 1],
        ).loss  # fmt: skip
    assert float(ours) == pytest.approx(float(theirs), rel=1e-5)
