"""Reading text corpora: files, folders and globs of .txt / .md / .jsonl, as a stream of texts.

Text files give one text per non-empty line (``unit="line"``) or per blank-line-separated
paragraph (``unit="paragraph"``); JSON Lines give the ``text_field`` of each record.
"""

from __future__ import annotations

import glob
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Literal

TEXT_SUFFIXES = (".txt", ".md", ".text")
JSON_SUFFIXES = (".jsonl", ".json")


def expand_paths(paths: Iterable[str | Path]) -> list[Path]:
    """Files named by paths, folders (recursively) and glob patterns, sorted within each.

    Raises:
        FileNotFoundError: a path matches nothing.
        ValueError: a file has an unsupported type.
    """
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.suffix in TEXT_SUFFIXES + JSON_SUFFIXES)
            if not found:
                raise FileNotFoundError(f"no .txt, .md or .jsonl files under {path}")
            files.extend(found)
        elif path.is_file():
            if path.suffix not in TEXT_SUFFIXES + JSON_SUFFIXES:
                raise ValueError(
                    f"{path}: unsupported file type {path.suffix or '(none)'!r}; "
                    f"expected one of {', '.join(TEXT_SUFFIXES + JSON_SUFFIXES)}"
                )
            files.append(path)
        else:
            matches = sorted(Path(m) for m in glob.glob(str(raw), recursive=True))
            if not matches:
                raise FileNotFoundError(f"{raw}: no such file, folder or matching pattern")
            files.extend(expand_paths(matches))
    return files


def read_texts(
    paths: Iterable[str | Path],
    *,
    unit: Literal["line", "paragraph"] = "line",
    text_field: str = "text",
) -> Iterator[str]:
    """Stream the texts of a corpus, skipping empty ones.

    Raises:
        ValueError: a JSON line that is not an object with ``text_field``.
    """
    for path in expand_paths(paths):
        if path.suffix in JSON_SUFFIXES:
            yield from _json_texts(path, text_field)
        else:
            yield from _plain_texts(path, unit)


def _plain_texts(path: Path, unit: str) -> Iterator[str]:
    with path.open(encoding="utf-8", errors="replace") as handle:
        if unit == "line":
            for line in handle:
                if line.strip():
                    yield line.strip()
            return
        paragraph: list[str] = []
        for line in handle:
            if line.strip():
                paragraph.append(line.strip())
            elif paragraph:
                yield " ".join(paragraph)
                paragraph = []
        if paragraph:
            yield " ".join(paragraph)


def _json_texts(path: Path, field: str) -> Iterator[str]:
    with path.open(encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}:{number}: not valid JSON ({error.msg})") from None
            if not isinstance(record, dict) or not isinstance(record.get(field), str):
                raise ValueError(f"{path}:{number}: expected an object with a string {field!r} field")
            if record[field].strip():
                yield record[field]
