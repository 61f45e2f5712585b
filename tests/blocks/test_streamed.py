"""Chunks of a document stream: where they close, where a resumed stream picks up, their blocks' ids."""

from __future__ import annotations

import json
from itertools import islice

import pytest

from tokenmask.blocks.build import is_validation
from tokenmask.blocks.streamed import CHUNK_ID_STRIDE, HELD_OUT_IDS, chunk_blocks, held_out_blocks, stream_chunks
from tokenmask.text.config import ReadingConfig
from tokenmask.text.streaming import DocumentStream


@pytest.fixture
def stream(tmp_path):
    # JSON Lines: documents of 10 characters ("doc 000 xx"), a blank one after every fourth
    records = []
    for number in range(12):
        records.append(f"doc {number:03d} xx")
        if number % 4 == 3:
            records.append("   ")
    (tmp_path / "a.jsonl").write_text("".join(json.dumps({"text": r}) + "\n" for r in records), encoding="utf-8")
    return DocumentStream((str(tmp_path / "a.jsonl"),))


def test_a_chunk_closes_at_the_document_that_reaches_its_size(stream):
    # 25 characters: three 10-character documents reach 30 >= 25. The blank documents (at 4, 9 and
    # 14) count as read: chunk 1 holds documents 3-6, chunk 2 7-10, chunk 3 11-13; the epoch ends
    # with a blank one, which makes no chunk of its own.
    chunks = list(islice(stream_chunks(stream, characters=25, validation_share=None), 5))
    assert [(c.epoch, c.index, c.first_document) for c in chunks] == [(0, 0, 0), (0, 1, 3), (0, 2, 7), (0, 3, 11), (1, 0, 0)]
    assert [len(c.texts) for c in chunks] == [3, 3, 3, 3, 3]
    assert chunks[1].texts == ["doc 003 xx", "doc 004 xx", "doc 005 xx"]
    assert chunks[3].texts == ["doc 009 xx", "doc 010 xx", "doc 011 xx"]


def test_a_stream_started_at_a_chunk_continues_as_the_whole_one(stream):
    whole = list(islice(stream_chunks(stream, characters=25, validation_share=None), 9))
    resumed = list(islice(stream_chunks(stream, characters=25, validation_share=None, epoch=0, index=2, first_document=7), 7))
    assert resumed == whole[2:]


def test_held_out_documents_are_not_trained_on(stream):
    share = 0.3
    chunks = list(islice(stream_chunks(stream, characters=25, validation_share=share), 4))
    trained = [text for chunk in chunks if chunk.epoch == 0 for text in chunk.texts]
    held = [f"doc {n:03d} xx" for n in range(12) if is_validation(f"doc {n:03d} xx", share)]
    assert held and sorted(trained + held) == [f"doc {n:03d} xx" for n in range(12)]


def test_a_stream_without_training_text_is_refused(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"text": " "}\n{"text": null}\n', encoding="utf-8")
    stream = DocumentStream((str(tmp_path / "a.jsonl"),))
    with pytest.raises(ValueError, match="no text for training: every document read is blank$"):
        next(stream_chunks(stream, characters=25, validation_share=None))


def test_block_ids_are_unique_across_chunks_and_held_out_blocks(bert_tokenizer, lines, tmp_path):
    (tmp_path / "a.txt").write_text("\n".join(lines[:400]), encoding="utf-8")
    stream = DocumentStream((str(tmp_path / "a.txt"),), ReadingConfig(document_boundary="line"))
    chunks = list(islice(stream_chunks(stream, characters=4000, validation_share=0.1), 3))
    blocks = []
    for chunk in chunks:  # as rank 1 of 2 packs them: uid = index * world + rank
        packed = chunk_blocks(chunk, bert_tokenizer, block_length=32, uid=chunk.index * 2 + 1)
        assert [b["id"] for b in packed] == [(chunk.index * 2 + 1) * CHUNK_ID_STRIDE + n for n in range(len(packed))]
        blocks += packed
    held = held_out_blocks(stream, bert_tokenizer, block_length=32, count=5, validation_share=0.1)
    assert len(held) == 5 and all(b["id"] >= HELD_OUT_IDS for b in held)
    ids = [b["id"] for b in blocks + held]
    assert len(set(ids)) == len(ids)
    assert all(len(b["input_ids"]) == 32 for b in held)


def test_no_held_out_text_is_refused_with_advice(stream, bert_tokenizer):
    with pytest.raises(
        ValueError, match="no document held out for validation among the first 15 of the stream: raise --validation-share"
    ):
        held_out_blocks(stream, bert_tokenizer, block_length=32, count=5, validation_share=1e-9)
