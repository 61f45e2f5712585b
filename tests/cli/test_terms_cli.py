"""`tokenmask terms` end to end: the bundled plays' terms, the file that --mask-terms reads and
`stats` checks (terms selected first), bad input (exit code 2, one line, no traceback)."""

from __future__ import annotations

import json

import pytest

from tokenmask.cli.main import main


def test_terms_of_the_plays(capsys, tmp_path):
    output = tmp_path / "terms.txt"
    assert main(["terms", "--top", "40", "--output", str(output), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    # 834,006 words and 181,754 punctuation marks: min_count round(1,015,760 / 100,000) = 10
    assert data["words"] == 834_006 and data["min_count"] == 10 and data["background"].startswith("wordfreq ")
    assert data["output"] == str(output) and data["background_words"] is None
    terms = [entry["term"] for entry in data["entries"]]
    assert len(terms) == 40 and {"thou", "thee", "thy", "hath", "doth"} <= set(terms[:10])
    assert output.read_text(encoding="utf-8").splitlines() == terms
    scores = [entry["score"] for entry in data["entries"]]
    assert scores == sorted(scores, reverse=True) and scores[-1] >= 1
    assert main(["terms", "--top", "40", "--show", "5", "--output", str(output)]) == 0  # the table
    out = capsys.readouterr().out
    assert "background per million" in out and "hath" in out and f"wrote 40 terms to {output}" in out
    assert terms[5] not in out  # only the best 5 are shown


def test_the_terms_file_is_masked_first_and_stats_agrees(plays_file, capsys, tmp_path):
    corpus, terms = str(plays_file(3000)), tmp_path / "terms.txt"
    assert main(["terms", corpus, "--top", "30", "--output", str(terms), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)["entries"]
    assert len(terms.read_text(encoding="utf-8").splitlines()) == len(found) == 30
    assert main(["stats", corpus, "--max-tokens", "20000", "--mask-terms", str(terms), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    rates = {row["name"]: row for row in data["rates"]}
    assert data["term_targets"] == rates["targets in terms"]["count"] > 100
    # terms first: every unit holding a term is selected, the others at q (both within their intervals)
    assert rates["term units selected (all, first)"]["rate"] == 1.0 and rates["term units selected (all, first)"]["consistent"]
    assert rates["other units selected (at q per row)"]["consistent"]
    assert rates["targets in terms"]["rate"] > 3 * rates["eligible tokens in terms"]["rate"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["terms", "/no/such/corpus.txt"], "/no/such/corpus.txt: no such file, folder or matching pattern"),
        (["terms", "EMPTY"], "holds no words"),
        (["terms", "SMALL"], "occurs 3 times or more (8 words read)"),
        (["terms", "SMALL", "--background", "/no/such/background.txt"], "the background corpus: /no/such/background.txt"),
        (["terms", "SMALL", "--min-count", "2", "--background", "BINARY"], "the background corpus: "),
        (["terms", "SMALL", "--min-count", "2", "--background", "EMPTY"], "holds no words"),
        (["terms", "--top", "0"], "top must be >= 1; got 0"),
        (["terms", "--max-words", "4"], "max_words must be in [1, 3]; got 4"),
        (["terms", "--show", "0"], "show must be >= 1; got 0"),
        (["terms", "SMALL", "--output", "SMALL"], "is a file of the corpus or the background"),
    ],
)
def test_bad_input_exits_2_with_one_clear_line(argv, message, capsys, tmp_path):
    (tmp_path / "empty.txt").write_text("\n", encoding="utf-8")
    (tmp_path / "small.txt").write_text("to be or not to be, zorblax zorblax\n", encoding="utf-8")
    (tmp_path / "binary.txt").write_bytes(b"\x00\x01\x02 binary")
    places = {name: str(tmp_path / f"{name.lower()}.txt") for name in ("EMPTY", "SMALL", "BINARY")}
    assert (
        main([places.get(a, a) for a in argv] + (["--output", str(tmp_path / "out.txt")] if "--output" not in argv else [])) == 2
    )
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out.txt").exists()
