"""`tokenmask pmi`, and --strategy pmi / --mask-terms on mask and stats: output, rates, bad input."""

from __future__ import annotations

import json

import pytest

from tokenmask.cli.main import main


def test_pmi_shows_the_vocabulary_of_the_plays(capsys):
    assert main(["pmi", "--top", "3", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["entries"]) == 3 and data["words"] > 900_000 and data["cache"]
    assert data["min_count"] == 11 and data["vocab_size"] == data["words"] // 4000  # scaled to the corpus
    assert data["entries"][0]["pmi"] >= data["entries"][1]["pmi"] and len(data["entries"][0]["words"]) == 2
    assert main(["pmi", "--top", "2"]) == 0  # the table, from the cache now
    out = capsys.readouterr().out
    assert "2-grams" in out and "loaded" in out


def test_stats_pmi_selects_units_at_the_rate(capsys):
    assert main(["stats", "--max-tokens", "30000", "--strategy", "pmi", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    units = data["rates"][0]
    assert units["name"] == "selected units" and units["consistent"]
    assert data["special_tokens_hit"] == 0 and data["unit_length_kind"] == "words"
    assert max(int(row["name"].split()[1]) for row in data["unit_lengths"]) >= 2  # n-grams were masked


def test_terms_on_mask_and_stats(capsys, tmp_path):
    terms = tmp_path / "terms.txt"
    terms.write_text("Falstaff\nmy lord\n", encoding="utf-8")
    argv = ["mask", "--mask-terms", str(terms), "--mlm-probability", "1", "--json", "Sir", "John", "Falstaff,", "my", "LORD"]
    assert main(argv) == 0
    (example,) = json.loads(capsys.readouterr().out)["examples"]
    assert all(outcome != "none" for outcome in example["outcomes"][1:-1])  # rate 1: everything, the terms whole
    assert main(["stats", "--max-tokens", "30000", "--mask-terms", str(terms), "--strategy", "span", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    rates = {row["name"]: row for row in data["rates"]}
    assert data["term_targets"] == rates["targets in terms"]["count"] > 0
    # terms first: every term unit selected, the other units at q (both checked), the token share shown
    assert rates["term units selected (all, first)"]["rate"] == 1.0
    assert rates["term units selected (all, first)"]["consistent"] and rates["other units selected (at q per row)"]["consistent"]
    assert not rates["selected tokens (max(pE, P) per row)"]["checked"]
    assert rates["targets in terms"]["rate"] > 3 * rates["eligible tokens in terms"]["rate"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["mask", "x", "--mask-terms", "/no/such/terms.txt"], "cannot read the terms file"),
        (["stats", "--mask-terms", "EMPTY"], "holds no term"),
        (["pmi", "SMALL"], "yields no PMI n-gram"),
        (["stats", "SMALL", "--strategy", "pmi"], "yields no PMI n-gram"),
        (["pmi", "--top", "0"], "top must be >= 1; got 0"),
        (["pmi", "--pmi-min-count", "1"], "pmi_min_count must be >= 2"),
    ],
)
def test_bad_input_exits_2_with_one_clear_line(argv, message, capsys, tmp_path):
    (tmp_path / "empty.txt").write_text("\n", encoding="utf-8")
    (tmp_path / "small.txt").write_text("to be or not to be\n", encoding="utf-8")
    places = {"EMPTY": str(tmp_path / "empty.txt"), "SMALL": str(tmp_path / "small.txt")}
    assert main([places.get(a, a) for a in argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
