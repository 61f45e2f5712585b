"""Built-in tokenizers: MiniLM's own equals bert-base-uncased entry for entry."""

from tokenmask.text.tokenizer import BUILTIN_TOKENIZERS, load_tokenizer


def test_minilm_tokenizer_is_bert_base_uncased(bert_tokenizer, lines):
    minilm = load_tokenizer("minilm")
    assert "minilm" in BUILTIN_TOKENIZERS
    assert len(minilm) == 30522 and minilm.get_vocab() == bert_tokenizer.get_vocab()
    assert minilm.all_special_ids == bert_tokenizer.all_special_ids and minilm.mask_token == "[MASK]"
    texts = lines[:200] + ["Héllo Wörld, naïve café: 東京 [MASK]!"]  # accents, CJK, a special token
    assert minilm(texts)["input_ids"] == bert_tokenizer(texts)["input_ids"]
