"""The HTML report: escaped text, tables cell for cell, figures embedded so the page needs no network."""

import base64
import re

import pytest

from tokenmask.experiments.report import Figure, Heading, Paragraph, Table, render_report, write_report

# The smallest valid PNG: a 1x1 transparent pixel.
PIXEL = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")


def test_text_is_escaped_and_tables_keep_their_cells():
    page = render_report(
        "a <b> & c",
        [Heading("x < y"), Paragraph("1 & 2", note=True), Table(["strategy", "accuracy"], [["pmi", "0.31"], ["span", "0.29"]])],
    )
    assert "<title>a &lt;b&gt; &amp; c</title>" in page
    assert "<h2>x &lt; y</h2>" in page and '<p class="note">1 &amp; 2</p>' in page
    assert re.findall(r"<tr>(.*?)</tr>", page) == [
        "<th>strategy</th><th>accuracy</th>",
        "<td>pmi</td><td>0.31</td>",
        "<td>span</td><td>0.29</td>",
    ]
    assert "<script" not in page and "http" not in page.replace('lang="en"', "")  # nothing to fetch or run


def test_figures_are_embedded_and_the_file_can_go(tmp_path):
    png = tmp_path / "plot.png"
    png.write_bytes(PIXEL)
    path = write_report(tmp_path / "report.html", "t", [Figure(png, caption="accuracy")])
    png.unlink()
    page = path.read_text(encoding="utf-8")
    embedded = re.search(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert embedded is not None and base64.b64decode(embedded.group(1)) == PIXEL
    assert "<figcaption>accuracy</figcaption>" in page
    assert not (tmp_path / "report.html.tmp").exists()


def test_bad_parts_are_refused(tmp_path):
    with pytest.raises(ValueError, match="2 cells for 3 columns"):
        Table(["a", "b", "c"], [["1", "2"]])
    text = tmp_path / "plot.png"
    text.write_text("not an image")
    with pytest.raises(ValueError, match="not a PNG"):
        render_report("t", [Figure(text)])
