"""Block packing: exact small cases, every token kept, per-block word ids."""

import pytest

from tokenmask.blocks.pack import Block, BlockPacker, batched, pack_texts


def test_packer_exact_case():
    """start=1, separator=2, block_length=5: docs [7 8] and [9 6] (one word in two pieces).

    [1 7 8 2 9] fills block 0; the rest of doc 2 opens block 1 as [1 6 2]. Word ids per block
    from 0: doc 1 is words 0, 1; doc 2's word is 2 in block 0, and 0 again in block 1.
    """
    packer = BlockPacker(block_length=5, start=1, separator=2)
    assert packer.add([7, 8], [0, 1]) == []
    assert packer.add([9, 6], [0, 0]) == [{"input_ids": [1, 7, 8, 2, 9], "word_ids": [-1, 0, 1, -1, 2], "id": 0}]
    assert packer.add([], []) == []  # a document without tokens adds nothing, and is counted
    assert packer.finish() == [{"input_ids": [1, 6, 2], "word_ids": [-1, 0, -1], "id": 1}]
    assert packer.finish() == []
    counts = packer.counts
    assert (counts.documents, counts.tokenless_documents, counts.text_tokens) == (2, 1, 4)
    assert (counts.blocks, counts.block_tokens, counts.frame_tokens) == (2, 8, 4)  # 8 = 4 text + 2 [1] + 2 [2]


def test_packer_without_frame_tokens():
    packer = BlockPacker(block_length=2, start=None, separator=None)
    assert packer.add([5, 6, 7], [0, 1, 1]) == [{"input_ids": [5, 6], "word_ids": [0, 1], "id": 0}]
    assert packer.finish() == [{"input_ids": [7], "word_ids": [0], "id": 1}]


def test_pack_texts_fills_blocks_and_keeps_every_token(bert_tokenizer, lines):
    texts = lines[:300]
    blocks = list(pack_texts(texts, bert_tokenizer, block_length=64, batch_size=37))
    assert all(len(b["input_ids"]) == 64 for b in blocks[:-1]) and len(blocks[-1]["input_ids"]) <= 64
    assert [b["id"] for b in blocks] == list(range(len(blocks)))
    frame = (bert_tokenizer.cls_token_id, bert_tokenizer.sep_token_id)
    content = [t for b in blocks for t in b["input_ids"] if t not in frame]
    expected = [t for text in texts for t in bert_tokenizer(text, add_special_tokens=False)["input_ids"]]
    assert content == expected
    for block in blocks:
        assert block["input_ids"][0] == bert_tokenizer.cls_token_id
        words = block["word_ids"]
        assert len(words) == len(block["input_ids"])
        assert all((w == -1) == (t in frame) for t, w in zip(block["input_ids"], words))
        real = [w for w in words if w >= 0]
        assert real[:1] in ([], [0]) and real == sorted(real)  # per block from 0; documents never share a word id


def test_pack_texts_rejects_tiny_blocks(bert_tokenizer):
    with pytest.raises(ValueError, match="block_length"):
        list(pack_texts(["hello"], bert_tokenizer, block_length=2))


def test_batched():
    assert list(batched(range(5), 2)) == [[0, 1], [2, 3], [4]]
    assert list(batched([], 3)) == []


def test_blocks_hold_exactly_the_keys_block_declares(bert_tokenizer, lines):
    blocks = list(pack_texts(lines[:50], bert_tokenizer, block_length=32))
    assert all(set(block) == Block.__required_keys__ == {"input_ids", "word_ids", "id"} for block in blocks)
    assert all(len(block["word_ids"]) == len(block["input_ids"]) for block in blocks)
