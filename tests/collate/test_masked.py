"""The one masking path: padding, word ids, protected and given spans, then mask_tokens."""

import numpy as np
import pytest
import torch

from tokenmask.blocks.encode import encode_texts
from tokenmask.collate.masked import mask_examples, spans_to_mask
from tokenmask.collate.pad import pad_flags
from tokenmask.masking import IGNORE_INDEX, MaskingConfig, SelectionConfig, UnitConfig
from tokenmask.text.token_tables import cached_tables, word_ids_from_decoder

WHOLE_WORDS = MaskingConfig(units=UnitConfig(strategy="whole_word"), selection=SelectionConfig(mlm_probability=0.5))


def test_spans_to_mask_hand_worked():
    # row 0: [1, 3) and [4, 5); row 1: no span (-1 padding)
    spans = np.array([[[1, 3], [4, 5]], [[-1, -1], [-1, -1]]])
    assert spans_to_mask(spans, 6).tolist() == [[0, 1, 1, 0, 1, 0], [0, 0, 0, 0, 0, 0]]


@pytest.mark.parametrize(
    "rows",
    [
        [[0, 1, 1], [1], []],  # lists: read as bytes
        [[False, True, True], [True], []],  # bools are ints
        [np.array([0, 1, 1]), torch.tensor([1]), []],  # arrays and tensors: the general path
        [[0, 300, 1], [1], []],  # beyond a byte: the general path, non-zero is True
    ],
)
def test_pad_flags_hand_worked(rows):
    # lengths 3, 1, 0 padded to 4 with False
    out = pad_flags(rows, np.array([3, 1, 0]), 4)
    assert out.dtype == bool
    assert out.tolist() == [[False, True, True, False], [True, False, False, False], [False] * 4]


def test_word_ids_come_back_as_masking_used_them(bert_tokenizer, lines):
    features = encode_texts(lines[:8], bert_tokenizer)
    bare = [{k: v for k, v in f.items() if k != "word_ids"} for f in features]
    settings = dict(vocab=cached_tables(bert_tokenizer), seed=2, epoch=0)
    given_batch, _ = mask_examples(features, bert_tokenizer, WHOLE_WORDS, **settings)
    assert np.array_equal(given_batch.word_ids[0, : len(features[0]["word_ids"])], features[0]["word_ids"])
    # without word ids in the examples, the decoder's are used, and returned
    decoded_batch, decoded = mask_examples(bare, bert_tokenizer, WHOLE_WORDS, **settings)
    assert np.array_equal(
        decoded_batch.word_ids, word_ids_from_decoder(bert_tokenizer, decoded_batch.input_ids, decoded_batch.attention_mask)
    )
    with_those = [{**f, "word_ids": row[: len(f["input_ids"])]} for f, row in zip(bare, decoded_batch.word_ids)]
    assert torch.equal(mask_examples(with_those, bert_tokenizer, WHOLE_WORDS, **settings)[1].labels, decoded.labels)
    token_batch, _ = mask_examples(bare, bert_tokenizer, MaskingConfig(), **settings)
    assert token_batch.word_ids is None  # the token strategy needs none


def test_the_epoch_is_an_argument(bert_tokenizer, lines):
    features = encode_texts(lines[:16], bert_tokenizer)
    settings = dict(vocab=cached_tables(bert_tokenizer), seed=2)
    first = mask_examples(features, bert_tokenizer, WHOLE_WORDS, epoch=0, **settings)[1].labels
    assert torch.equal(first, mask_examples(features, bert_tokenizer, WHOLE_WORDS, epoch=0, **settings)[1].labels)
    assert not torch.equal(first, mask_examples(features, bert_tokenizer, WHOLE_WORDS, epoch=1, **settings)[1].labels)


def test_protected_spans_only_when_asked(bert_tokenizer):
    # every eligible token is a target at rate 1, except inside the protected span [1, 3)
    features = [{"input_ids": [101, 2000, 2022, 2030, 2025, 102], "protected_spans": [[1, 3]]}]
    everything = MaskingConfig(selection=SelectionConfig(mlm_probability=1.0))
    settings = dict(vocab=cached_tables(bert_tokenizer), seed=0, epoch=0)
    _, protected = mask_examples(features, bert_tokenizer, everything, protect_spans=True, **settings)
    assert (protected.labels[0] != IGNORE_INDEX).tolist() == [False, False, False, True, True, False]
    _, unprotected = mask_examples(features, bert_tokenizer, everything, **settings)
    assert (unprotected.labels[0] != IGNORE_INDEX).tolist() == [False, True, True, True, True, False]


def test_given_spans_are_required_by_the_given_strategy(bert_tokenizer):
    given = MaskingConfig(units=UnitConfig(strategy="given"))
    with pytest.raises(ValueError, match="given_spans"):
        mask_examples(
            [{"input_ids": [101, 2000, 102]}], bert_tokenizer, given, vocab=cached_tables(bert_tokenizer), seed=0, epoch=0
        )
