"""Pre-training blocks: every token accounted for, the hash split, and the on-disk cache."""

import json
import os

import numpy as np
import pytest

from tokenmask.blocks import shard
from tokenmask.blocks.build import build_blocks, corpus_blocks, is_validation
from tokenmask.blocks.store import BlockSequence
from tokenmask.text.corpus import read_texts


@pytest.fixture
def encodes(monkeypatch):
    """Count the tokenizer batches the builds run (0 after a build means: loaded from cache)."""
    calls = []
    real = shard.encode_documents

    def counting(texts, tokenizer):
        calls.append(len(texts))
        return real(texts, tokenizer)

    monkeypatch.setattr(shard, "encode_documents", counting)
    return calls


def content(blocks, tokenizer):
    frame = (tokenizer.cls_token_id, tokenizer.sep_token_id)
    return [t for block in blocks for t in block["input_ids"] if t not in frame]


def encoded(texts, tokenizer):
    return [t for text in texts for t in tokenizer(text, add_special_tokens=False)["input_ids"]]


def test_every_token_is_accounted_for(bert_tokenizer, lines, tmp_path):
    texts = lines[:400] + ["", "   \n", "\u200b"]  # two blank documents, one the tokenizer makes nothing of
    blocks = build_blocks(texts, bert_tokenizer, block_length=64, validation_share=0.2, cache_dir=tmp_path, batch_size=64)
    train_texts = [t for t in lines[:400] if not is_validation(t, 0.2)]
    validation_texts = [t for t in lines[:400] if is_validation(t, 0.2)]
    assert 40 < len(validation_texts) < 120  # 80 expected; binomial sd 8
    assert content(blocks.train, bert_tokenizer) == encoded(train_texts, bert_tokenizer)
    assert content(blocks.validation, bert_tokenizer) == encoded(validation_texts, bert_tokenizer)
    assert (blocks.documents_read, blocks.documents, blocks.empty_documents, blocks.tokenless_documents) == (403, 400, 2, 1)
    assert blocks.text_tokens == len(encoded(lines[:400], bert_tokenizer))
    assert blocks.tokens == blocks.train.token_count() + blocks.validation.token_count()
    assert blocks.kept_tokens == blocks.text_tokens
    assert blocks.frame_tokens == 400 + len(blocks.train) + len(blocks.validation)  # a [SEP] per document, a [CLS] per block
    ids = [b["id"] for b in blocks.train] + [b["id"] for b in blocks.validation]
    assert ids == list(range(len(ids)))  # validation ids follow the training ones
    description = blocks.describe()
    assert (
        f"403 documents read, 2 empty skipped, 1 without any token skipped: {blocks.text_tokens:,} tokens, all kept"
        in description
    )
    assert f"{len(blocks.train)} training and {len(blocks.validation)} validation blocks of 64" in description


def test_element_contract_of_the_training_loop(bert_tokenizer, lines, tmp_path):
    blocks = build_blocks(lines[:200], bert_tokenizer, block_length=32, validation_share=0.1, cache_dir=tmp_path)
    assert isinstance(blocks.train, BlockSequence)
    block = blocks.train[3]
    assert set(block) == {"input_ids", "word_ids", "id"} and len(block["input_ids"]) == len(block["word_ids"]) == 32
    assert all(type(v) is int for v in block["input_ids"] + block["word_ids"]) and type(block["id"]) is int
    # stored narrow (30,522 ids: uint16; 32-token blocks: int16 word ids), read as int32
    assert [str(f.type) for f in blocks.train.table.schema][:2] == ["list<item: uint16>", "list<item: int16>"]
    row = blocks.train.__getitems__([3])[0]
    assert row["input_ids"].dtype == np.int32 and row["input_ids"].tolist() == block["input_ids"]
    evaluation = (blocks.validation or blocks.train)[:5]
    assert list(evaluation) == [blocks.validation[i] for i in range(5)]
    assert len(blocks.train + blocks.validation) == len(blocks.train) + len(blocks.validation)


def test_second_build_comes_from_the_cache(bert_tokenizer, lines, tmp_path, encodes):
    first = build_blocks(lines[:300], bert_tokenizer, block_length=64, validation_share=0.1, cache_dir=tmp_path)
    assert encodes and not first.from_cache and first.cache.startswith(str(tmp_path))
    encodes.clear()
    second = build_blocks(list(lines[:300]), bert_tokenizer, block_length=64, validation_share=0.1, cache_dir=tmp_path)
    assert encodes == [] and second.from_cache and second.cache == first.cache
    assert "loaded from" in second.describe()
    fresh = build_blocks(lines[:300], bert_tokenizer, block_length=64, validation_share=0.1, use_cache=False)
    assert fresh.cache is None
    for side in ("train", "validation"):
        assert list(getattr(second, side)) == list(getattr(fresh, side))
    assert (second.documents, second.tokens, second.text_tokens) == (fresh.documents, fresh.tokens, fresh.text_tokens)
    assert [p.name for p in (tmp_path / "blocks").iterdir()] == [first.cache.rsplit(os.sep, 1)[-1]]  # nothing half-built


def test_cache_misses_on_other_inputs(bert_tokenizer, roberta_tokenizer, lines, tmp_path, encodes):
    def build(texts=lines[:100], tokenizer=bert_tokenizer, block_length=64, share=0.1):
        encodes.clear()
        blocks = build_blocks(texts, tokenizer, block_length=block_length, validation_share=share, cache_dir=tmp_path)
        return blocks.cache, bool(encodes)

    entry, built = build()
    assert built
    assert build() == (entry, False)
    for changed in (
        build(tokenizer=roberta_tokenizer),
        build(block_length=32),
        build(share=0.2),
        build(texts=lines[:99] + [lines[99] + "!"]),
        build(texts=lines[1:100] + lines[:1]),  # same texts, another order
    ):
        assert changed[0] != entry and changed[1]


def test_corpus_blocks_cache_follows_the_files(bert_tokenizer, tmp_path, encodes):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("the first paragraph\nof the play\n\nthe second one\n", encoding="utf-8")
    (corpus / "b.jsonl").write_text(json.dumps({"text": "a record of words"}) + "\n", encoding="utf-8")
    cache = tmp_path / "cache"

    def build(**options):
        encodes.clear()
        blocks = corpus_blocks([corpus], bert_tokenizer, block_length=16, validation_share=0.0, cache_dir=cache, **options)
        return blocks, bool(encodes)

    blocks, built = build()
    assert built and blocks.documents == 3
    assert content(blocks.train, bert_tokenizer) == encoded(read_texts([corpus], boundary="paragraph"), bert_tokenizer)
    assert build()[0].cache == blocks.cache and not build()[1]
    assert build(boundary="line")[0].documents == 4
    (corpus / "a.txt").write_text("the first paragraph\nof the play\n\nthe second two\n", encoding="utf-8")  # same size
    os.utime(corpus / "a.txt", ns=(1_000_000_000, 1_000_000_000))
    changed, rebuilt = build()
    assert rebuilt and changed.cache != blocks.cache
    assert content(changed.train, bert_tokenizer) == encoded(read_texts([corpus], boundary="paragraph"), bert_tokenizer)


def test_a_failed_build_leaves_nothing_that_looks_whole(bert_tokenizer, lines, tmp_path, monkeypatch):
    (tmp_path / "a.jsonl").write_text(json.dumps({"text": "words"}) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no 'body' column or field; there are: 'text'"):
        corpus_blocks(
            [tmp_path / "a.jsonl"],
            bert_tokenizer,
            block_length=16,
            validation_share=0.0,
            text_field="body",
            cache_dir=tmp_path / "cache",
        )
    real, calls = shard.encode_documents, []

    def crash_on_second_batch(texts, tokenizer):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt  # as a user stopping the build
        return real(texts, tokenizer)

    monkeypatch.setattr(shard, "encode_documents", crash_on_second_batch)
    with pytest.raises(KeyboardInterrupt):
        build_blocks(
            lines[:100], bert_tokenizer, block_length=32, validation_share=0.1, cache_dir=tmp_path / "cache", batch_size=10
        )
    assert list((tmp_path / "cache" / "blocks").iterdir()) == []
    monkeypatch.setattr(shard, "encode_documents", real)
    blocks = build_blocks(lines[:100], bert_tokenizer, block_length=32, validation_share=0.1, cache_dir=tmp_path / "cache")
    assert not blocks.from_cache and len(blocks.train) > 0


def test_default_root_streams_and_bad_settings(bert_tokenizer, lines, tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENMASK_CACHE", str(tmp_path / "env"))
    blocks = build_blocks(lines[:50], bert_tokenizer, block_length=32, validation_share=0.1, progress=True)
    assert blocks.cache.startswith(str(tmp_path / "env" / "blocks"))
    streamed = build_blocks(iter(lines[:50]), bert_tokenizer, block_length=32, validation_share=0.1)
    assert streamed.cache is None and list(streamed.train) == list(blocks.train)  # a stream is read once, not cached
    with pytest.raises(ValueError, match="no text for training"):
        build_blocks(["", " "], bert_tokenizer, block_length=32, validation_share=0.1)
    with pytest.raises(ValueError, match="validation_share must be in"):
        build_blocks(lines[:5], bert_tokenizer, block_length=32, validation_share=1.0)
    with pytest.raises(ValueError, match="block_length must be at least"):
        build_blocks(lines[:5], bert_tokenizer, block_length=1, validation_share=0.1)
    with pytest.raises(ValueError, match="block_length must be at least 3"):
        build_blocks(lines[:5], bert_tokenizer, block_length=2, validation_share=0.1, use_cache=False)
    assert sorted(p.name for p in (tmp_path / "env" / "blocks").iterdir()) == [blocks.cache.rsplit(os.sep, 1)[-1]]


def test_lines_with_bad_bytes_are_counted_in_the_blocks_and_the_cache(bert_tokenizer, tmp_path, encodes):
    corpus = tmp_path / "a.txt"
    corpus.write_bytes(b"the first line\n\ncaf\xe9 au lait\n\nna\xefve and plain\n\nthe last line\n")
    cache = tmp_path / "cache"
    blocks = corpus_blocks([corpus], bert_tokenizer, block_length=16, validation_share=0.0, cache_dir=cache)
    assert (blocks.invalid_utf8, blocks.first_invalid_utf8) == (2, f"{corpus}:3")
    assert f"4 documents read, 0 empty skipped, 2 lines with invalid UTF-8 replaced (first: {corpus}:3):" in blocks.describe()
    encodes.clear()
    again = corpus_blocks([corpus], bert_tokenizer, block_length=16, validation_share=0.0, cache_dir=cache)
    assert again.from_cache and not encodes and again.invalid_utf8 == 2
    with pytest.raises(ValueError, match=f"{corpus}:3: not valid UTF-8"):  # strict is part of the key: no cache hit
        corpus_blocks([corpus], bert_tokenizer, block_length=16, validation_share=0.0, cache_dir=cache, strict=True)


@pytest.mark.parametrize(
    ("texts", "message"),
    [
        ([], "no text for training: no document at all"),
        (["", " \t "], "no text for training: 2 documents read, all empty, blank or without a token"),
    ],
)
def test_no_training_text_says_why(bert_tokenizer, texts, message):
    with pytest.raises(ValueError, match=message):
        build_blocks(texts, bert_tokenizer, block_length=16, validation_share=0.1, use_cache=False)
    lonely = next(f"document {i}" for i in range(100) if is_validation(f"document {i}", 0.3))
    with pytest.raises(ValueError, match="the only document with text went to the validation side"):
        build_blocks([lonely], bert_tokenizer, block_length=16, validation_share=0.3, use_cache=False)
