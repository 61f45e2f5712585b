"""Corpora read through ``datasets`` streaming: each source kind on local shards, and the split by rank."""

from __future__ import annotations

import json
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tokenmask.text.config import ReadingConfig
from tokenmask.text.corpus import read_documents
from tokenmask.text.streaming import DocumentStream, HubName


@pytest.mark.parametrize(
    "source, expected",
    [
        ("hf:wikitext", HubName("wikitext", None, "train")),
        ("hf:wikimedia/wikipedia:20231101.en", HubName("wikimedia/wikipedia", "20231101.en", "train")),
        ("hf:allenai/c4:en:validation", HubName("allenai/c4", "en", "validation")),
    ],
)
def test_hub_names_give_name_config_and_split(source, expected):
    assert HubName.parse(source) == expected


@pytest.mark.parametrize("source", ["hf:", "hf:a:b:c:d", "hf:a::train"])
def test_bad_hub_names_are_refused_with_the_form(source):
    with pytest.raises(ValueError, match=r"hf:NAME\[:CONFIG\]\[:SPLIT\]"):
        DocumentStream((source,))


def test_a_hub_dataset_is_read_alone(tmp_path):
    (tmp_path / "a.txt").write_text("one\n", encoding="utf-8")
    with pytest.raises(ValueError, match="read alone"):
        DocumentStream(("hf:wikitext", str(tmp_path / "a.txt")))


@pytest.fixture(scope="module")
def texts(lines):
    return [f"{number}: {line}" for number, line in enumerate(lines[:600])]  # numbered: every document differs


@pytest.fixture(scope="module")
def shards(tmp_path_factory, texts):
    """The same 600 documents as 6 Parquet shards (a Hub-layout folder), 6 JSON Lines shards,
    a ``save_to_disk`` folder and text files of one document per line."""
    root = tmp_path_factory.mktemp("shards")
    parts = [texts[i : i + 100] for i in range(0, 600, 100)]
    (root / "parquet" / "data").mkdir(parents=True)
    (root / "jsonl").mkdir()
    (root / "txt").mkdir()
    for number, part in enumerate(parts):
        pq.write_table(pa.table({"body": part}), root / "parquet" / "data" / f"train-{number:05d}-of-00006.parquet")
        (root / "jsonl" / f"part-{number}.jsonl").write_text("".join(json.dumps({"body": t}) + "\n" for t in part))
        (root / "txt" / f"part-{number}.txt").write_text("\n".join(part) + "\n", encoding="utf-8")
    from datasets import Dataset

    Dataset.from_dict({"body": texts}).save_to_disk(str(root / "saved"))
    return root


def kinds(shards):
    body = ReadingConfig(text_field="body")
    return {
        "hub-layout folder (hf:PATH)": DocumentStream((f"hf:{shards / 'parquet'}",), body),
        "parquet shards": DocumentStream((str(shards / "parquet" / "data"),), body),
        "jsonl shards": DocumentStream((str(shards / "jsonl"),), body),
        "save_to_disk folder": DocumentStream((str(shards / "saved"),), body),
        "text files": DocumentStream((str(shards / "txt"),), ReadingConfig(document_boundary="line")),
    }


@pytest.mark.usefixtures("datasets_quiet")
def test_each_source_kind_streams_every_document_in_order(shards, texts):
    for kind, stream in kinds(shards).items():
        assert list(stream.documents()) == texts, kind
        assert list(stream.documents(skip=250)) == texts[250:], kind


@pytest.mark.usefixtures("datasets_quiet")
@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_ranks_together_read_every_document_once(shards, texts, world):
    # 6 shards: whole shards per rank for 1, 2 and 3 processes, every world-th document for 4
    for kind, stream in kinds(shards).items():
        read = Counter()
        for rank in range(world):
            mine = list(DocumentStream(stream.corpus, stream.reading, rank=rank, world=world).documents())
            read.update(mine)
            assert len(mine) in (600 // world, 600 // world + 1), (kind, rank)
        assert read == Counter(texts), (kind, world)


def test_the_local_reader_matches_read_documents(tmp_path, lines):
    (tmp_path / "a.md").write_text("\n\n".join(lines[:40:4]), encoding="utf-8")
    (tmp_path / "b.txt").write_text("\n".join(lines[40:60]), encoding="utf-8")
    reading = ReadingConfig()  # paragraphs
    assert list(DocumentStream((str(tmp_path),), reading).documents()) == list(read_documents([tmp_path], **reading.keywords()))


@pytest.mark.usefixtures("datasets_quiet")
def test_a_missing_text_field_names_the_fields_there_are(shards):
    stream = DocumentStream((f"hf:{shards / 'parquet'}",), ReadingConfig(text_field="text"))
    with pytest.raises(ValueError, match=r"no 'text' field to read; there are 'body' \(--text-field\)"):
        next(stream.documents())


def test_missing_local_paths_are_refused_at_once(tmp_path):
    with pytest.raises(FileNotFoundError):
        DocumentStream((str(tmp_path / "nothing"),))
