"""The classification head: only the head is new, encoders must load, loss and scores by hand."""

import math
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file, save_file

from tokenmask.labelled.examples import LabelVocab
from tokenmask.train.classifier import classifier_loss_sum, load_classifier
from tokenmask.use.classifier_scores import evaluate_classifier


def test_a_masked_lm_folder_loads_with_only_head_and_pooler_new(tiny_mlm_folder):
    labels = LabelVocab(("neg", "pos"))
    loaded = load_classifier(tiny_mlm_folder, task="classify", labels=labels)
    assert type(loaded.model).__name__ == "BertForSequenceClassification"
    assert loaded.model.config.id2label == {0: "neg", 1: "pos"}
    new = next(note for note in loaded.notes if "new, randomly initialised" in note)
    assert new.endswith("bert.pooler.dense.bias, bert.pooler.dense.weight, classifier.bias, classifier.weight")
    assert any("cls.predictions" in note and "not used" in note for note in loaded.notes)
    tagger = load_classifier(tiny_mlm_folder, task="tokens", labels=LabelVocab(("O", "B-PER", "I-PER")))
    assert type(tagger.model).__name__ == "BertForTokenClassification" and tagger.model.num_labels == 3


def test_minilm_loads_every_encoder_weight():
    loaded = load_classifier("minilm", task="classify", labels=LabelVocab(("fresh", "rotten")))
    assert loaded.notes[0].startswith("minilm: encoder loaded into BertForSequenceClassification")
    assert "minilm: new, randomly initialised: classifier.bias, classifier.weight" in loaded.notes


def test_a_checkpoint_without_encoder_weights_is_refused(tiny_mlm_folder, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    for item in tiny_mlm_folder.iterdir():
        (broken / item.name).write_bytes(item.read_bytes())
    weights = load_file(broken / "model.safetensors")
    save_file({k: v for k, v in weights.items() if ".layer.0.attention." not in k}, broken / "model.safetensors")
    with pytest.raises(ValueError, match="lacks encoder weights.*layer.0.attention"):
        load_classifier(broken, task="classify", labels=LabelVocab(("a", "b")))
    with pytest.raises(ValueError, match="neither a folder, the name minilm, nor a Hub id"):
        load_classifier(tmp_path / "nothing", task="classify", labels=LabelVocab(("a", "b")))


class FixedLogits(torch.nn.Module):
    """Predicts from the ids alone: logits 2 for class ``id % C``, 0 elsewhere (per position or per row's 2nd id)."""

    def __init__(self, classes, per_token):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.classes, self.per_token = classes, per_token

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        ids = input_ids if self.per_token else input_ids[:, 1]
        logits = 2.0 * torch.nn.functional.one_hot(ids % self.classes, self.classes).float() + self.weight
        return SimpleNamespace(logits=logits)


def test_classification_loss_and_scores_by_hand():
    # rows' 2nd ids 4, 7, 9 -> predicted classes 1, 1, 0 (id % 3); gold 1, 2, 0
    batch = {"input_ids": torch.tensor([[1, 4], [1, 7], [1, 9]]), "attention_mask": torch.ones(3, 2, dtype=torch.long)}
    batch["labels"] = torch.tensor([1, 2, 0])
    model = FixedLogits(3, per_token=False)
    right, wrong = -math.log(math.e**2 / (math.e**2 + 2)), -math.log(1 / (math.e**2 + 2))
    assert classifier_loss_sum(model, batch).item() == pytest.approx(2 * right + wrong, rel=1e-6)
    evaluation = evaluate_classifier(model, [batch], task="classify", labels=LabelVocab(("a", "b", "c")))
    assert evaluation.loss == pytest.approx((2 * right + wrong) / 3, rel=1e-6)
    assert evaluation.scores.confusion.tolist() == [[1, 0, 0], [0, 1, 0], [0, 1, 0]]
    assert evaluation.metrics()["accuracy"] == pytest.approx(2 / 3)
    assert evaluation.metrics()["macro_f1"] == pytest.approx((1 + 2 / 3 + 0) / 3)
    assert list(evaluation.metrics()) == ["loss", "accuracy", "macro_f1"]  # loss first, for the loop


def test_token_scores_read_only_labelled_positions_and_score_spans():
    # tags O=0, B-X=1, I-X=2; the model tags each token id % 3. -100: special tokens, 2nd pieces, padding.
    ids = torch.tensor([[3, 1, 2, 5, 3], [3, 2, 2, 0, 0]])
    labels = torch.tensor([[-100, 1, 2, -100, -100], [-100, 1, 2, -100, -100]])
    batch = {"input_ids": ids, "attention_mask": (ids > 0).long(), "labels": labels}
    # row 0: gold B-X I-X, predicted (1, 2) B-X I-X: one right span; row 1: gold B-X I-X, predicted I-X I-X: the
    # same span (an I- start opens a span), so 2 of 2 spans right; tokens: 3 of 4 right
    evaluation = evaluate_classifier(
        FixedLogits(3, per_token=True), [batch], task="tokens", labels=LabelVocab(("O", "B-X", "I-X"))
    )
    assert evaluation.metrics()["accuracy"] == 0.75
    assert evaluation.spans.f1 == 1.0 and evaluation.spans.gold_spans == 2
    assert evaluation.scores.confusion.tolist() == [[0, 0, 0], [0, 1, 1], [0, 0, 2]]
    assert set(evaluation.metrics()) == {"loss", "accuracy", "macro_f1", "span_f1", "span_precision", "span_recall"}
