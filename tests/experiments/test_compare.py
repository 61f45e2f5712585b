"""compare-augment: cells of (training size, arm, seed), scored clean and corrupted, resumable, reported."""

import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

import tokenmask
from tokenmask.cli.main import main
from tokenmask.experiments.compare import (
    Arm,
    CompareConfig,
    CompareExperiment,
    ComparePlan,
    compare_config,
)
from tokenmask.experiments.compare_report import write_compare_report
from tokenmask.experiments.compare_stats import summarize
from tokenmask.experiments.sweep import check_folder
from tokenmask.labelled.robustness import Corruption
from tokenmask.recipes.config import FINETUNE_LOOP, FinetuneConfig

TINY_RUN = ["--group-by", "movie", "--batch-size", "16", "--max-length", "32", "--lr", "5e-3", "--cpu"]


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"rates": ()}, "the grid is empty: give at least one value for rates"),
        ({"rates": (0.1, 1.0)}, "rates must be in [0, 1); got 1.0"),
        ({"rates": (0.1, 0.1)}, "rates: each value once, please"),
        ({"seeds": 0}, "seeds must be >= 1; got 0"),
        ({"train_sizes": ()}, "give at least one value for train sizes"),
        ({"train_sizes": (0,)}, "train sizes must be whole numbers >= 1 or 'all'; got 0"),
        ({"train_sizes": (100, 100)}, "train sizes: each value once"),
    ],
)
def test_bad_plans_are_refused_naming_the_axis(changes, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace(")", r"\)")):
        ComparePlan(**changes)


def test_plan_arms_sizes_and_refusals():
    plan = ComparePlan(rates=(0.0, 0.1), seeds=2, train_sizes=(100, None), adaptive=True)
    assert [a.name for a in plan.arms] == ["rate-0", "rate-0.1", "adaptive-0.1"] and plan.seed_list(5) == (5, 6)
    assert Arm(0.05, adaptive=True).name == "adaptive-0.05"
    assert compare_config({"output": "o", "max_steps": 1, "train_sizes": "100, 300,all"}).plan.train_sizes == (100, 300, None)
    with pytest.raises(ValueError, match="whole numbers or 'all'"):
        compare_config({"output": "o", "max_steps": 1, "train_sizes": "100,half"})
    with pytest.raises(ValueError, match="starts from a rate above 0"):
        ComparePlan(rates=(0.0,), adaptive=True)
    assert ComparePlan(robustness=True, corruptions=("typo=0.1,0.2",)).corruption_sets == (
        Corruption("typo", 0.1), Corruption("typo", 0.2)
    )  # fmt: skip


def fake_comparison(folder: Path, *, complete: bool = True) -> Path:
    """A compare.json as compare_augment writes it, with made-up scores (no training)."""
    cells = []
    for size, examples in (("100", 100), ("all", 380)):
        for seed in (0, 1, 2):
            for arm, gain in (("rate-0", 0.0), ("rate-0.1", 0.01 * (seed - 1)), ("adaptive-0.1", 0.05)):
                clean = 0.6 + 0.1 * (size == "all") + 0.02 * seed + gain
                scores = {"clean": {"accuracy": clean + 0.05, "macro_f1": clean}}
                scores |= {f"typo-{r:g}": {"accuracy": clean, "macro_f1": clean - r} for r in (0.05, 0.1)}
                scores["unk-0.2"] = {"accuracy": clean, "macro_f1": clean - 0.1 + gain}
                cells.append({"size": size, "examples": examples, "arm": arm, "rate": 0.1, "adaptive": arm.startswith("a"),
                              "seed": seed, "steps": 30, "seconds": 12.0, "divergence_warnings": 0, "scores": scores})  # fmt: skip
    plan = ComparePlan(rates=(0.0, 0.1), train_sizes=(100, None), adaptive=True, robustness=True,
                       corruptions=("typo=0.05,0.1", "unk=0.2"))  # fmt: skip
    content = {
        "metric": "macro_f1", "metrics": ["accuracy", "macro_f1"], "budget": "stops at 30 steps", "baseline": "rate-0",
        "test": "paired t", "plan": plan.to_dict(0), "config": {"model": "minilm"}, "complete": complete, "cells": cells,
        "summary": [row.to_dict() for row in summarize(cells, ["accuracy", "macro_f1"])],
    }  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "compare.json").write_text(json.dumps(content), encoding="utf-8")
    return folder


def test_report_from_compare_json_alone(tmp_path):
    comparison = write_compare_report(fake_comparison(tmp_path / "cmp"))
    page = (tmp_path / "cmp" / "report.html").read_text(encoding="utf-8")
    assert page.count('<img src="data:image/png;base64,') == 2 and "<script" not in page and "http" not in page
    for text in ("clean validation set", "corrupted validation sets", "macro_f1 mean ± sd", "relative drop", "adaptive-0.1",
                 "typo-0.05", "baseline", "paired t"):  # fmt: skip
        assert text in page, text
    # rate 0.1 differs from rate 0 by -0.01, 0, +0.01 over seeds: within noise; adaptive by +0.05 every seed: better
    assert "+0.0000 [-0.0248, +0.0248] noise" in page and "+0.0500 [+0.0500, +0.0500] better" in page
    assert "Incomplete" not in page
    table = comparison.table()
    line = next(line.split() for line in table.splitlines() if line.startswith("unk-0.2") and " all " in line)
    assert line[:9] == ["unk-0.2", "all", "rate-0", "0.7200", "±", "0.0200", "0.6200", "±", "0.0200"]  # accuracy, macro_f1
    assert line[9:] == ["+0.1000", "+13.9%", "baseline"]  # drop 0.1 from a clean mean of 0.72 (0.70, 0.72, 0.74)
    assert (tmp_path / "cmp" / "compare.png").exists() and (tmp_path / "cmp" / "robustness.png").exists()
    write_compare_report(fake_comparison(tmp_path / "part", complete=False))
    assert "Incomplete" in (tmp_path / "part" / "report.html").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "extra, message",
    [(["--max-steps", "1", "--rates", "0,x"], "comma-separated numbers"),
     (["--rates", "0,0.1"], "give the length of each run: --epochs, --max-steps, --max-tokens or --max-time"),
     (["--max-steps", "1", "--train-sizes", "10,ten"], "whole numbers or 'all'"),
     (["--max-steps", "1", "--corruptions", "typo=0.1"], "give --robustness too"),
     (["--max-steps", "1", "--robustness", "--corruptions", "blur=0.1"], "--corruptions: corruption kind must be one of typo"),
     (["--max-steps", "1", "--robustness", "--task", "tokens", "x.jsonl"], "not supported")],
)  # fmt: skip
def test_compare_refuses_bad_input_in_one_line(extra, message, tmp_path, capsys):
    assert main(["compare-augment", "--output", str(tmp_path / "o"), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_the_augmentation_rate_of_a_comparison_is_its_arms_not_a_flag(tmp_path, capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["compare-augment", "--output", str(tmp_path / "o"), "--max-steps", "1", "--augment-rate", "0.1"])
    assert stopped.value.code == 2 and "unrecognized arguments: --augment-rate" in capsys.readouterr().err


def environment() -> dict[str, str]:
    """This checkout's tokenmask for the subprocess, one thread, unbuffered."""
    source = str(Path(tokenmask.__file__).resolve().parents[1])
    existing = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": source + (os.pathsep + existing if existing else ""), "OMP_NUM_THREADS": "1",
            "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}  # fmt: skip


def test_killed_comparison_resumes_and_ends_complete(tiny_mlm_folder, reviews_csv, tmp_path):
    """The whole command through a subprocess: 2 sizes x 2 rates x 2 seeds, scored clean and on one
    corrupted set; killed (SIGKILL) once the first run is finished and the second has a checkpoint,
    then run again with --resume. The finished run is not redone, the cut one continues from its
    checkpoint, and compare.json ends complete with every run."""
    out = tmp_path / "cmp"
    command = [sys.executable, "-m", "tokenmask", "compare-augment", str(reviews_csv), "--model", str(tiny_mlm_folder),
               "--output", str(out), *TINY_RUN, "--rates", "0,0.2", "--seeds", "2", "--train-sizes", "40,all",
               "--max-steps", "6", "--save-every", "2", "--eval-every", "6", "--robustness", "--corruptions", "unk=0.3",
               "--no-keep-models", "--resume"]  # fmt: skip
    first, second = out / "size-40" / "rate-0" / "seed-0", out / "size-40" / "rate-0.2" / "seed-0"
    process = subprocess.Popen(command, env=environment(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while process.poll() is None and time.monotonic() < deadline:
            if (first / "cell.json").exists() and list((second / "checkpoints").glob("step-*")):
                break
            time.sleep(0.005)
        assert process.poll() is None, f"the comparison ended before it could be killed: {process.stderr.read()[-2000:]}"
    finally:
        process.kill()  # SIGKILL: no handler, no clean-up
        process.wait(timeout=30)
        process.stderr.close()
    partial = json.loads((out / "compare.json").read_text())
    assert not partial["complete"] and [c["arm"] for c in partial["cells"] if c["status"] == "finished"] == ["rate-0"]
    assert len(partial["cells"]) == 8 and partial["cells"][1] == {
        "name": "size-40/rate-0.2/seed-0", "size": "40", "seed": 0, "arm": "rate-0.2", "rate": 0.2, "adaptive": False,
        "status": "pending",
    }  # fmt: skip
    assert not (second / "cell.json").exists()
    finished = (first / "cell.json").stat().st_mtime_ns, (first / "metrics.jsonl").read_text()

    done = subprocess.run(command, env=environment(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert ((first / "cell.json").stat().st_mtime_ns, (first / "metrics.jsonl").read_text()) == finished  # not redone
    steps = [r["step"] for r in map(json.loads, (second / "metrics.jsonl").read_text().splitlines()) if "loss" in r]
    assert steps == list(range(1, 7))  # continued from its checkpoint: every step logged once
    saved = json.loads((out / "compare.json").read_text())
    assert saved["complete"] and saved["metric"] == "macro_f1" and saved["plan"]["train_sizes"] == ["40", "all"]
    assert [(c["size"], c["seed"], c["arm"]) for c in saved["cells"]] == [
        (size, seed, arm) for size in ("40", "all") for seed in (0, 1) for arm in ("rate-0", "rate-0.2")
    ]
    for cell in saved["cells"]:
        folder = out / f"size-{cell['size']}" / cell["arm"] / f"seed-{cell['seed']}"
        run = json.loads((folder / "results.json").read_text())
        assert cell["scores"]["clean"]["macro_f1"] == run["final"]["macro_f1"] and set(cell["scores"]) == {"clean", "unk-0.3"}
        assert (run["config"]["augment_rate"], run["config"]["seed"], cell["steps"]) == (cell["rate"], cell["seed"], 6)
        assert cell["examples"] == 40 if cell["size"] == "40" else cell["examples"] > 300  # 400 reviews, ~10% held out
        assert json.loads((folder / "cell.json").read_text()) == cell
        assert not [name for name in ("model", "best", "checkpoints") if (folder / name).exists()]  # --no-keep-models
    paired = [r for r in saved["summary"] if r["arm"] == "rate-0.2" and r["metric"] == "macro_f1"]
    assert len(paired) == 4 and all(r["paired"]["n"] == 2 for r in paired)
    assert "clean validation set" in done.stdout and "corrupted validation sets" in done.stdout
    said = done.stderr + done.stdout
    assert "cell 2/8 size-40/rate-0.2/seed-0: clean macro_f1" in said and "1 finished before, kept" in said
    assert "cell 1/8 size-40/rate-0/seed-0: started" not in said  # not redone
    assert (out / "report.html").read_text().count("data:image/png") == 2


def test_the_cells_go_size_by_size_then_seed_then_arm(tmp_path):
    config = compare_config({"output": str(tmp_path), "max_steps": 3, "rates": "0,0.2", "augment_adaptive": True,
                             "seeds": 2, "train_sizes": "40,all", "seed": 4})  # fmt: skip
    cells = CompareExperiment(config).cells()
    assert [c.name for c in cells[:4]] == [
        "size-40/rate-0/seed-4", "size-40/rate-0.2/seed-4", "size-40/adaptive-0.2/seed-4", "size-40/rate-0/seed-5"
    ]  # fmt: skip
    assert cells[2].coordinates == {"size": "40", "seed": 4, "arm": "adaptive-0.2", "rate": 0.2, "adaptive": True}
    assert len(cells) == 2 * 2 * 3 and cells[-1].folder == "size-all/adaptive-0.2/seed-5"


def test_compare_settings_replay_it_and_leave_out_what_each_run_sets(tmp_path):
    config = compare_config({"output": str(tmp_path), "max_steps": 3, "rates": "0,0.1", "robustness": True,
                             "corruptions": ["unk=0.2"], "keep_models": False, "jobs": 2})  # fmt: skip
    settings = CompareExperiment(config).settings()
    assert "augment_rate" not in settings and settings["augment_adaptive"] is False
    assert (settings["rates"], settings["corruptions"], settings["keep_models"]) == ([0.0, 0.1], ["unk=0.2"], False)
    assert compare_config(settings) == config
    with pytest.raises(ValueError, match="give them with --rates"):
        compare_config({**settings, "augment_rate": 0.1})
    with pytest.raises(ValueError, match="give the length of each run"):
        compare_config({"output": str(tmp_path)})


def test_resume_refuses_a_comparison_of_another_plan_naming_what_differs(tmp_path):
    config = compare_config({"output": str(tmp_path), "max_steps": 3, "rates": "0,0.1", "robustness": True,
                             "corruptions": ["unk=0.2"]})  # fmt: skip
    experiment = CompareExperiment(config)
    (tmp_path / "compare.json").write_text(json.dumps({"plan": experiment.plan(), "cells": []}))
    check_folder(tmp_path, experiment, resume=True)
    lr = CompareExperiment(replace(config, base=config.base.with_loop(lr=1e-3)))
    with pytest.raises(ValueError, match=r"holds a comparison of another plan \(settings \(lr\)\)"):
        check_folder(tmp_path, lr, resume=True)
    sets = CompareExperiment(replace(config, plan=replace(config.plan, corruptions=("unk=0.3",))))
    with pytest.raises(ValueError, match=r"another plan \(robustness\)"):
        check_folder(tmp_path, sets, resume=True)
    with pytest.raises(ValueError, match="already holds a comparison: pass --resume"):
        check_folder(tmp_path, experiment, resume=False)
    check_folder(tmp_path, lr, resume=False, overwrite=True)  # --overwrite starts afresh


def test_a_comparison_needs_an_output(tmp_path):
    with pytest.raises(ValueError, match="--output is required"):
        CompareConfig(base=FinetuneConfig(loop=replace(FINETUNE_LOOP, max_steps=3)))


def test_a_comparison_replays_from_its_config_yaml(tiny_mlm_folder, reviews_csv, tmp_path, capsys):
    import yaml

    first, again = tmp_path / "first", tmp_path / "again"
    argv = ["compare-augment", str(reviews_csv), "--model", str(tiny_mlm_folder), "--output", str(first), *TINY_RUN,
            "--rates", "0,0.2", "--seeds", "1", "--train-sizes", "40", "--max-steps", "2", "--eval-every", "2",
            "--no-keep-models"]  # fmt: skip
    assert main(argv) == 0
    settings = yaml.safe_load((first / "config.yaml").read_text())
    assert (settings["rates"], settings["train_sizes"], settings["keep_models"], settings["max_steps"]) == (
        [0.0, 0.2],
        [40],
        False,
        2,
    )
    assert main(["compare-augment", "--config", str(first / "config.yaml"), "--output", str(again)]) == 0
    capsys.readouterr()
    records = [json.loads((folder / "compare.json").read_text()) for folder in (first, again)]
    assert records[0]["plan"] == records[1]["plan"] and records[1]["complete"]
    assert [c["scores"] for c in records[0]["cells"]] == [c["scores"] for c in records[1]["cells"]]  # the same runs again
