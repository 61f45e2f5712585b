"""Corpus reading and block packing."""

import json

import pytest

from tokenmask.data.blocks import pack_texts
from tokenmask.data.corpus import expand_paths, read_texts


def test_read_lines_paragraphs_and_jsonl(tmp_path):
    (tmp_path / "a.txt").write_text("first line\n\nsecond line\nthird\n", encoding="utf-8")
    (tmp_path / "b.jsonl").write_text(json.dumps({"text": "from json"}) + "\n\n" + json.dumps({"text": " "}) + "\n", encoding="utf-8")
    assert list(read_texts([tmp_path / "a.txt"])) == ["first line", "second line", "third"]
    assert list(read_texts([tmp_path / "a.txt"], unit="paragraph")) == ["first line", "second line third"]
    assert list(read_texts([tmp_path])) == ["first line", "second line", "third", "from json"]
    assert list(read_texts([str(tmp_path / "*.jsonl")])) == ["from json"]


def test_bad_corpus_inputs(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        expand_paths([tmp_path / "missing.txt"])
    (tmp_path / "x.bin").write_bytes(b"\x00\x01")
    with pytest.raises(ValueError, match="unsupported file type"):
        expand_paths([tmp_path / "x.bin"])
    (tmp_path / "bad.jsonl").write_text('{"text": 1}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="bad.jsonl:1"):
        list(read_texts([tmp_path / "bad.jsonl"]))
    (tmp_path / "broken.jsonl").write_text("{not json\n", encoding="utf-8")
    with pytest.raises(ValueError, match="not valid JSON"):
        list(read_texts([tmp_path / "broken.jsonl"]))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="no .txt"):
        expand_paths([empty])


def test_non_utf8_bytes_are_replaced(tmp_path):
    (tmp_path / "latin.txt").write_bytes("caf\xe9 au lait\n".encode("latin-1"))
    assert list(read_texts([tmp_path / "latin.txt"])) == ["caf\ufffd au lait"]


def test_pack_texts_fills_blocks_and_keeps_every_token(bert_tokenizer, lines):
    texts = lines[:300]
    blocks = list(pack_texts(texts, bert_tokenizer, block_length=64))
    assert all(len(b["input_ids"]) == 64 for b in blocks[:-1]) and len(blocks[-1]["input_ids"]) <= 64
    assert [b["id"] for b in blocks] == list(range(len(blocks)))
    content = [t for b in blocks for t in b["input_ids"] if t not in (bert_tokenizer.cls_token_id, bert_tokenizer.sep_token_id)]
    expected = [t for text in texts for t in bert_tokenizer(text, add_special_tokens=False)["input_ids"]]
    assert content == expected
    for block in blocks:
        assert block["input_ids"][0] == bert_tokenizer.cls_token_id
        words = block["word_ids"]
        assert len(words) == len(block["input_ids"])
        real = [w for w in words if w >= 0]
        assert real == sorted(real)  # documents never share a word id


def test_pack_texts_rejects_tiny_blocks(bert_tokenizer):
    with pytest.raises(ValueError, match="block_length"):
        list(pack_texts(["hello"], bert_tokenizer, block_length=2))
