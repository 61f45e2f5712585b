"""The replaced-token detector: shared embeddings, the loss and its normalisation, folders that transformers opens."""

from functools import partial

import pytest
import torch
import torch.nn.functional as F
from transformers import (
    AutoModel,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    ElectraForMaskedLM,
    ElectraForPreTraining,
    ModernBertForMaskedLM,
    pipeline,
)

from tokenmask.masking.replaced import detector_inputs, sample_replacements
from tokenmask.recipes.config import PretrainConfig
from tokenmask.settings import build
from tokenmask.train.detector import (
    GENERATOR_FOLDER,
    LinearDiscriminator,
    ReplacedTokenDetector,
    detection_loss_sum,
    has_detection_layer,
)
from tokenmask.train.heads import target_logits
from tokenmask.train.parallel import LossModule, make_accelerator
from tokenmask.train.presets import build_detector_parts
from tokenmask.train.step import TARGETS_PER_TOKEN, backward_pass

VOCAB = 60


FAMILIES = pytest.mark.parametrize("preset", ["electra-tiny", "modernbert-tiny"])


def tiny_detector(share=0.25, preset="electra-tiny"):
    torch.manual_seed(0)
    discriminator, generator = build_detector_parts(
        preset, vocab_size=VOCAB, max_length=16, pad_token_id=0, generator_share=share
    )
    allowed = torch.ones(VOCAB, dtype=torch.bool)
    allowed[:5] = False  # 0-4: padding and specials
    return ReplacedTokenDetector(discriminator, generator, allowed).eval()  # no dropout: runs compare


def make_batch(rows, targets_per_row, padded=0, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, VOCAB, (rows, 10), generator=g)
    attention = torch.ones_like(ids)
    if padded:
        ids[:, -padded:], attention[:, -padded:] = 0, 0
    labels = torch.full_like(ids, -100)
    labels[:, 1 : 1 + targets_per_row] = ids[:, 1 : 1 + targets_per_row]
    ids[:, 1 : 1 + targets_per_row] = 4  # [MASK]
    noise = torch.rand(rows, 10, generator=g, dtype=torch.float64)
    return {"input_ids": ids, "attention_mask": attention, "labels": labels, "replacement_noise": noise}


def test_the_generator_is_a_quarter_as_wide_and_shares_the_embeddings():
    model = tiny_detector()
    d, g = model.discriminator, model.generator
    assert (d.config.hidden_size, g.config.hidden_size) == (128, 32)
    assert g.config.num_hidden_layers == d.config.num_hidden_layers == 2
    assert g.electra.embeddings is d.electra.embeddings
    assert g.generator_lm_head.weight is d.electra.embeddings.word_embeddings.weight  # the output layer is tied too
    shared = d.electra.embeddings.word_embeddings.weight
    assert sum(1 for p in model.parameters() if p is shared) == 1  # one tensor to optimise


def test_a_modernbert_generator_is_as_wide_with_a_share_of_the_layers_and_shares_the_embeddings():
    model = tiny_detector(preset="modernbert-tiny")
    d, g = model.discriminator, model.generator
    assert isinstance(d, LinearDiscriminator) and isinstance(g, ModernBertForMaskedLM)
    assert (d.config.hidden_size, g.config.hidden_size) == (128, 128)
    assert (d.config.num_hidden_layers, g.config.num_hidden_layers) == (2, 1)  # 0.25 of 2 layers, at least 1
    assert g.model.embeddings is d.model.embeddings
    assert g.decoder.weight is d.model.embeddings.tok_embeddings.weight
    shared = d.model.embeddings.tok_embeddings.weight
    assert sum(1 for p in model.parameters() if p is shared) == 1
    assert model.base_model_prefix == "discriminator.model"
    logits = d(input_ids=torch.randint(5, VOCAB, (2, 7)), attention_mask=torch.ones(2, 7, dtype=torch.long)).logits
    assert logits.shape == (2, 7)  # one "replaced" logit per token: the head is one linear layer


@FAMILIES
def test_the_loss_is_generator_mean_plus_weight_times_discriminator_mean(preset):
    model, batch = tiny_detector(preset=preset), make_batch(3, 2, padded=3)
    targets = batch["labels"] != -100
    total = detection_loss_sum(model, batch, weight=50.0) / int(targets.sum())  # the loop divides by the targets
    # by hand: the generator's mean cross-entropy over 6 targets, the discriminator's mean BCE over 21 real tokens
    logits, gold = target_logits(model.generator, batch)
    samples = sample_replacements(logits, batch["replacement_noise"][targets], model.allowed)
    inputs, replaced = detector_inputs(batch["input_ids"], batch["labels"], samples, batch["attention_mask"])
    real = batch["attention_mask"].bool()
    scores = model.discriminator(input_ids=inputs, attention_mask=batch["attention_mask"]).logits
    assert int(real.sum()) == 21 and int(targets.sum()) == 6
    expected = F.cross_entropy(logits, gold) + 50 * F.binary_cross_entropy_with_logits(scores[real], replaced[real].float())
    assert total.item() == pytest.approx(expected.item(), rel=1e-5)
    assert not (inputs == 4).any() and (replaced[real] == 1).sum() > 0  # no [MASK] seen; some replaced


@FAMILIES
def test_accumulation_gives_the_loss_and_gradient_of_one_large_batch(preset):
    # micro-batches with different targets per token (2 of 10 vs 5 of 7 real): per-micro-batch
    # means would weight them wrongly; the loop's step-wide ratio does not
    a, b = make_batch(3, 2, seed=1), make_batch(2, 5, padded=3, seed=2)
    whole = {k: torch.cat([a[k], b[k]]) for k in a}
    accelerator = make_accelerator(precision="fp32", cpu=True, trackers=(), output=None)
    results, grads = [], []
    for micro in ([whole], [a, b]):
        model = tiny_detector(preset=preset)
        wrapped = LossModule(model, partial(detection_loss_sum, weight=50.0))
        targets, mean, tokens, _norm = backward_pass(accelerator, wrapped, micro, per_token=True)
        results.append((targets, mean, tokens))
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    assert results[0][0] == results[1][0] == 16 and results[0][2] == results[1][2] == 44
    assert results[0][1] == pytest.approx(results[1][1], rel=1e-5)
    for name, grad in grads[0].items():
        torch.testing.assert_close(grad, grads[1][name], rtol=1e-4, atol=1e-6, msg=name)


def test_without_the_loops_ratio_a_batch_uses_its_own():
    model, batch = tiny_detector(), make_batch(2, 3, padded=2)
    ratio = torch.tensor(6 / 16, dtype=torch.float64)
    assert float(detection_loss_sum(model, batch, weight=50.0)) == pytest.approx(
        float(detection_loss_sum(model, {**batch, TARGETS_PER_TOKEN: ratio}, weight=50.0)), rel=1e-6
    )


def test_the_folders_open_with_transformers(tmp_path, bert_tokenizer):
    discriminator, generator = build_detector_parts(
        "electra-tiny", vocab_size=len(bert_tokenizer), max_length=32, pad_token_id=0, generator_share=0.25
    )
    model = ReplacedTokenDetector(discriminator, generator, torch.ones(len(bert_tokenizer), dtype=torch.bool))
    model.save_pretrained(tmp_path / "model")
    bert_tokenizer.save_pretrained(tmp_path / "model")
    bert_tokenizer.save_pretrained(tmp_path / "model" / GENERATOR_FOLDER)
    assert isinstance(ElectraForPreTraining.from_pretrained(tmp_path / "model"), ElectraForPreTraining)
    _classifier, info = AutoModelForSequenceClassification.from_pretrained(
        tmp_path / "model", num_labels=3, output_loading_info=True
    )
    assert not [k for k in info["missing_keys"] if k.startswith("electra.")]  # the encoder loads; only the head is new
    AutoModelForTokenClassification.from_pretrained(tmp_path / "model", num_labels=5)
    encoder = AutoModel.from_pretrained(tmp_path / "model")
    torch.testing.assert_close(encoder.embeddings.word_embeddings.weight, discriminator.electra.embeddings.word_embeddings.weight)
    reloaded = ElectraForMaskedLM.from_pretrained(tmp_path / "model" / GENERATOR_FOLDER)
    torch.testing.assert_close(
        reloaded.electra.embeddings.word_embeddings.weight, discriminator.electra.embeddings.word_embeddings.weight
    )
    fill = pipeline("fill-mask", model=str(tmp_path / "model" / GENERATOR_FOLDER))
    assert len(fill(f"to be or not to be, that is the {fill.tokenizer.mask_token}.")) == 5


def test_a_modernbert_discriminator_opens_as_the_masked_lm_does(tmp_path, bert_tokenizer):
    torch.manual_seed(0)
    discriminator, generator = build_detector_parts(
        "modernbert-tiny", vocab_size=len(bert_tokenizer), max_length=32, pad_token_id=0, generator_share=0.25
    )
    torch.nn.init.normal_(discriminator.detection.weight)  # a layer unlike a new one, to see it come back
    model = ReplacedTokenDetector(discriminator, generator, torch.ones(len(bert_tokenizer), dtype=torch.bool))
    model.save_pretrained(tmp_path / "model")
    bert_tokenizer.save_pretrained(tmp_path / "model")
    bert_tokenizer.save_pretrained(tmp_path / "model" / GENERATOR_FOLDER)
    encoder = AutoModel.from_pretrained(tmp_path / "model")
    assert type(encoder).__name__ == "ModernBertModel"
    torch.testing.assert_close(encoder.embeddings.tok_embeddings.weight, discriminator.model.embeddings.tok_embeddings.weight)
    for auto in (AutoModelForSequenceClassification, AutoModelForTokenClassification):
        # as from a masked LM's folder: the body and the prediction head load, the classifier is new, detection is left out
        opened, info = auto.from_pretrained(tmp_path / "model", num_labels=3, output_loading_info=True)
        assert set(info["missing_keys"]) == {"classifier.weight", "classifier.bias"}
        assert set(info["unexpected_keys"]) == {"detection.weight", "detection.bias"}
        torch.testing.assert_close(opened.head.dense.weight, discriminator.head.dense.weight)
    assert has_detection_layer(tmp_path / "model") and not has_detection_layer(tmp_path / "model" / GENERATOR_FOLDER)
    (tmp_path / "pointer").mkdir()
    (tmp_path / "pointer" / "model.safetensors").write_text("version https://git-lfs.github.com/spec/v1\n")
    assert not has_detection_layer(tmp_path / "pointer")  # unreadable weights are left for the loader to report
    reloaded = LinearDiscriminator.from_pretrained(tmp_path / "model")
    for name, tensor in discriminator.state_dict().items():
        torch.testing.assert_close(reloaded.state_dict()[name], tensor, msg=name)
    ids = torch.tensor([[2, 40, 41, 42, 3]])
    torch.testing.assert_close(reloaded.eval()(input_ids=ids).logits, discriminator.eval()(input_ids=ids).logits)
    fill = pipeline("fill-mask", model=str(tmp_path / "model" / GENERATOR_FOLDER))
    assert len(fill(f"to be or not to be, that is the {fill.tokenizer.mask_token}.")) == 5


@pytest.mark.parametrize(
    "settings, message",
    [
        (
            {"objective": "rtd", "preset": "bert-tiny"},
            "choose --preset modernbert-tiny, modernbert-mini, electra-tiny, electra-mini, electra-small (not bert-tiny)",
        ),
        ({"objective": "rtd", "preset": "electra-tiny", "compile": True}, "--compile is not supported"),
        ({"objective": "rtd", "preset": "electra-tiny", "generator_share": 0}, "generator_share"),
    ],
)
def test_settings_replaced_token_detection_cannot_take_are_refused(settings, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build(PretrainConfig, settings)


def test_a_share_the_heads_cannot_divide_is_refused():
    with pytest.raises(ValueError, match="cannot have"):
        build_detector_parts(
            "electra-mini", vocab_size=VOCAB, max_length=16, pad_token_id=0, generator_share=0.55
        )  # 141 wide, 2 heads
