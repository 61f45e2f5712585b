"""Finding phrases over the tokenizer's words: longest and leftmost, terms first, any case, any tokenizer."""

from __future__ import annotations

import pytest

from tokenmask.text.phrases import Phrases, document_words, read_terms, text_words

FAMILIES = ["bert-base-uncased", "roberta-gpt2", "trained-wordpiece", "trained-bpe", "trained-unigram"]


def test_longest_then_leftmost():
    phrases = Phrases(ngrams=(("new", "york"), ("new", "york", "city"), ("york", "city", "hall"), ("a", "b")))
    # at "new": the 3-gram wins over the 2-gram; "york city hall" starts inside it and is not found
    assert phrases.find(["in", "new", "york", "city", "hall"]) == [(1, 4, False)]
    # overlapping "a b" twice in "a b b"? no: "a b a b" gives two, "a a b" the second
    assert phrases.find(["a", "b", "a", "b"]) == [(0, 2, False), (2, 4, False)]
    assert phrases.find(["a", "a", "b"]) == [(1, 3, False)]
    assert phrases.find([]) == []


def test_terms_first_then_ngrams_between_them():
    phrases = Phrases(terms=(("york",), ("vitamin", "c")), ngrams=(("new", "york"), ("take", "vitamin")))
    # "new york" would cross the term "york"; "take vitamin" would cross "vitamin c"
    assert phrases.find(["new", "york", "take", "vitamin", "c"]) == [(1, 2, True), (3, 5, True)]
    assert phrases.find(["new", "york"]) == [(1, 2, True)]
    assert len(phrases) == 4


def test_columns_merge_phrases_and_mark_terms():
    phrases = Phrases(terms=(("aspirin",),), ngrams=(("new", "york"),))
    # [CLS] take new york aspi ##rin [SEP]: words 0 take, 1 new, 2 york, 3 aspirin
    columns = phrases.columns(["take", "new", "york", "aspirin"], [None, 0, 1, 2, 3, 3, None])
    assert columns.merged_word_ids == [-1, 0, 1, 1, 3, 3, -1]
    assert columns.term_mask == [0, 0, 0, 0, 1, 1, 0]


def test_document_words_from_offsets():
    assert document_words("New York", [(0, 3), (4, 8)], [0, 1]) == ["new", "york"]
    assert document_words("Asp. x", [(0, 2), (2, 4), (5, 6)], [0, 0, 1]) == ["asp", "x"]
    assert document_words("lord, ...", [(0, 5), (6, 9)], [0, 1]) == ["lord", "..."]  # a word of punctuation stays


@pytest.mark.parametrize("family", FAMILIES)
def test_terms_found_in_any_case_on_word_boundaries(tokenizers, family, tmp_path):
    tokenizer = tokenizers[family]
    path = tmp_path / "terms.txt"
    path.write_text("Falstaff\n\nmy Lord\n", encoding="utf-8")
    terms = read_terms(path, tokenizer)
    assert terms == (("falstaff",), ("my", "lord"))
    phrases = Phrases(terms=terms)
    text = "FALSTAFF spoke to MY LORD, and my lordship laughed; Falstaffs no more."
    (words,) = text_words([text], tokenizer)
    found = [tuple(words[s:e]) for s, e, _ in phrases.find(words)]
    # "my lordship" and "falstaffs" are other words: not found
    assert found == [("falstaff",), ("my", "lord")]


def test_bad_terms_files(bert_tokenizer, tmp_path):
    with pytest.raises(ValueError, match="cannot read the terms file"):
        read_terms(tmp_path / "missing.txt", bert_tokenizer)
    (tmp_path / "blank.txt").write_text("\n  \n", encoding="utf-8")
    with pytest.raises(ValueError, match="holds no term"):
        read_terms(tmp_path / "blank.txt", bert_tokenizer)
