"""Blocks on disk: what is written reads back exactly, as the training loop indexes it."""

import numpy as np
import pyarrow as pa
import pytest

from tokenmask.blocks.store import PHRASE_SCHEMA, SCHEMA, BlockSequence, BlockWriter, block_schema, read_blocks, shift_ids

BLOCKS = [
    {"input_ids": [101, 7, 8, 102], "word_ids": [-1, 0, 1, -1], "id": 0},
    {"input_ids": [101, 9, 102], "word_ids": [-1, 0, -1], "id": 1},
    {"input_ids": [101, 5], "word_ids": [-1, 0], "id": 2},
]


@pytest.fixture
def stored(tmp_path):
    path = tmp_path / "blocks.arrow"
    with BlockWriter(path, batch_blocks=2) as writer:  # two record batches
        writer.write(BLOCKS)
    return path


def test_round_trip_and_indexing(stored):
    blocks = BlockSequence.open(stored)
    assert len(blocks) == 3 and bool(blocks)
    assert list(blocks) == BLOCKS
    assert list(read_blocks(stored)) == BLOCKS
    assert [blocks[i] for i in (0, 1, 2, -1)] == BLOCKS + [BLOCKS[-1]]
    first = blocks[0]
    assert type(first["input_ids"]) is list and type(first["input_ids"][0]) is int and type(first["id"]) is int
    first["input_ids"].append(0)  # a copy: the stored block does not change
    assert blocks[0] == BLOCKS[0]
    with pytest.raises(IndexError):
        blocks[3]
    with pytest.raises(IndexError):
        blocks[-4]


def test_slices_and_concatenation(stored):
    blocks = BlockSequence.open(stored)
    assert isinstance(blocks[:2], BlockSequence)
    assert list(blocks[:2]) == BLOCKS[:2]
    assert list(blocks[1:]) == BLOCKS[1:]
    assert list(blocks[::2]) == BLOCKS[::2]
    assert list(blocks[::-1]) == BLOCKS[::-1]
    assert list(blocks[5:]) == [] and not blocks[5:]
    assert list(blocks + blocks[:1]) == BLOCKS + BLOCKS[:1]
    assert blocks.token_count() == 9


def test_ids_shift_in_place_and_files_read_as_one_sequence(tmp_path):
    first, second = tmp_path / "train-00000.arrow", tmp_path / "train-00001.arrow"
    for path in (first, second):
        with BlockWriter(path, batch_blocks=2) as writer:  # two record batches: the shift crosses them
            writer.write(BLOCKS)
    shift_ids(second, 3)
    shift_ids(first, 0)
    assert [b["id"] for b in BlockSequence.open(second)] == [3, 4, 5]
    both = BlockSequence.open(first, second)
    assert [b["id"] for b in both] == [0, 1, 2, 3, 4, 5]
    assert [b["input_ids"] for b in both] == [b["input_ids"] for b in BLOCKS + BLOCKS]
    assert [row["id"] for row in both.__getitems__([5, 0, 3])] == [5, 0, 3]
    assert list(read_blocks(second))[1] == {**BLOCKS[1], "id": 4}  # the tokens are as written


def test_empty_files_and_no_file(tmp_path):
    empty = tmp_path / "empty.arrow"
    BlockWriter(empty).close()
    assert len(BlockSequence.open(empty)) == 0 and BlockSequence.open(empty).token_count() == 0
    assert len(BlockSequence.open()) == 0 and BlockSequence.open().table.schema.equals(SCHEMA)
    assert BlockSequence.open(phrases=True).table.schema.equals(PHRASE_SCHEMA)


def test_rejects_other_tables():
    with pytest.raises(ValueError, match="not a block table"):
        BlockSequence(pa.table({"input_ids": [[1]]}))


def test_datasets_opens_the_files(stored):
    datasets = pytest.importorskip("datasets")
    assert datasets.Dataset.from_file(str(stored)).to_list() == BLOCKS


def test_rows_in_a_batch_are_array_views_equal_to_the_single_rows(tmp_path):
    blocks = [
        {"input_ids": list(range(i, i + 3 + i % 4)), "word_ids": [-1] + list(range(2 + i % 4)), "id": 100 + i} for i in range(50)
    ]
    path = tmp_path / "blocks.arrow"
    with BlockWriter(path, batch_blocks=7) as writer:  # several record batches: rows cross chunks
        writer.write(blocks)
    whole = BlockSequence.open(path)
    for seq in (whole, whole[5:40], whole[::3], whole[:10] + whole[30:]):
        indices = [0, len(seq) - 1, 3, -1, 3, len(seq) // 2]
        got = seq.__getitems__(indices)
        for index, row in zip(indices, got):
            expected = seq[index]
            assert set(row) == set(expected) and row["id"] == expected["id"]
            for key in ("input_ids", "word_ids"):
                assert isinstance(row[key], np.ndarray) and row[key].tolist() == expected[key]
    with pytest.raises(IndexError, match="out of range"):
        whole.__getitems__([50])


def test_narrow_columns_read_back_as_int32(tmp_path):
    # 30,522 ids fit uint16 and 32-token blocks' word ids int16: 4 bytes a token instead of 8
    path = tmp_path / "narrow.arrow"
    with BlockWriter(path, phrases=True, vocab_size=30522, block_length=32) as writer:
        writer.write([{**b, "merged_word_ids": b["word_ids"], "term_mask": [0] * len(b["word_ids"])} for b in BLOCKS])
    blocks = BlockSequence.open(path)
    types = {field.name: str(field.type) for field in blocks.table.schema}
    assert types == {
        "input_ids": "list<item: uint16>", "word_ids": "list<item: int16>", "id": "int64",
        "merged_word_ids": "list<item: int16>", "term_mask": "list<item: int8>",
    }  # fmt: skip
    assert [b["input_ids"] for b in blocks] == [b["input_ids"] for b in BLOCKS]
    assert blocks[0]["word_ids"] == [-1, 0, 1, -1] and type(blocks[0]["input_ids"][0]) is int
    row = blocks.__getitems__([0])[0]
    assert row["input_ids"].dtype == row["word_ids"].dtype == np.int32 and row["word_ids"].tolist() == [-1, 0, 1, -1]
    assert blocks.token_count() == 9


def test_values_that_do_not_fit_are_refused(tmp_path):
    with pytest.raises(OverflowError, match="do not fit uint16"), BlockWriter(tmp_path / "a.arrow", vocab_size=100) as writer:
        writer.write([{"input_ids": [101, 70000], "word_ids": [-1, 0], "id": 0}])  # an id the vocabulary does not have
    assert block_schema(vocab_size=2**16 + 1, block_length=2**15 + 1) == SCHEMA  # too large for the narrow types


def test_an_empty_side_takes_the_other_sides_types(tmp_path):
    path = tmp_path / "narrow.arrow"
    with BlockWriter(path, vocab_size=30522, block_length=32) as writer:
        writer.write(BLOCKS)
    train, validation = BlockSequence.open(path), BlockSequence.open()
    assert not validation.table.schema.equals(train.table.schema)
    assert list(train + validation) == list(validation + train) == BLOCKS
    assert validation.like(train).table.schema.equals(train.table.schema) and train.like(validation) is train
