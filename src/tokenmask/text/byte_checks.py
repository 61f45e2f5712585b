"""Bytes of text files to checked text, a line at a time: what the text, JSON and CSV readers share.

:mod:`tokenmask.text.corpus` (text, JSON) and :mod:`tokenmask.text.tabular` (CSV, TSV) read
files as bytes through :class:`TextChecks`, which catches three kinds of bad input and names
the file and line of each: a binary file (a NUL byte, which text never holds), a line longer
than ``max_line_bytes`` (refused after reading no more than the limit, so a 50 MB line costs
the memory of the limit, not of the line), and bytes that are not UTF-8 (replaced by U+FFFD
as Python's ``errors="replace"`` does, and counted in :class:`ReadStats`; or refused when
reading is strict).
"""

from __future__ import annotations

import codecs
import io
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

MAX_LINE_BYTES = 1_000_000
"""Longest line of a text or JSON Lines file by default: 1 MB, some 200,000 words, seconds to
tokenize; a longer line is more likely a file that is no text corpus (or has no line ends)."""

SNIFF_BYTES = 8192
"""A file whose first this many bytes hold a NUL byte is taken for binary."""

_SURROGATES = re.compile("[\ud800-\udfff]+")  # undecodable bytes kept by "surrogateescape", or JSON's \udXXX escapes
_SCAN_BYTES = 1 << 20  # bytes read at a time when measuring an over-long line


@dataclass
class ReadStats:
    """What reading repaired, counted while a corpus streams (one object per read).

    ``invalid_utf8`` counts the lines (of text files) and records (of JSON, CSV and TSV files)
    in which bytes that are not UTF-8 were replaced by U+FFFD: ``"caf\\xe9\\n"`` counts 1.
    """

    invalid_utf8: int = 0
    first_invalid: str | None = None
    """Where the first of them is: ``"a.txt:3"``, ``"a.csv: row 2"``."""
    last_invalid: str | None = field(default=None, repr=False)
    """Where the last was: a record with two bad values counts once."""

    def note_invalid(self, where: str) -> None:
        """Count the line or record ``where`` (once, however many bad values it holds)."""
        if where == self.last_invalid:
            return
        self.invalid_utf8 += 1
        self.first_invalid = self.first_invalid or where
        self.last_invalid = where

    def describe(self) -> str:
        """``"3 lines with invalid UTF-8 replaced (first: a.txt:2)"``, or ``""`` when there were none."""
        if not self.invalid_utf8:
            return ""
        lines = "line" if self.invalid_utf8 == 1 else "lines"
        return f"{self.invalid_utf8:,} {lines} with invalid UTF-8 replaced (first: {self.first_invalid})"


@dataclass(frozen=True)
class TextChecks:
    """How the bytes of a file become text: strict or repairing, the line limit, where repairs are counted.

    Attributes:
        strict: refuse bytes that are not UTF-8 (a ``ValueError`` naming file and line)
            instead of replacing them by U+FFFD.
        max_line_bytes: longest line, in bytes, its line end excluded.
        stats: where the replacements are counted.
    """

    strict: bool = False
    max_line_bytes: int = MAX_LINE_BYTES
    stats: ReadStats = field(default_factory=ReadStats)

    def __post_init__(self) -> None:
        if self.max_line_bytes < 1:
            raise ValueError(f"max_line_bytes must be >= 1; got {self.max_line_bytes}")

    def sniff(self, path: Path) -> None:
        """``ValueError`` when the start of ``path`` holds a NUL byte: a binary file (or UTF-16 text)."""
        with path.open("rb") as handle:
            head = handle.read(SNIFF_BYTES)
        offset = head.find(b"\0")
        if offset < 0:
            return
        if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
            raise ValueError(f"{path}: looks like UTF-16 text; save it as UTF-8")
        raise ValueError(f"{path}: looks binary (a NUL byte at offset {offset}), not UTF-8 text")

    def raw_lines(self, handle: io.BufferedReader, path: Path) -> Iterator[tuple[int, bytes]]:
        """``(number, line)`` for each line of a file opened in binary mode, its line end and a
        leading UTF-8 byte order mark removed.

        ``b"one\\r\\ntwo"  ->  (1, b"one"), (2, b"two")``

        Raises:
            ValueError: a line over ``max_line_bytes`` (naming its length; the rest of it is
                scanned, never held), or a line holding a NUL byte.
        """
        number = 0
        if handle.peek(3)[:3] == codecs.BOM_UTF8:  # a byte order mark is no part of the first line
            handle.read(3)
        while raw := handle.readline(self.max_line_bytes + 2):  # + 2: room for a "\r\n"
            number += 1
            content = raw.removesuffix(b"\n").removesuffix(b"\r")
            if len(content) > self.max_line_bytes:
                length = len(content) + (0 if raw.endswith(b"\n") else _rest_of_line(handle))
                raise ValueError(
                    f"{path}:{number}: a line of {length:,} bytes, over the limit of {self.max_line_bytes:,} "
                    "(max_line_bytes / --max-line-bytes); split the text into lines, or raise the limit"
                )
            if b"\0" in raw:
                raise ValueError(f"{path}:{number}: a NUL byte: the file looks binary, not UTF-8 text")
            yield number, content

    def text_lines(self, path: Path) -> Iterator[str]:
        """The lines of a text file, decoded (:meth:`decode`); a lone ``\\r`` ends a line too.

        Raises:
            ValueError: a binary file, an over-long line, bytes that are not UTF-8 when strict.
        """
        self.sniff(path)
        with path.open("rb") as handle:
            for number, raw in self.raw_lines(handle, path):
                yield from self.decode(raw, f"{path}:{number}").split("\r")

    def decode(self, raw: bytes, where: str) -> str:
        """``raw`` as UTF-8; bytes that are not UTF-8 become U+FFFD, one per invalid sequence as
        with ``errors="replace"``, and the line is counted at ``where``.

        ``b"caf\\xe9 au lait"  ->  "caf\\ufffd au lait"``

        Raises:
            ValueError: such bytes, when strict (naming ``where``, the byte and its offset).
        """
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as error:
            self._invalid(where, f"byte 0x{raw[error.start]:02x} at offset {error.start}")
            return raw.decode("utf-8", "replace")

    def repair(self, value: Any, where: str) -> Any:
        """A string (or list of strings) decoded with ``surrogateescape``, or from JSON's
        ``\\udXXX`` escapes, with its lone surrogates replaced as :meth:`decode` replaces the
        bytes they stand for (counted at ``where``); other values as they are.
        ``"caf\\udce9"  ->  "caf\\ufffd"``

        Raises:
            ValueError: a lone surrogate, when strict.
        """
        if isinstance(value, list):
            return [self.repair(item, where) for item in value]
        if not isinstance(value, str) or value.isascii():
            return value
        match = _SURROGATES.search(value)
        if match is None:
            return value
        self._invalid(where, f"at character {match.start()}")
        return _SURROGATES.sub(_replaced, value)

    def _invalid(self, where: str, detail: str) -> None:
        if self.strict:
            raise ValueError(
                f"{where}: not valid UTF-8 ({detail}); strict reading refuses it "
                "(without strict / --strict it is replaced by U+FFFD and counted)"
            )
        self.stats.note_invalid(where)


def _replaced(run: re.Match[str]) -> str:
    """Surrogates that stand for bytes -> those bytes decoded with ``errors="replace"``; others
    (JSON's ``\\ud800`` escapes) -> one U+FFFD each."""
    try:
        return run.group().encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:
        return "\ufffd" * len(run.group())


def _rest_of_line(handle: BinaryIO) -> int:
    """Bytes up to the next line end (excluded) or the end of the file, read a chunk at a time."""
    count = 0
    while chunk := handle.readline(_SCAN_BYTES):
        if chunk.endswith(b"\n"):
            return count + len(chunk) - 1
        count += len(chunk)
    return count
