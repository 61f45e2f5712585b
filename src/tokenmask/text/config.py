"""How corpus files are read: where documents end, which field holds the text, how bytes are checked."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tokenmask.settings import check, setting
from tokenmask.text.byte_checks import MAX_LINE_BYTES
from tokenmask.text.corpus import DEFAULT_BOUNDARY, DocumentBoundary

DEFAULT_TOKENIZER = "bert-base-uncased"
"""The tokenizer used where none is named and no model brings its own: the real WordPiece vocabulary."""


@dataclass(frozen=True)
class ReadingConfig:
    """The keywords of :func:`~tokenmask.text.corpus.read_documents`, declared once for every command that reads a corpus."""

    document_boundary: DocumentBoundary = setting(
        DEFAULT_BOUNDARY,
        help="where a document of a .txt/.md file ends: at a blank line (paragraph), the end of the file, or each line",
    )
    text_field: str = setting("text", help="the text field of JSON records, column of CSV/Parquet files and datasets")
    strict: bool = setting(
        False,
        help="refuse bytes that are not UTF-8 in text, JSON and CSV files (an error naming file and line); "
        "without it they become U+FFFD and the lines holding them are counted in the run's first line",
        advanced=True,
    )
    max_line_bytes: int = setting(
        MAX_LINE_BYTES,
        help="longest line of a text or JSON Lines file (or JSON array record), in bytes; a longer one is an error "
        "naming file, line and length, found after reading no more than the limit",
        ge=1,
        advanced=True,
    )

    def __post_init__(self) -> None:
        check(self)

    def keywords(self) -> dict[str, Any]:
        """``read_documents(paths, **reading.keywords())``."""
        return {"boundary": self.document_boundary, "text_field": self.text_field, "strict": self.strict,
                "max_line_bytes": self.max_line_bytes}  # fmt: skip
