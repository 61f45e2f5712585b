"""One self-contained HTML page of a study or comparison: headings, text, tables and figures.

Everything is inside the file: the style sheet inline, every figure a PNG embedded as a
``data:`` URI, no script and no link to fetch, so ``report.html`` opens offline, can be
mailed or attached to a ticket, and looks the same everywhere. Text is escaped; numbers are
formatted by the caller (the report does not guess how many digits matter).
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tokenmask.files import write_text

REPORT_FILE = "report.html"

_STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; max-width: 70rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
h1 { font-size: 1.6rem; } h2 { font-size: 1.25rem; margin-top: 2rem; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.8rem 0; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.6rem; text-align: right; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
caption { caption-side: top; text-align: left; font-weight: 600; padding-bottom: 0.3rem; }
figure { margin: 1rem 0; } figcaption { color: #555; font-size: 0.9rem; } img { max-width: 100%; }
p.note { color: #555; }
"""


@dataclass(frozen=True)
class Heading:
    text: str


@dataclass(frozen=True)
class Paragraph:
    text: str
    note: bool = False  # shown smaller and grey: provenance, commands, caveats


@dataclass(frozen=True)
class Table:
    """``columns`` names the columns; each row has one already-formatted cell per column."""

    columns: Sequence[str]
    rows: Sequence[Sequence[object]]
    caption: str = ""

    def __post_init__(self) -> None:
        for row in self.rows:
            if len(row) != len(self.columns):
                raise ValueError(f"a table row has {len(row)} cells for {len(self.columns)} columns: {list(row)}")


@dataclass(frozen=True)
class Figure:
    """A PNG file on disk, embedded into the page (the file itself may be deleted afterwards)."""

    png: Path
    caption: str = ""


Part = Heading | Paragraph | Table | Figure


def render_report(title: str, parts: Sequence[Part]) -> str:
    """The page as a string.

    ``render_report("t", [Table(["a"], [[1]])])`` -> ``<!DOCTYPE html>…<table>…<td>1</td>…``

    Raises:
        FileNotFoundError: a figure's PNG does not exist.
        ValueError: a figure that is not a PNG file.
    """
    body = "\n".join(_render(part) for part in parts)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n<style>{_STYLE}</style>\n</head>\n"
        f"<body>\n<h1>{html.escape(title)}</h1>\n{body}\n</body>\n</html>\n"
    )


def write_report(path: str | Path, title: str, parts: Sequence[Part]) -> Path:
    """Write :func:`render_report` to ``path`` atomically (a crash leaves the old page)."""
    return write_text(path, render_report(title, parts))


def _render(part: Part) -> str:
    if isinstance(part, Heading):
        return f"<h2>{html.escape(part.text)}</h2>"
    if isinstance(part, Paragraph):
        opening = '<p class="note">' if part.note else "<p>"
        return f"{opening}{html.escape(part.text)}</p>"
    if isinstance(part, Table):
        caption = f"<caption>{html.escape(part.caption)}</caption>" if part.caption else ""
        head = "".join(f"<th>{html.escape(str(c))}</th>" for c in part.columns)
        rows = "\n".join("<tr>" + "".join(f"<td>{html.escape(str(cell))}</td>" for cell in row) + "</tr>" for row in part.rows)
        return f"<table>{caption}\n<thead><tr>{head}</tr></thead>\n<tbody>\n{rows}\n</tbody>\n</table>"
    return _figure(part)


def _figure(part: Figure) -> str:
    data = Path(part.png).read_bytes()
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        raise ValueError(f"{part.png}: not a PNG file")
    source = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
    caption = f"<figcaption>{html.escape(part.caption)}</figcaption>" if part.caption else ""
    return f'<figure><img src="{source}" alt="{html.escape(part.caption or Path(part.png).name)}">{caption}</figure>'
