"""Reading text corpora as a stream of documents: files, folders and globs of text, JSON, CSV,
TSV, Parquet, and folders written by Hugging Face ``datasets``' ``save_to_disk``.

Text files give one document per non-empty line (``boundary="line"``), per blank-line-separated
paragraph (``"paragraph"``) or per file (``"file"``); the other formats give the
``text_field`` (field or column) of each record, or with :func:`read_records` several columns
of each record. Every format is read record by record or in batches, never whole, so a corpus
larger than memory streams through. Text, JSON and CSV files are read as bytes and checked
(:mod:`tokenmask.text.byte_checks`): binary files and over-long lines are refused, bytes that are
not UTF-8 replaced and counted (or refused, ``strict=True``).
"""

from __future__ import annotations

import codecs
import glob
import io
import json
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO, Literal, get_args

from tokenmask.text.byte_checks import MAX_LINE_BYTES, ReadStats, TextChecks
from tokenmask.text.tabular import (
    TEXT_FIELD_HINT,
    Record,
    csv_documents,
    csv_records,
    dataset_documents,
    dataset_records,
    is_dataset_folder,
    parquet_documents,
    parquet_records,
    require_column,
)

DocumentBoundary = Literal["line", "paragraph", "file"]
"""Where a document of a text file ends: at each line end, at a blank line, or at the end of the file."""
BOUNDARIES: tuple[str, ...] = get_args(DocumentBoundary)
DEFAULT_BOUNDARY: DocumentBoundary = "paragraph"
"""Where a document of a text file ends unless told: at a blank line (a corpus read as documents;
:func:`read_texts`, one text per line, is the exception its name says)."""
TEXT_SUFFIXES = (".txt", ".md", ".text")
JSON_SUFFIXES = (".jsonl", ".json")
TABLE_SUFFIXES = (".csv", ".parquet", ".tsv")
SUPPORTED_SUFFIXES = TEXT_SUFFIXES + JSON_SUFFIXES + TABLE_SUFFIXES

_CHUNK = 1 << 16  # characters read at a time from a JSON array


def expand_paths(paths: Iterable[str | Path], *, suffixes: Sequence[str] = SUPPORTED_SUFFIXES) -> list[Path]:
    """Corpus sources named by paths, folders and glob patterns, sorted within each.

    A folder is walked recursively (hidden entries skipped) for files of a supported type;
    a dataset folder (``save_to_disk``: ``state.json`` and ``dataset_info.json``, or
    ``dataset_dict.json``) is one source, not walked. A glob keeps what a folder walk would
    (other files and the insides of dataset folders are passed over). A source reached twice
    (a folder and a glob inside it) is listed once, where first reached.

    ``expand_paths(["corpus/"])  ->  [corpus/a.txt, corpus/hf_data, corpus/sub/b.jsonl]``

    ``suffixes`` are the file types kept (lower case, with the dot); dataset folders always are.

    Raises:
        FileNotFoundError: a path matches nothing, or a folder or glob holds no corpus.
        ValueError: a file named explicitly has an unsupported type.
    """
    sources: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_file():
            if not _supported(path, suffixes):
                raise ValueError(
                    f"{path}: unsupported file type {path.suffix or '(none)'!r}; supported: "
                    f"{', '.join(suffixes)} and folders written by datasets' save_to_disk"
                )
            sources.append(path)
            continue
        if path.is_dir():
            found = _walk(path, suffixes)
        else:
            matches = sorted(Path(m) for m in glob.glob(str(raw), recursive=True))
            if not matches:
                raise FileNotFoundError(f"{raw}: no such file, folder or matching pattern")
            found = [s for m in matches if not _inside_dataset(m) for s in (_walk(m, suffixes) if m.is_dir() else [m])]
            found = [s for s in found if s.is_dir() or _supported(s, suffixes)]
        if not found:
            raise FileNotFoundError(f"no {', '.join(suffixes)} files nor dataset folders in {raw}")
        sources.extend(found)
    return list(dict.fromkeys(sources))


def _supported(path: Path, suffixes: Sequence[str]) -> bool:
    return path.suffix.lower() in suffixes


def _inside_dataset(path: Path) -> bool:
    return any(is_dataset_folder(parent) for parent in path.parents)


def _walk(folder: Path, suffixes: Sequence[str]) -> list[Path]:
    if is_dataset_folder(folder):
        return [folder]
    found: list[Path] = []
    for child in sorted(folder.iterdir()):
        if child.name.startswith("."):
            continue
        if child.is_dir():
            found.extend(_walk(child, suffixes))
        elif _supported(child, suffixes):
            found.append(child)
    return found


def read_documents(
    paths: Iterable[str | Path],
    *,
    boundary: DocumentBoundary = DEFAULT_BOUNDARY,
    text_field: str = "text",
    split: str | None = None,
    strict: bool = False,
    max_line_bytes: int = MAX_LINE_BYTES,
    stats: ReadStats | None = None,
) -> Iterator[str]:
    """Stream every document of a corpus, empty ones included (a null value reads as ``""``).

    Args:
        paths: files, folders and globs (see :func:`expand_paths`).
        boundary: how text files (.txt, .md, .text) are cut: ``"line"``, ``"paragraph"`` or
            ``"file"``. Blank lines separate lines and paragraphs, so they are not documents.
        text_field: the field of JSON records, the column of CSV / Parquet files and datasets.
        split: for a ``DatasetDict`` folder, the split to read; None reads all of them in
            their saved order. Ignored by other sources.
        strict: refuse bytes that are not UTF-8 in text, JSON and CSV files, naming file and
            line; by default each run of them becomes one U+FFFD, counted in ``stats``.
        max_line_bytes: longest line of a text or JSON Lines file (and JSON array record);
            no more than this is read of a longer one before it is refused.
        stats: where replacements are counted (:class:`~tokenmask.text.byte_checks.ReadStats`).

    Raises:
        FileNotFoundError / ValueError: from :func:`expand_paths`; a bad boundary; a record
            without ``text_field`` (the message names the fields there are); a value that is
            not a string; invalid JSON; a missing split; a binary file; a line over
            ``max_line_bytes``; bytes that are not UTF-8 when ``strict``.
    """
    if boundary not in BOUNDARIES:
        raise ValueError(f"boundary must be one of {', '.join(BOUNDARIES)}; got {boundary!r}")
    checks = TextChecks(strict=strict, max_line_bytes=max_line_bytes, stats=stats or ReadStats())
    for source in expand_paths(paths):
        yield from _source_documents(source, boundary=boundary, text_field=text_field, split=split, checks=checks)


def read_texts(
    paths: Iterable[str | Path],
    *,
    boundary: DocumentBoundary = "line",
    text_field: str = "text",
    split: str | None = None,
    strict: bool = False,
    max_line_bytes: int = MAX_LINE_BYTES,
    stats: ReadStats | None = None,
) -> Iterator[str]:
    """Stream the non-blank documents of a corpus (:func:`read_documents` without empty ones).

    ``a.txt = "one\\n\\ntwo\\nthree\\n"``: boundary ``line`` -> ``["one", "two", "three"]``,
    ``paragraph`` -> ``["one", "two three"]``, ``file`` -> ``["one\\n\\ntwo\\nthree"]``.
    """
    documents = read_documents(
        paths, boundary=boundary, text_field=text_field, split=split, strict=strict, max_line_bytes=max_line_bytes, stats=stats
    )
    for text in documents:
        if text.strip():
            yield text


def _source_documents(
    source: Path, *, boundary: DocumentBoundary, text_field: str, split: str | None, checks: TextChecks
) -> Iterator[str]:
    if source.is_dir():
        return dataset_documents(source, text_field, split)
    suffix = source.suffix.lower()
    if suffix in JSON_SUFFIXES:
        return _json_documents(source, text_field, checks)
    if suffix in (".csv", ".tsv"):
        return csv_documents(source, text_field, checks=checks)
    if suffix == ".parquet":
        return parquet_documents(source, text_field)
    return _plain_documents(source, boundary, checks)


def _plain_documents(path: Path, boundary: DocumentBoundary, checks: TextChecks) -> Iterator[str]:
    lines = checks.text_lines(path)
    if boundary == "file":
        yield "\n".join(lines).strip()
    elif boundary == "line":
        for line in lines:
            if line.strip():
                yield line.strip()
    else:
        yield from _paragraphs(lines)


def _paragraphs(lines: Iterable[str]) -> Iterator[str]:
    paragraph: list[str] = []
    for line in lines:
        if line.strip():
            paragraph.append(line.strip())
        elif paragraph:
            yield " ".join(paragraph)
            paragraph = []
    if paragraph:
        yield " ".join(paragraph)


def _json_documents(path: Path, field: str, checks: TextChecks) -> Iterator[str]:
    for where, record in _json_values(path, checks):
        yield _record_text(record, field, where, checks)


def _json_values(path: Path, checks: TextChecks) -> Iterator[tuple[str, Any]]:
    """``(where, value)`` for each record of a JSON Lines file, or (a file starting with ``[``)
    of one JSON array; ``where`` is ``"path:line"`` or ``"path: record n"``.

    Bytes that are not UTF-8 are kept as lone surrogates (``surrogateescape``): only the
    fields a reader uses are repaired, and counted, by ``checks.repair``.
    """
    checks.sniff(path)
    with path.open("rb") as handle:
        if handle.read(_CHUNK).removeprefix(codecs.BOM_UTF8).lstrip().startswith(b"["):
            handle.seek(0)
            yield from _array_values(handle, path, checks.max_line_bytes)
            return
        handle.seek(0)
        for number, raw in checks.raw_lines(handle, path):
            line = raw.decode("utf-8", "surrogateescape")
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}:{number}: not valid JSON ({error.msg})") from None
            yield f"{path}:{number}", record


def _array_values(handle: BinaryIO, path: Path, max_record: int) -> Iterator[tuple[str, Any]]:
    text = io.TextIOWrapper(handle, encoding="utf-8-sig", errors="surrogateescape", newline="")
    try:
        for number, record in _array_records(text, text.read(_CHUNK), path, max_record):
            yield f"{path}: record {number}", record
    finally:
        text.detach()  # the caller closes the file


def _array_records(handle: Any, buffer: str, path: Path, max_record: int) -> Iterator[tuple[int, Any]]:
    """The elements of a JSON array, decoded one at a time from a growing window of the file.

    A record cut by the window end fails to decode; the window then grows and the record is
    decoded again, so memory holds about one record, not the file. A record that outgrows
    ``max_record`` characters is refused.
    """
    decoder = json.JSONDecoder()
    position = buffer.index("[") + 1
    number, expect_value, at_end = 0, True, False
    while True:
        while position < len(buffer) and buffer[position].isspace():
            position += 1
        if position == len(buffer):
            if at_end:
                raise ValueError(f"{path}: the JSON array is not closed")
            buffer, position, at_end = _grow(handle, buffer, position)
            continue
        char = buffer[position]
        if char == "]" and (number == 0 or not expect_value):
            return
        if not expect_value:
            if char != ",":
                raise ValueError(f"{path}: record {number + 1}: expected ',' or ']' in the JSON array")
            position, expect_value = position + 1, True
            continue
        try:
            start = position
            record, position = decoder.raw_decode(buffer, position)
        except json.JSONDecodeError as error:
            if at_end:
                raise ValueError(f"{path}: record {number + 1}: not valid JSON ({error.msg})") from None
            _check_record_size(len(buffer) - position, max_record, path, number + 1)  # before the window grows
            buffer, position, at_end = _grow(handle, buffer, position)
            continue
        _check_record_size(position - start, max_record, path, number + 1)
        number, expect_value = number + 1, False
        yield number, record


def _check_record_size(size: int, max_record: int, path: Path, number: int) -> None:
    if size > max_record:
        raise ValueError(
            f"{path}: record {number}: over the limit of {max_record:,} characters "
            "(max_line_bytes / --max-line-bytes); split the record, or raise the limit"
        )


def _grow(handle: Any, buffer: str, position: int) -> tuple[str, int, bool]:
    """Drop what was decoded, read at least as much again; ``(buffer, 0, at_end)``."""
    rest = buffer[position:]
    more = handle.read(max(_CHUNK, len(rest)))
    return rest + more, 0, not more


def _record_text(record: Any, field: str, where: str, checks: TextChecks) -> str:
    if not isinstance(record, dict):
        raise ValueError(f"{where}: expected an object with a string {field!r} field")
    require_column(where, field, list(record))
    value = checks.repair(record[field], where)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"{where}: the {field!r} field is a {type(value).__name__}, not a string")
    return value


def read_records(
    paths: Iterable[str | Path],
    columns: Sequence[str],
    *,
    split: str | None = None,
    hint: str = TEXT_FIELD_HINT,
    strict: bool = False,
    max_line_bytes: int = MAX_LINE_BYTES,
    stats: ReadStats | None = None,
) -> Iterator[tuple[str, Record]]:
    """Stream the ``columns`` of every record of JSON, CSV / TSV, Parquet and dataset sources.

    Yields ``(where, record)``: ``where`` names the record for error messages
    (``"a.jsonl:3"``, ``"a.csv: row 2"``), ``record`` maps each column to its value (a null
    is ``None``; CSV and TSV values are strings, the others keep their JSON / Arrow type).

    ``a.jsonl = '{"text": "fine", "label": 1, "n": 5}'``:
    ``read_records([a], ["text", "label"])  ->  [("a.jsonl:1", {"text": "fine", "label": 1})]``

    Args:
        paths: files, folders and globs (see :func:`expand_paths`).
        columns: the fields / columns to read; every record must have them.
        split: for a ``DatasetDict`` folder, the split to read; None reads all of them.
        hint: what the missing-column message suggests, e.g. ``"(choose with --label-column)"``.
        strict / max_line_bytes / stats: as in :func:`read_documents`.

    Raises:
        FileNotFoundError / ValueError: from :func:`expand_paths`; a text file (it has no
            columns); a missing column (naming the columns there are); invalid JSON; a JSON
            record that is not an object; a missing split; a binary file; an over-long line.
    """
    checks = TextChecks(strict=strict, max_line_bytes=max_line_bytes, stats=stats or ReadStats())
    for source in expand_paths(paths):
        yield from _source_records(source, columns, split=split, hint=hint, checks=checks)


def _source_records(
    source: Path, columns: Sequence[str], *, split: str | None, hint: str, checks: TextChecks
) -> Iterator[tuple[str, Record]]:
    suffix = source.suffix.lower()
    if source.is_dir():
        yield from dataset_records(source, columns, split, hint=hint)
    elif suffix in JSON_SUFFIXES:
        for where, record in _json_values(source, checks):
            if not isinstance(record, dict):
                raise ValueError(f"{where}: expected an object with the fields {', '.join(map(repr, columns))}")
            for column in columns:
                require_column(where, column, list(record), hint=hint)
            yield where, {column: checks.repair(record[column], where) for column in columns}
    elif suffix == ".parquet":
        for number, record in enumerate(parquet_records(source, columns, hint=hint), start=1):
            yield f"{source}: row {number}", record
    elif suffix in TABLE_SUFFIXES:
        for number, record in enumerate(csv_records(source, columns, hint=hint, checks=checks), start=1):
            yield f"{source}: row {number}", record
    else:
        raise ValueError(
            f"{source}: a text file has no columns; records need {', '.join(JSON_SUFFIXES + TABLE_SUFFIXES)} "
            "files or a dataset folder"
        )


def fingerprint_sources(sources: Sequence[Path]) -> list[list[Any]]:
    """What identifies the sources' contents cheaply: path, size and modification time (ns) of
    each file (every file inside a dataset folder). A changed file changes the fingerprint."""
    entries = []
    for source in sources:
        files = sorted(p for p in source.rglob("*") if p.is_file()) if source.is_dir() else [source]
        for file in files:
            stat = file.stat()
            entries.append([str(file.resolve()), stat.st_size, stat.st_mtime_ns])
    return entries
