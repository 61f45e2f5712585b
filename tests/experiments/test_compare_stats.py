"""The comparison's numbers, by hand: t quantiles, paired intervals, drops under corruption."""

import pytest

from tokenmask.experiments.compare_stats import Paired, summarize, t_quantile_975


def test_t_quantiles():
    assert t_quantile_975(1) == 12.706 and t_quantile_975(4) == 2.776 and t_quantile_975(30) == 2.042
    # beyond the table, the expansion meets the tabled 2.021 (40) and 2.000 (60) to 1e-3
    assert t_quantile_975(40) == pytest.approx(2.021, abs=1e-3) and t_quantile_975(60) == pytest.approx(2.000, abs=1e-3)
    with pytest.raises(ValueError):
        t_quantile_975(0)


def test_paired_interval_by_hand():
    # differences 0.02, 0.04: mean 0.03, sd 0.014142; half-width 12.706 * 0.014142 / sqrt(2) = 0.12706
    noise = Paired.of([0.02, 0.04])
    assert noise.mean == pytest.approx(0.03) and noise.sd == pytest.approx(0.0141421, rel=1e-5)
    assert noise.low == pytest.approx(-0.09706, abs=1e-5) and noise.high == pytest.approx(0.15706, abs=1e-5)
    assert noise.within_noise and noise.describe() == "+0.0300 [-0.0971, +0.1571] noise"
    # differences -0.05, -0.04, -0.06: mean -0.05, sd 0.01; half-width 4.303 * 0.01 / sqrt(3) = 0.024843
    worse = Paired.of([-0.05, -0.04, -0.06])
    assert worse.high == pytest.approx(-0.025157, abs=1e-6) and worse.within_noise is False
    assert worse.describe() == "-0.0500 [-0.0748, -0.0252] worse"
    single = Paired.of([0.01])
    assert single.within_noise is None and single.describe() == "+0.0100 (1 seed: no interval)"


def cell(arm, seed, clean, typo, size="100"):
    return {"size": size, "arm": arm, "seed": seed, "scores": {"clean": {"macro_f1": clean}, "typo-0.1": {"macro_f1": typo}}}


def test_summary_rows_drops_and_pairs():
    cells = [
        cell("rate-0", 0, 0.80, 0.60),
        cell("rate-0.1", 0, 0.78, 0.70),
        cell("rate-0", 1, 0.70, 0.50),
        cell("rate-0.1", 1, 0.72, 0.66),
    ]
    rows = {(r.arm, r.set): r for r in summarize(cells, ["macro_f1"])}
    base, augmented = rows["rate-0", "clean"], rows["rate-0.1", "clean"]
    assert base.values == (0.80, 0.70) and base.mean == pytest.approx(0.75) and base.paired is None
    assert augmented.paired.n == 2 and augmented.paired.mean == pytest.approx(0.0)  # (-0.02 + 0.02) / 2
    typo = rows["rate-0.1", "typo-0.1"]
    assert typo.mean == pytest.approx(0.68) and typo.drop == pytest.approx(0.75 - 0.68)
    assert typo.relative_drop == pytest.approx(0.07 / 0.75)
    assert typo.paired.mean == pytest.approx(0.13)  # (0.70 - 0.60 + 0.66 - 0.50) / 2
    assert rows["rate-0", "typo-0.1"].drop == pytest.approx(0.20)
    assert typo.to_dict()["paired"]["within_noise"] is (typo.paired.low <= 0 <= typo.paired.high)


def test_no_baseline_no_pairs():
    rows = summarize([cell("rate-0.1", 0, 0.7, 0.6), cell("rate-0.1", 0, 0.7, 0.6, size="all")], ["macro_f1"])
    assert all(r.paired is None for r in rows) and {r.size for r in rows} == {"100", "all"}
