"""compare-augment: one run per (rate, seed), mean ± std per rate, printed, saved and plotted."""

import json

import pytest

from tokenmask.cli.main import main
from tokenmask.recipes.compare import AugmentComparison, RateSummary, check_rates


def test_rate_summary_by_hand():
    summary = RateSummary.of(0.1, [0.80, 0.84])
    assert summary.mean == pytest.approx(0.82)
    assert summary.std == pytest.approx(0.0282843, rel=1e-5)  # sqrt(((-.02)^2 + .02^2) / (2 - 1))
    assert RateSummary.of(0.0, [0.7]).std == 0.0
    table = AugmentComparison("macro_f1", (summary, RateSummary.of(0.0, [0.7])), "out").table()
    assert table.splitlines() == [
        "rate 0.1  : macro_f1 0.8200 ± 0.0283 over 2 seeds",
        "rate 0    : macro_f1 0.7000 ± 0.0000 over 1 seed",
    ]


@pytest.mark.parametrize(
    "rates, seeds, message",
    [([], 3, "at least one"), ([0.1, 1.0], 3, "in [0, 1)"), ([0.1, 0.1], 3, "each rate once"), ([0.1], 0, "seeds must be >= 1")],
)
def test_bad_rates_and_seeds(rates, seeds, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace(")", r"\)")):
        check_rates(rates, seeds)


def test_cli_compare_augment(tiny_mlm_folder, reviews_csv, tmp_path, capsys):
    out = tmp_path / "compare"
    argv = ["compare-augment", str(reviews_csv), "--model", str(tiny_mlm_folder), "--output", str(out), "--group-by", "movie",
            "--rates", "0,0.2", "--seeds", "2", "--max-steps", "3", "--eval-every", "3", "--batch-size", "16",
            "--max-length", "32", "--lr", "5e-3"]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    saved = json.loads((out / "compare.json").read_text())
    assert saved["metric"] == "macro_f1" and [r["rate"] for r in saved["rates"]] == [0.0, 0.2]
    for entry in saved["rates"]:
        runs = [json.loads((out / f"rate-{entry['rate']:g}" / f"seed-{seed}" / "results.json").read_text()) for seed in (0, 1)]
        assert entry["values"] == [run["final"]["macro_f1"] for run in runs]
        assert [run["config"]["augment_rate"] for run in runs] == [entry["rate"]] * 2
        assert [run["config"]["seed"] for run in runs] == [0, 1]
        summary = RateSummary.of(entry["rate"], entry["values"])
        assert f"rate {entry['rate']:<5g}: macro_f1 {summary.mean:.4f} ± {summary.std:.4f} over 2 seeds" in printed
    assert (out / "compare.png").read_bytes().startswith(b"\x89PNG")


def test_compare_needs_a_run_length_and_good_rates(tmp_path, capsys):
    assert main(["compare-augment", "--output", str(tmp_path / "o"), "--max-steps", "1", "--rates", "0,x"]) == 2
    assert "comma-separated numbers" in capsys.readouterr().err
    assert main(["compare-augment", "--output", str(tmp_path / "o"), "--rates", "0,0.1"]) == 2
    assert "give the length of each run: --epochs, --max-steps, --max-tokens or --max-time" in capsys.readouterr().err
