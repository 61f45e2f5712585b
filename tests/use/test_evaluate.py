"""Pseudo-perplexity: the batched computation equals a naive one-token-at-a-time loop."""

import math

import pytest
import torch
from transformers import BertConfig, BertForMaskedLM, RobertaConfig, RobertaForMaskedLM

from tokenmask.use.evaluate import evaluating, pseudo_perplexity


def spread_out(model):
    """Wide random weights: log-probs differ by whole nats between tokens, so a token scored at
    the wrong position, or seen through padding, changes the sum far beyond the tolerance."""
    torch.manual_seed(1)
    for parameter in model.parameters():
        if parameter.ndim == 2:
            torch.nn.init.normal_(parameter, std=0.5)
    return model


def tiny_model(tokenizer):
    size = dict(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
    if tokenizer.cls_token == "<s>":
        pad = tokenizer.pad_token_id
        config = RobertaConfig(**size, pad_token_id=pad, max_position_embeddings=pad + 66, type_vocab_size=1)
        return spread_out(RobertaForMaskedLM(config))
    return spread_out(BertForMaskedLM(BertConfig(**size, pad_token_id=tokenizer.pad_token_id)))


def naive_log_probs(model, blocks, tokenizer) -> list[float]:
    """Mask one token, run the full model on its block alone, read the log-prob; repeat."""
    special = set(tokenizer.all_special_ids)
    found = []
    model.eval()
    with torch.no_grad():
        for block in blocks:
            ids = torch.tensor(block["input_ids"])
            for i, token in enumerate(block["input_ids"]):
                if token in special:
                    continue
                masked = ids.clone()
                masked[i] = tokenizer.mask_token_id
                logits = model(input_ids=masked[None], attention_mask=torch.ones(1, len(ids), dtype=torch.long)).logits
                found.append(float(torch.log_softmax(logits[0, i].double(), dim=-1)[token]))
    return found


def uneven_blocks(tokenizer, lines):
    # lengths 14, 25, 9…: padding inside every batch of copies
    return [{"input_ids": tokenizer(line, truncation=True, max_length=40)["input_ids"]} for line in lines[10:14]]


@pytest.mark.parametrize("name", ["bert-base-uncased", "roberta-gpt2"])
def test_batched_equals_naive_loop(name, tokenizers, lines):
    tokenizer = tokenizers[name]
    blocks = uneven_blocks(tokenizer, lines)
    model = tiny_model(tokenizer).train()  # dropout on: the function must switch it off
    result = pseudo_perplexity(model, blocks, tokenizer, batch_size=7)
    assert model.training  # and restore the mode
    log_probs = naive_log_probs(model, blocks, tokenizer)
    pll, count = sum(log_probs), len(log_probs)
    assert result.scored_tokens == count == sum(len(b["input_ids"]) - 2 for b in blocks)  # all but <s>/[CLS], </s>/[SEP]
    assert result.pseudo_log_likelihood == pytest.approx(pll, rel=1e-5)
    assert result.pseudo_perplexity == pytest.approx(math.exp(-pll / count), rel=1e-5)


def test_cap_scores_the_first_tokens_and_batch_size_does_not_matter(bert_tokenizer, lines):
    blocks = uneven_blocks(bert_tokenizer, lines)
    model = tiny_model(bert_tokenizer)
    log_probs = naive_log_probs(model, blocks, bert_tokenizer)
    for batch_size in (1, 1000):
        whole = pseudo_perplexity(model, blocks, bert_tokenizer, batch_size=batch_size)
        assert whole.pseudo_log_likelihood == pytest.approx(sum(log_probs), rel=1e-5)
    first = len(blocks[0]["input_ids"]) - 2
    capped = pseudo_perplexity(model, blocks, bert_tokenizer, max_tokens=first + 3, batch_size=4)
    assert capped.scored_tokens == first + 3  # all of block 1, the first 3 of block 2 (whole block as context)
    assert capped.pseudo_log_likelihood == pytest.approx(sum(log_probs[: first + 3]), rel=1e-5)


def test_nothing_to_score_is_an_error(bert_tokenizer):
    model = tiny_model(bert_tokenizer)
    with pytest.raises(ValueError, match="no scorable token"):
        pseudo_perplexity(model, [{"input_ids": [bert_tokenizer.cls_token_id, bert_tokenizer.sep_token_id]}], bert_tokenizer)
    with pytest.raises(ValueError, match="no blocks"):
        pseudo_perplexity(model, [], bert_tokenizer)
    with pytest.raises(ValueError, match="must be >= 1"):
        pseudo_perplexity(model, [{"input_ids": [5, 6]}], bert_tokenizer, max_tokens=0)


def test_evaluating_restores_the_models_mode_even_after_an_error():
    model = torch.nn.Dropout(0.5)
    with evaluating(model):
        assert not model.training
    assert model.training
    model.eval()
    with pytest.raises(RuntimeError), evaluating(model.train()):
        raise RuntimeError("a failed evaluation")
    assert model.training
