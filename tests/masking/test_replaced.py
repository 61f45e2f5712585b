"""Replaced-token detection's pure steps: the sampling noise, the generator's samples, the discriminator's labels."""

import numpy as np
import pytest
import torch

from tokenmask.collate.collator import MaskingCollator
from tokenmask.masking.config import IGNORE_INDEX, MaskingConfig, UnitConfig
from tokenmask.masking.replaced import ORIGINAL, REPLACED, detector_inputs, replacement_noise, sample_replacements

CLS, SEP, PAD, MASK = 101, 102, 0, 103


def test_the_docstring_example_draws_from_the_allowed_ids_only():
    drawn = sample_replacements(torch.zeros(1, 3), torch.tensor([0.5]), torch.tensor([True, False, True]))
    assert drawn.tolist() == [2]  # cdf [0.5, 0.5, 1.0]: 0.5 is not below 0.5, so id 2
    assert sample_replacements(torch.zeros(1, 3), torch.tensor([0.49]), torch.tensor([True, False, True])).tolist() == [0]


def test_samples_follow_the_softmax_within_binomial_bands():
    # 100,000 draws over 4 allowed ids of 6; each count within 5 sd of n*p (sd = sqrt(n p (1-p)))
    logits = torch.tensor([2.0, 1.0, 0.0, -1.0, 9.0, 9.0])
    allowed = torch.tensor([True, True, True, True, False, False])
    n = 100_000
    noise = torch.from_numpy(np.random.default_rng(0).random(n))
    drawn = sample_replacements(logits.expand(n, -1), noise, allowed)
    counts = torch.bincount(drawn, minlength=6).double()
    p = torch.softmax(logits[:4].double(), dim=0)
    assert counts[4:].sum() == 0  # the two likeliest ids are not allowed: never drawn
    band = 5 * torch.sqrt(n * p * (1 - p))
    assert torch.all((counts[:4] - n * p).abs() <= band), (counts[:4], n * p)


def test_the_same_logits_and_noise_give_the_same_sample_and_nothing_is_changed():
    g = torch.Generator().manual_seed(1)
    logits, noise = torch.randn(50, 30, generator=g), torch.rand(50, generator=g, dtype=torch.float64)
    allowed = torch.rand(30, generator=g) > 0.3
    before = logits.clone(), noise.clone()
    first, second = sample_replacements(logits, noise, allowed), sample_replacements(logits, noise, allowed)
    assert torch.equal(first, second) and allowed[first].all()
    assert torch.equal(logits, before[0]) and torch.equal(noise, before[1])
    # bf16 logits (autocast) sample too, and still only allowed ids
    assert allowed[sample_replacements(logits.bfloat16(), noise, allowed)].all()
    # in chunks of rows: the same samples, whatever the chunk
    assert torch.equal(sample_replacements(logits, noise, allowed, chunk=7), first)
    assert sample_replacements(logits[:0], noise[:0], allowed).shape == (0,)


def test_noise_depends_on_example_and_position_not_on_the_batch():
    ids = np.array([7, 8, 9], dtype=np.int64)
    wide = replacement_noise(ids, 12, seed=3, epoch=1)
    narrow = replacement_noise(ids[[2, 0]], 5, seed=3, epoch=1)
    assert wide.shape == (3, 12) and np.array_equal(narrow, wide[[2, 0], :5])
    assert not np.array_equal(replacement_noise(ids, 12, seed=3, epoch=2), wide)  # a new epoch, new samples
    assert not np.array_equal(replacement_noise(ids, 12, seed=4, epoch=1), wide)
    many = replacement_noise(np.arange(1000), 100, seed=0, epoch=0)  # 10^5 uniforms: mean 0.5 +- 5 sd (sd 0.289/sqrt(n))
    assert ((many >= 0) & (many < 1)).all() and abs(many.mean() - 0.5) < 5 * 0.289 / np.sqrt(many.size)


def test_labels_at_the_corner_cases():
    # [CLS] a b c [SEP] [PAD]: b and c are targets (b masked, c kept); b's sample differs, c's equals c
    a, b, c = 2000, 2001, 2002
    input_ids = torch.tensor([[CLS, a, MASK, c, SEP, PAD]])
    labels = torch.tensor([[IGNORE_INDEX, IGNORE_INDEX, b, c, IGNORE_INDEX, IGNORE_INDEX]])
    attention = torch.tensor([[1, 1, 1, 1, 1, 0]])
    inputs, replaced = detector_inputs(input_ids, labels, torch.tensor([3000, c]), attention)
    assert inputs.tolist() == [[CLS, a, 3000, c, SEP, PAD]]  # no [MASK] left; the kept target is its sample (itself)
    assert replaced.tolist() == [[ORIGINAL, ORIGINAL, REPLACED, ORIGINAL, ORIGINAL, IGNORE_INDEX]]
    # a random-replaced target whose sample is the original: original again, not the random token
    inputs, replaced = detector_inputs(
        torch.tensor([[CLS, 555, SEP]]), torch.tensor([[-100, a, -100]]), torch.tensor([a]), torch.ones(1, 3)
    )
    assert inputs.tolist() == [[CLS, a, SEP]] and replaced.tolist() == [[0, 0, 0]]
    assert input_ids.tolist() == [[CLS, a, MASK, c, SEP, PAD]]  # the arguments are not changed


@pytest.mark.parametrize("strategy", ["whole_word", "span"])
def test_units_are_judged_token_by_token_and_specials_never_replaced(bert_tokenizer, strategy):
    collator = MaskingCollator.from_config(
        bert_tokenizer, MaskingConfig(units=UnitConfig(strategy=strategy)).at_rate(0.4), seed=0, replacement_noise=True
    )
    texts = ["unquestionably the tempestuous playwright", "extraordinarily", "to be or not to be, that is the question"]
    batch = collator.collate([dict(bert_tokenizer(t)) for t in texts], epoch=0)
    targets = batch["labels"] != IGNORE_INDEX
    original = torch.where(targets, batch["labels"], batch["input_ids"])
    # samples: the original at every other target in turn, a fixed other word elsewhere
    keep = torch.arange(int(targets.sum())) % 2 == 0
    samples = torch.where(keep, batch["labels"][targets], torch.tensor(bert_tokenizer.convert_tokens_to_ids("horse")))
    inputs, replaced = detector_inputs(batch["input_ids"], batch["labels"], samples, batch["attention_mask"])
    real = batch["attention_mask"].bool()
    assert torch.equal(replaced[~real], torch.full_like(replaced[~real], IGNORE_INDEX))  # padding: no label
    assert torch.equal(replaced[real] == REPLACED, (inputs != original)[real])
    assert (replaced[targets] == REPLACED).sum() == (~keep & (samples != batch["labels"][targets])).sum()
    specials = torch.isin(original, torch.tensor(bert_tokenizer.all_special_ids))
    assert (replaced[specials & real] == ORIGINAL).all() and not (inputs == bert_tokenizer.mask_token_id).any()
    # a unit of several tokens is judged token by token: neighbouring targets with different labels
    assert ((replaced[:, 1:] != replaced[:, :-1]) & targets[:, 1:] & targets[:, :-1]).any()


def test_the_discriminator_never_sees_mask_or_a_special_from_real_batches(bert_tokenizer):
    collator = MaskingCollator.from_config(bert_tokenizer, MaskingConfig().at_rate(0.5), seed=1, replacement_noise=True)
    batch = collator.collate([dict(bert_tokenizer("the quality of mercy is not strained " * 4))] * 8, epoch=0)
    targets = batch["labels"] != IGNORE_INDEX
    allowed = torch.zeros(len(bert_tokenizer), dtype=torch.bool)
    allowed[torch.from_numpy(collator.vocab.replaceable)] = True
    logits = torch.randn(int(targets.sum()), len(bert_tokenizer), generator=torch.Generator().manual_seed(0))
    logits[:, bert_tokenizer.mask_token_id] = 50.0  # a generator that loves [MASK] still cannot sample it
    samples = sample_replacements(logits, batch["replacement_noise"][targets], allowed)
    inputs, _ = detector_inputs(batch["input_ids"], batch["labels"], samples, batch["attention_mask"])
    protected = torch.from_numpy(collator.vocab.protected)
    assert not protected[inputs[targets]].any() and not (inputs == bert_tokenizer.mask_token_id).any()
