"""The PMI vocabulary cached next to the blocks, and blocks packed with phrases."""

from __future__ import annotations

import pytest

from tokenmask.blocks.build import build_blocks
from tokenmask.blocks.pack import BlockPacker
from tokenmask.blocks.pmi import corpus_vocabulary, masking_phrases, pmi_vocabulary
from tokenmask.masking import UnitConfig
from tokenmask.text.phrases import PhraseColumns, Phrases, text_words


def test_vocabulary_is_built_once_then_read_from_the_cache(bert_tokenizer, lines, tmp_path):
    reads = []

    def texts():
        reads.append(1)
        return lines

    settings = dict(source={"test": "lines"}, min_count=3, vocab_size=50, cache_dir=tmp_path)
    first = pmi_vocabulary(texts, bert_tokenizer, **settings)
    second = pmi_vocabulary(texts, bert_tokenizer, **settings)
    assert reads == [1] and not first.from_cache and second.from_cache
    assert second.entries == first.entries and second.cache == first.cache
    assert ("peter", "quince") in first.ngrams  # a name of A Midsummer Night's Dream
    other = pmi_vocabulary(texts, bert_tokenizer, **{**settings, "vocab_size": 10})
    assert reads == [1, 1] and len(other.entries) <= 10  # another setting, another entry


def test_a_corpus_too_small_is_refused(bert_tokenizer, tmp_path):
    with pytest.raises(ValueError, match="yields no PMI n-gram"):
        pmi_vocabulary(lambda: ["to be or not to be"], bert_tokenizer, source=None, cache_dir=tmp_path)


def test_corpus_files_and_the_phrases_a_config_needs(bert_tokenizer, lines, tmp_path):
    corpus = tmp_path / "lines.txt"
    corpus.write_text("\n".join(lines[:3000]), encoding="utf-8")
    units = UnitConfig(strategy="pmi", pmi_min_count=3)
    vocabulary = corpus_vocabulary([str(corpus)], bert_tokenizer, units, cache_dir=tmp_path)
    assert vocabulary.min_count == 3 and vocabulary.vocab_size == 100  # 3,000 lines: ~30,000 words -> at least 100
    assert masking_phrases(UnitConfig(strategy="span"), bert_tokenizer, lambda: vocabulary) is None

    def never():
        raise AssertionError("the vocabulary is built only for strategy pmi")

    terms = tmp_path / "terms.txt"
    terms.write_text("Falstaff\n", encoding="utf-8")
    phrases = masking_phrases(UnitConfig(strategy="span", mask_terms=str(terms)), bert_tokenizer, never)
    assert phrases == Phrases(terms=(("falstaff",),))


def test_a_phrase_cut_by_a_block_end_stays_a_word_in_the_next_block():
    # "a b c" one phrase (a term), blocks of 3: [1, a, b] and [1, c, 2]; c's phrase began in the
    # block before (merged id 0 there, below the new block's first word): it is word 0 of its block
    packer = BlockPacker(block_length=3, start=1, separator=2, phrases=True)
    first, second = packer.add([7, 8, 9], [0, 1, 2], PhraseColumns([0, 0, 0], [1, 1, 1]))
    assert first["merged_word_ids"] == [-1, 0, 0] and first["word_ids"] == [-1, 0, 1]
    assert second["merged_word_ids"] == [-1, 0, -1] and second["word_ids"] == [-1, 0, -1]
    assert second["term_mask"] == [0, 1, 0]


def test_packer_carries_phrase_columns_numbered_like_word_ids():
    # start 1, separator 2: a document "a b c" whose words 1..2 are one phrase, word 2 a term
    packer = BlockPacker(block_length=6, start=1, separator=2, phrases=True)
    assert packer.add([7, 8, 9], [0, 1, 2], PhraseColumns([0, 1, 1], [0, 0, 1])) == []
    (block,) = packer.add([5], [0], PhraseColumns([0], [0]))
    assert block == {
        "input_ids": [1, 7, 8, 9, 2, 5], "word_ids": [-1, 0, 1, 2, -1, 3], "id": 0,
        "merged_word_ids": [-1, 0, 1, 1, -1, 3], "term_mask": [0, 0, 0, 1, 0, 0],
    }  # fmt: skip
    with pytest.raises(ValueError, match="phrase columns"):
        packer.add([5], [0])


def test_blocks_with_phrases_are_cached_apart_and_keep_their_columns(bert_tokenizer, lines, tmp_path):
    plain = build_blocks(lines[:2000], bert_tokenizer, block_length=64, validation_share=0.1, cache_dir=tmp_path)
    phrases = Phrases(ngrams=(("i", "will"),))
    phrased = build_blocks(
        lines[:2000], bert_tokenizer, block_length=64, validation_share=0.1, cache_dir=tmp_path, phrases=phrases
    )
    assert phrased.cache != plain.cache and "merged_word_ids" not in plain.train[0]
    again = build_blocks(lines[:2000], bert_tokenizer, block_length=64, validation_share=0.1, cache_dir=tmp_path, phrases=phrases)
    assert again.from_cache
    for side, plain_side in ((again.train, plain.train), (again.validation, plain.validation)):
        blocks = list(side)
        assert [b["input_ids"] for b in blocks] == [b["input_ids"] for b in plain_side]  # the same tokens
        assert all(len(b["term_mask"]) == len(b["merged_word_ids"]) == len(b["input_ids"]) for b in blocks)
    blocks = [*again.train, *again.validation]
    # each "i will" merges one word ("will" takes the id of "i"), unless a block starts at its "will"
    merged = sum(m != w for b in blocks for m, w in zip(b["merged_word_ids"], b["word_ids"]))
    pairs = sum(
        words[i : i + 2] == ["i", "will"] for words in text_words(lines[:2000], bert_tokenizer) for i in range(len(words))
    )
    assert pairs - len(blocks) <= merged <= pairs and merged > 10
    assert all(m >= 0 for b in blocks for m, w in zip(b["merged_word_ids"], b["word_ids"]) if w >= 0)
