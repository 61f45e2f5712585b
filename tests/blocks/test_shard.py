"""Chunks and their shard files: where the stream is cut, what one chunk writes."""

from tokenmask.blocks import shard
from tokenmask.blocks.shard import ChunkJob, document_chunks, is_validation, pack_chunk, shard_path
from tokenmask.blocks.store import BlockSequence


def test_chunks_close_on_the_document_that_reaches_the_size(monkeypatch):
    monkeypatch.setattr(shard, "CHUNK_CHARACTERS", 10)
    # 6 + 4 = 10 closes the first chunk; 2 + 1 never reaches 10: the last chunk is shorter
    assert list(document_chunks(iter(["abcdef", "ghij", "kl", "m"]))) == [["abcdef", "ghij"], ["kl", "m"]]
    assert list(document_chunks(["a" * 25, "b"])) == [["a" * 25], ["b"]]  # a long document is a chunk of its own
    assert list(document_chunks([])) == []


def test_a_chunk_writes_its_sides_with_ids_from_zero(bert_tokenizer, lines, tmp_path):
    job = ChunkJob(tmp_path, bert_tokenizer, None, block_length=16, validation_share=0.3, batch_size=7)
    texts = lines[:40] + [" "]
    counts = pack_chunk(job, 4, texts)
    assert (counts.index, counts.documents_read, counts.empty_documents) == (4, 41, 1)
    assert counts.characters == sum(map(len, texts))
    validation = sum(is_validation(t, 0.3) for t in lines[:40])
    assert counts.sides["validation"].documents == validation and counts.sides["train"].documents == 40 - validation
    for side in ("train", "validation"):
        blocks = BlockSequence.open(shard_path(tmp_path, side, 4))
        assert [b["id"] for b in blocks] == list(range(counts.sides[side].blocks))
    assert counts.bytes_written == sum(p.stat().st_size for p in tmp_path.iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train-00004.arrow", "validation-00004.arrow"]


def test_a_side_without_blocks_leaves_no_file(bert_tokenizer, lines, tmp_path):
    job = ChunkJob(tmp_path, bert_tokenizer, None, block_length=16, validation_share=0.0, batch_size=7)
    counts = pack_chunk(job, 0, lines[:5])
    assert counts.sides["validation"].blocks == 0 and counts.sides["train"].blocks > 0
    assert [p.name for p in tmp_path.iterdir()] == ["train-00000.arrow"]


def test_progress_is_reported_per_batch(bert_tokenizer, lines, tmp_path):
    job = ChunkJob(tmp_path, bert_tokenizer, None, block_length=16, validation_share=0.1, batch_size=10)
    seen = []
    counts = pack_chunk(job, 0, lines[:25], progress=lambda documents, tokens: seen.append((documents, tokens)))
    assert [d for d, _ in seen] == [10, 20, 25] and seen[-1][1] == counts.text_tokens
