"""Parallel encoding: the blocks are the same, bit for bit, whatever the number of processes."""

import json
from pathlib import Path

import pytest

from tokenmask.blocks import shard
from tokenmask.blocks.build import build_blocks, is_validation
from tokenmask.blocks.workers import default_num_proc
from tokenmask.text.phrases import Phrases


def tables(blocks):
    return blocks.train.table, blocks.validation.table


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of 4,000 characters: 2,000 lines of the plays make about 18 of them."""
    monkeypatch.setattr(shard, "CHUNK_CHARACTERS", 4000)


def test_blocks_are_the_same_whatever_the_number_of_processes(bert_tokenizer, lines, tmp_path, small_chunks):
    texts = lines[:2000] + ["", "  "]
    built = {
        n: build_blocks(texts, bert_tokenizer, block_length=32, validation_share=0.1, cache_dir=tmp_path / str(n), num_proc=n)
        for n in (1, 2, 3)
    }
    one = built[1]
    shards = json.loads((Path(one.cache) / "meta.json").read_text())["shards"]
    assert len(shards) > 10  # many chunks, so 2 and 3 processes really share them out
    for n in (2, 3):
        assert not built[n].from_cache and Path(built[n].cache).name == Path(one.cache).name  # the key leaves N out
        for mine, theirs in zip(tables(built[n]), tables(one)):
            assert mine.equals(theirs)  # every column of every block, ids included
        assert built[n].describe().split(";")[0] == one.describe().split(";")[0]
    ids = [b["id"] for b in one.train] + [b["id"] for b in one.validation]
    assert ids == list(range(len(ids)))  # one numbering over the shards, validation after training
    frame = (bert_tokenizer.cls_token_id, bert_tokenizer.sep_token_id)
    kept = [t for b in one.train for t in b["input_ids"] if t not in frame]
    train_texts = [t for t in lines[:2000] if not is_validation(t, 0.1)]
    assert kept == [t for text in train_texts for t in bert_tokenizer(text, add_special_tokens=False)["input_ids"]]
    # each chunk ends its sides' last blocks early: at most one short block per chunk and side
    short = sum(len(b["input_ids"]) < 32 for b in [*one.train, *one.validation])
    assert 0 < short <= 2 * len(shards)
    assert (one.documents_read, one.empty_documents) == (2002, 2)


def test_phrases_are_found_in_the_worker_processes(bert_tokenizer, lines, small_chunks):
    phrases = Phrases(terms=(("lord",),), ngrams=(("i", "will"),))
    settings = dict(block_length=32, validation_share=0.1, use_cache=False, phrases=phrases)
    alone = build_blocks(lines[:1000], bert_tokenizer, num_proc=1, **settings)
    pooled = build_blocks(lines[:1000], bert_tokenizer, num_proc=2, **settings)
    for mine, theirs in zip(tables(pooled), tables(alone)):
        assert mine.equals(theirs)
    assert sum(sum(b["term_mask"]) for b in pooled.train) > 0  # the term was found


def test_default_and_bad_numbers_of_processes(bert_tokenizer, lines):
    assert default_num_proc() >= 1
    with pytest.raises(ValueError, match="num_proc must be at least 1; got 0"):
        build_blocks(lines[:5], bert_tokenizer, block_length=32, validation_share=0.1, num_proc=0)
