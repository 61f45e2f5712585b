"""Texts to collator examples: the keys EncodedExample declares, word ids only from a fast tokenizer."""

from tokenmask.blocks.encode import EncodedExample, encode_lazily, encode_texts
from tokenmask.text.phrases import Phrases


class Slow:
    """A tokenizer that says it is not fast (so has no word_ids()), encoding as ``tokenizer`` does."""

    is_fast = False

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def __call__(self, texts, **kwargs):
        return self.tokenizer(texts, **kwargs)


def test_examples_hold_the_keys_encoded_example_declares(bert_tokenizer):
    # [CLS] to be [SEP]: word ids -1 0 1 -1, ids from first_id
    (example,) = encode_texts(["to be"], bert_tokenizer, first_id=4)
    assert example == {"input_ids": [101, 2000, 2022, 102], "id": 4, "word_ids": [-1, 0, 1, -1]}
    assert set(example) == EncodedExample.__required_keys__ | {"word_ids"}
    # with phrases: the n-gram "to be" is one merged word; the frame tokens are -1 / 0
    (phrased,) = encode_texts(["to be"], bert_tokenizer, first_id=4, phrases=Phrases(ngrams=(("to", "be"),)))
    assert phrased == {**example, "merged_word_ids": [-1, 0, 0, -1], "term_mask": [0, 0, 0, 0]}
    # a term wins over an n-gram that crosses it: "be" alone, marked as a term
    (termed,) = encode_texts(["to be"], bert_tokenizer, first_id=4, phrases=Phrases(terms=(("be",),), ngrams=(("to", "be"),)))
    assert termed == {**example, "merged_word_ids": [-1, 0, 1, -1], "term_mask": [0, 0, 1, 0]}
    assert set(phrased) == EncodedExample.__required_keys__ | EncodedExample.__optional_keys__
    (plain,) = encode_texts(["to be"], Slow(bert_tokenizer))
    assert plain == {"input_ids": [101, 2000, 2022, 102], "id": 0}  # no word ids without a fast tokenizer
    assert set(plain) == EncodedExample.__required_keys__


def test_lazy_encoding_counts_ids_across_batches(bert_tokenizer):
    texts = [f"line {i}" for i in range(7)]
    assert list(encode_lazily(iter(texts), bert_tokenizer, batch_size=3)) == encode_texts(texts, bert_tokenizer)
