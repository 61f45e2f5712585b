"""Corpus reading: every format gives exactly its documents, lazily; bad input is named."""

import json
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tokenmask.text import corpus
from tokenmask.text.byte_checks import ReadStats
from tokenmask.text.corpus import expand_paths, read_documents, read_texts

TEXT = "first line\n\nsecond line\nthird\n"


def write_jsonl(path, records):
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    return path


def test_text_units_line_paragraph_file(tmp_path):
    (tmp_path / "a.txt").write_text(TEXT, encoding="utf-8")
    (tmp_path / "b.md").write_text("# Title\n\nbody *text*\n", encoding="utf-8")
    assert list(read_texts([tmp_path / "a.txt"])) == ["first line", "second line", "third"]
    assert list(read_texts([tmp_path / "a.txt"], boundary="paragraph")) == ["first line", "second line third"]
    assert list(read_texts([tmp_path / "a.txt"], boundary="file")) == ["first line\n\nsecond line\nthird"]
    assert list(read_texts([tmp_path / "b.md"], boundary="paragraph")) == ["# Title", "body *text*"]
    with pytest.raises(ValueError, match="boundary must be one of line, paragraph, file"):
        list(read_texts([tmp_path / "a.txt"], boundary="sentence"))


def test_empty_documents_are_read_and_then_skipped(tmp_path):
    (tmp_path / "empty.txt").write_text(" \n\n", encoding="utf-8")
    write_jsonl(tmp_path / "b.jsonl", [{"text": "x"}, {"text": " "}, {"text": None}, {"text": ""}])
    assert list(read_documents([tmp_path / "empty.txt"], boundary="file")) == [""]
    assert list(read_documents([tmp_path / "empty.txt"], boundary="line")) == []  # blank lines separate, they are no documents
    assert list(read_documents([tmp_path / "b.jsonl"])) == ["x", " ", "", ""]
    assert list(read_texts([tmp_path / "b.jsonl"])) == ["x"]


def test_jsonl_and_json_array(tmp_path):
    records = [{"text": "a", "n": 1}, {"text": 'b, with ] and [, "quotes" and \\ inside'}, {"text": None}]
    write_jsonl(tmp_path / "lines.jsonl", records)
    write_jsonl(tmp_path / "lines.json", records)  # .json in JSON Lines layout
    (tmp_path / "array.json").write_text(json.dumps(records, indent=2), encoding="utf-8")
    expected = ["a", 'b, with ] and [, "quotes" and \\ inside', ""]
    for name in ("lines.jsonl", "lines.json", "array.json"):
        assert list(read_documents([tmp_path / name])) == expected, name
    (tmp_path / "empty.json").write_text(" [ ] ", encoding="utf-8")
    assert list(read_documents([tmp_path / "empty.json"])) == []


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 50])
def test_json_array_is_decoded_through_a_small_window(tmp_path, monkeypatch, chunk):
    """Records cut by the window end at every possible place still decode to json.load's answer."""
    monkeypatch.setattr(corpus, "_CHUNK", chunk)
    records = [{"text": "x" * n + " é", "id": n} for n in range(0, 60, 7)] + [{"text": "long " * 300}]
    path = tmp_path / "array.json"
    path.write_text(json.dumps(records, separators=(", ", ": ")), encoding="utf-8")
    assert list(read_documents([path])) == [r["text"] for r in json.loads(path.read_text(encoding="utf-8"))]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('[{"text": "a"}', "not closed"),
        ('[{"text": "a"},]', "record 2: not valid JSON"),
        ('[{"text": "a"} {"text": "b"}]', "expected ',' or ']'"),
        ('[{"text": "a"}, 3]', "record 2: expected an object"),
        ('[{"body": "a"}]', "no 'text' column or field; there are: 'body'"),
    ],
)
def test_json_array_errors(tmp_path, content, message):
    (tmp_path / "bad.json").write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        list(read_documents([tmp_path / "bad.json"]))


def test_csv_reads_the_text_column(tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes(b'id,text,label\n1,"hello, world\nsecond line",a\n2,,b\n3,123,c\n4,caf\xe9,d\n5,"say ""hi""",e\n')
    assert list(read_documents([path])) == ["hello, world\nsecond line", "", "123", "caf\ufffd", 'say "hi"']
    assert list(read_documents([path], text_field="label")) == ["a", "b", "c", "d", "e"]
    with pytest.raises(ValueError, match="no 'body' column or field; there are: 'id', 'text', 'label'"):
        list(read_documents([path], text_field="body"))
    (tmp_path / "empty.csv").write_text("", encoding="utf-8")
    with pytest.raises(ValueError, match="not a readable CSV file"):
        list(read_documents([tmp_path / "empty.csv"]))


def test_parquet_reads_the_text_column_in_batches(tmp_path):
    path = tmp_path / "t.parquet"
    table = pa.table({"text": ["a", None, "c", "d", "e"], "n": [1, 2, 3, 4, 5]})
    pq.write_table(table, path, row_group_size=2)
    assert list(read_documents([path])) == ["a", "", "c", "d", "e"]
    with pytest.raises(ValueError, match="no 'body' column or field; there are: 'text', 'n'"):
        list(read_documents([path], text_field="body"))
    with pytest.raises(ValueError, match="'n' column holds int64, not strings"):
        list(read_documents([path], text_field="n"))


def test_save_to_disk_dataset_and_dataset_dict(tmp_path, datasets_quiet):
    datasets = datasets_quiet
    train = datasets.Dataset.from_dict({"text": ["t1", None, "t3"], "label": [0, 1, 0]})
    test = datasets.Dataset.from_dict({"text": ["s1"], "label": [1]})
    train.save_to_disk(str(tmp_path / "one"))
    datasets.DatasetDict({"train": train, "test": test}).save_to_disk(str(tmp_path / "dict"))
    assert expand_paths([tmp_path / "dict"]) == [tmp_path / "dict"]  # one source, its .json files not read as corpora
    assert list(read_documents([tmp_path / "one"])) == ["t1", "", "t3"]
    assert list(read_documents([tmp_path / "dict"])) == ["t1", "", "t3", "s1"]  # saved split order
    assert list(read_documents([tmp_path / "dict"], split="test")) == ["s1"]
    with pytest.raises(ValueError, match="no split 'validation'; there are: 'train', 'test'"):
        list(read_documents([tmp_path / "dict"], split="validation"))
    with pytest.raises(ValueError, match=r"\[train\]: no 'body' column or field; there are: 'text', 'label'"):
        list(read_documents([tmp_path / "dict"], text_field="body"))
    with pytest.raises(ValueError, match="'label' column holds int64, not strings"):
        list(read_documents([tmp_path / "one"], text_field="label"))


def test_folder_mixing_types_and_globs(tmp_path, datasets_quiet):
    root = tmp_path / "corpus"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("a one\na two\n", encoding="utf-8")
    write_jsonl(root / "b.jsonl", [{"text": "b one"}])
    (root / "c.csv").write_text("text\nc one\n", encoding="utf-8")
    pq.write_table(pa.table({"text": ["d one"]}), root / "d.parquet")
    datasets_quiet.Dataset.from_dict({"text": ["e one"]}).save_to_disk(str(root / "e_data"))
    (root / "sub" / "f.md").write_text("f one\n", encoding="utf-8")
    (root / "ignored.bin").write_bytes(b"\x00")
    (root / ".hidden.txt").write_text("hidden\n", encoding="utf-8")
    expected_sources = ["a.txt", "b.jsonl", "c.csv", "d.parquet", "e_data", "sub/f.md"]
    assert [p.relative_to(root).as_posix() for p in expand_paths([root])] == expected_sources
    assert list(read_texts([root])) == ["a one", "a two", "b one", "c one", "d one", "e one", "f one"]
    assert list(read_texts([str(root / "*.csv"), str(root / "**" / "*.md")])) == ["c one", "f one"]
    assert list(read_texts([root / "sub", root / "a.txt"])) == ["f one", "a one", "a two"]  # paths in the order given
    assert expand_paths([str(root / "**")]) == expand_paths([root])  # folders and files matched: each read once
    assert expand_paths([root / "sub", root]) == [root / "sub" / "f.md"] + expand_paths([root])[:-1]
    with pytest.raises(FileNotFoundError, match=r"no \.txt, .* in .*\*\.bin"):
        expand_paths([str(root / "*.bin")])


def test_bad_paths(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        expand_paths([tmp_path / "missing.txt"])
    (tmp_path / "x.bin").write_bytes(b"\x00\x01")
    with pytest.raises(ValueError, match=r"unsupported file type '\.bin'; supported: \.txt, .*\.csv, \.parquet"):
        expand_paths([tmp_path / "x.bin"])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="no .txt, .md, .*files nor dataset folders in"):
        expand_paths([empty])


def test_bad_json_lines(tmp_path):
    (tmp_path / "bad.jsonl").write_text('{"text": 1}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="bad.jsonl:1: the 'text' field is a int, not a string"):
        list(read_texts([tmp_path / "bad.jsonl"]))
    (tmp_path / "broken.jsonl").write_text("{not json\n", encoding="utf-8")
    with pytest.raises(ValueError, match="broken.jsonl:1: not valid JSON"):
        list(read_texts([tmp_path / "broken.jsonl"]))
    write_jsonl(tmp_path / "other.jsonl", [{"body": "x", "title": "y"}])
    with pytest.raises(ValueError, match="other.jsonl:1: no 'text' column or field; there are: 'body', 'title'"):
        list(read_texts([tmp_path / "other.jsonl"]))


def test_reading_is_a_stream(tmp_path):
    """Documents come before the rest of the file is read: a broken record later does not stop the first."""
    (tmp_path / "a.jsonl").write_text('{"text": "first"}\n{broken\n', encoding="utf-8")
    (tmp_path / "b.json").write_text('[{"text": "first"}, {broken', encoding="utf-8")
    for name in ("a.jsonl", "b.json"):
        documents = read_documents([tmp_path / name])
        assert next(documents) == "first"
        with pytest.raises(ValueError, match="not valid JSON"):
            next(documents)


def test_non_utf8_bytes_are_replaced(tmp_path):
    (tmp_path / "latin.txt").write_bytes("caf\xe9 au lait\n".encode("latin-1"))
    assert list(read_texts([tmp_path / "latin.txt"])) == ["caf\ufffd au lait"]
    (tmp_path / "bom.txt").write_bytes("\ufeffwith a byte order mark\n".encode())
    assert list(read_texts([tmp_path / "bom.txt"])) == ["with a byte order mark"]


def test_tsv_reads_like_csv_with_tabs(tmp_path):
    path = tmp_path / "t.tsv"
    path.write_text('text\tlabel\nhello, world\ta\n"tab\tinside"\tb\n', encoding="utf-8")
    assert list(read_documents([path])) == ["hello, world", "tab\tinside"]
    assert expand_paths([tmp_path]) == [path]


def test_read_records_gives_the_chosen_columns_of_every_format(tmp_path, datasets_quiet):
    rows = [{"text": "a", "label": 1, "n": 5}, {"text": "b", "label": None, "n": 6}]
    write_jsonl(tmp_path / "r.jsonl", rows)
    (tmp_path / "r.json").write_text(json.dumps(rows), encoding="utf-8")
    (tmp_path / "r.csv").write_text("n,text,label\n5,a,1\n6,b,\n", encoding="utf-8")
    (tmp_path / "r.tsv").write_text("n\ttext\tlabel\n5\ta\t1\n6\tb\t\n", encoding="utf-8")
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "r.parquet", row_group_size=1)
    datasets_quiet.Dataset.from_list(rows).save_to_disk(str(tmp_path / "r_data"))
    typed = [{"text": "a", "label": 1}, {"text": "b", "label": None}]
    as_strings = [{"text": "a", "label": "1"}, {"text": "b", "label": ""}]  # CSV keeps strings; empty is ""
    for name, expected in [
        ("r.jsonl", typed),
        ("r.json", typed),
        ("r.parquet", typed),
        ("r_data", typed),
        ("r.csv", as_strings),
        ("r.tsv", as_strings),
    ]:
        got = list(corpus.read_records([tmp_path / name], ["text", "label"]))
        assert [record for _, record in got] == expected, name
    wheres = [where for where, _ in corpus.read_records([tmp_path / "r.jsonl", tmp_path / "r.csv"], ["text"])]
    assert wheres == [
        f"{tmp_path / 'r.jsonl'}:1",
        f"{tmp_path / 'r.jsonl'}:2",
        f"{tmp_path / 'r.csv'}: row 1",
        f"{tmp_path / 'r.csv'}: row 2",
    ]


def test_read_records_names_the_missing_column_and_rejects_text_files(tmp_path):
    (tmp_path / "r.csv").write_text("review,stars\ngood,5\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"no 'label' column or field; there are: 'review', 'stars' \(use --label\)$"):
        list(corpus.read_records([tmp_path / "r.csv"], ["review", "label"], hint="(use --label)"))
    (tmp_path / "t.txt").write_text("a line\n", encoding="utf-8")
    with pytest.raises(ValueError, match="a text file has no columns"):
        list(corpus.read_records([tmp_path / "t.txt"], ["text"]))
    (tmp_path / "r.jsonl").write_text('"just a string"\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"r.jsonl:1: expected an object with the fields 'text'"):
        list(corpus.read_records([tmp_path / "r.jsonl"], ["text"]))


def test_expand_paths_keeps_the_suffixes_asked_for(tmp_path):
    (tmp_path / "a.conll").write_text("x O\n", encoding="utf-8")
    (tmp_path / "b.txt").write_text("x\n", encoding="utf-8")
    assert expand_paths([tmp_path]) == [tmp_path / "b.txt"]
    assert expand_paths([tmp_path], suffixes=(".conll",)) == [tmp_path / "a.conll"]
    with pytest.raises(ValueError, match=r"unsupported file type '\.conll'; supported: \.txt"):
        expand_paths([tmp_path / "a.conll"])


def test_bytes_that_are_not_utf8_are_counted_per_line_or_record(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"ok\ncaf\xe9 \xe9\xe9 twice\n\nna\xefve\n")
    (tmp_path / "b.jsonl").write_bytes(b'{"text": "caf\xe9", "other": "\xff"}\n{"text": "fine", "other": "\xff"}\n')
    (tmp_path / "c.csv").write_bytes(b"text,label\ncaf\xe9,\xff\nfine,b\n")
    stats = ReadStats()
    texts = list(read_texts([tmp_path], stats=stats))
    assert texts == ["ok", "caf\ufffd \ufffd\ufffd twice", "na\ufffdve", "caf\ufffd", "fine", "caf\ufffd", "fine"]
    # a.txt lines 2 and 4, b.jsonl record 1 (the unused field is not read), c.csv row 1
    assert stats.invalid_utf8 == 4 and stats.first_invalid == f"{tmp_path / 'a.txt'}:2"
    assert stats.describe() == f"4 lines with invalid UTF-8 replaced (first: {tmp_path / 'a.txt'}:2)"
    records = ReadStats()
    got = [r for _, r in corpus.read_records([tmp_path / "c.csv"], ["text", "label"], stats=records)]
    assert got[0] == {"text": "caf\ufffd", "label": "\ufffd"} and records.invalid_utf8 == 1  # one row, two values


@pytest.mark.parametrize(
    ("name", "content", "where"),
    [
        ("a.txt", b"ok\ncaf\xe9\n", "a.txt:2: not valid UTF-8 (byte 0xe9 at offset 3)"),
        ("a.jsonl", b'{"text": "ok"}\n{"text": "caf\xe9"}\n', "a.jsonl:2: not valid UTF-8"),
        ("a.json", b'[{"text": "ok"}, {"text": "caf\xe9"}]', "a.json: record 2: not valid UTF-8"),
        ("a.csv", b"text\nok\ncaf\xe9\n", "a.csv: row 2: not valid UTF-8 (byte 0xe9 at offset 3)"),
        ("e.jsonl", b'{"text": "lone \\udc80 escape"}\n', "e.jsonl:1: not valid UTF-8 (at character 5)"),
    ],
)
def test_strict_reading_names_the_first_bad_line(tmp_path, name, content, where):
    (tmp_path / name).write_bytes(content)
    with pytest.raises(ValueError, match=re.escape(where)):
        list(read_documents([tmp_path / name], strict=True))
    assert "\ufffd" in "".join(read_documents([tmp_path / name]))  # not strict: replaced


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("png.txt", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", r"png.txt: looks binary \(a NUL byte at offset 8\)"),
        ("png.jsonl", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "png.jsonl: looks binary"),
        ("png.csv", b"text\n\x89PNG\x00", "png.csv: looks binary"),
        ("wide.txt", "text\n".encode("utf-16"), "wide.txt: looks like UTF-16 text; save it as UTF-8"),
        ("late.txt", b"x\n" * 5000 + b"a\x00b\n", r"late.txt:5001: a NUL byte: the file looks binary"),
    ],
)
def test_binary_files_are_refused(tmp_path, name, content, message):
    (tmp_path / name).write_bytes(content)
    with pytest.raises(ValueError, match=message):
        list(read_documents([tmp_path / name]))


@pytest.mark.parametrize("boundary", ["line", "paragraph", "file"])
def test_a_line_over_the_limit_is_refused_without_reading_it_whole(tmp_path, boundary):
    path = tmp_path / "long.txt"
    path.write_bytes(b"short\n" + b"x" * 25 + b"\r\nshort again\n")
    # the limit counts the line's bytes, not its line end ("\r\n" here)
    assert list(read_texts([path], boundary="line", max_line_bytes=25)) == ["short", "x" * 25, "short again"]
    with pytest.raises(ValueError, match=r"long.txt:2: a line of 25 bytes, over the limit of 24 \(max_line_bytes"):
        list(read_texts([path], boundary=boundary, max_line_bytes=24))
    (tmp_path / "a.jsonl").write_text('{"text": "a"}\n{"text": "' + "b" * 40 + '"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="a.jsonl:2: a line of 52 bytes, over the limit of 30"):
        list(read_documents([tmp_path / "a.jsonl"], max_line_bytes=30))
    (tmp_path / "a.json").write_text(json.dumps([{"text": "a"}, {"text": "b" * 40}]), encoding="utf-8")
    with pytest.raises(ValueError, match="a.json: record 2: over the limit of 30 characters"):
        list(read_documents([tmp_path / "a.json"], max_line_bytes=30))
    assert len(list(read_documents([tmp_path / "a.json"], max_line_bytes=60))) == 2
    with pytest.raises(ValueError, match="max_line_bytes must be >= 1"):
        list(read_documents([path], max_line_bytes=0))


def test_line_ends_of_every_kind_end_lines(tmp_path):
    (tmp_path / "ends.txt").write_bytes(b"\xef\xbb\xbfunix\nwindows\r\nold mac\rlast")
    assert list(read_texts([tmp_path / "ends.txt"])) == ["unix", "windows", "old mac", "last"]
    assert list(read_texts([tmp_path / "ends.txt"], boundary="file")) == ["unix\nwindows\nold mac\nlast"]


def test_a_csv_header_that_is_not_utf8_is_named(tmp_path):
    """pyarrow decodes column names itself; found by tests/data/test_fuzz.py."""
    (tmp_path / "h.csv").write_bytes(b"t\xe9xt,label\nfine,a\n")
    with pytest.raises(ValueError, match=r"h.csv: the header row is not valid UTF-8 text"):
        list(read_documents([tmp_path / "h.csv"]))
