"""``tokenmask study`` end to end on a tiny model: killed (SIGKILL) mid-study and resumed; bad input; fine-tuning."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

import tokenmask
from tokenmask.cli.main import main
from tokenmask.experiments.plan import cell_digest, plan_digest, shared_part, shared_plan
from tokenmask.experiments.study import GROWING, StudyExperiment, study_config

STEPS = 24


def study_argv(corpus: Path, tokenizer: Path, output: Path, *extra: str) -> list[str]:
    return [
        "study", str(corpus), "--output", str(output), "--tokenizer", str(tokenizer), "--preset", "bert-tiny",
        "--strategies", "token,whole_word", "--rates", "0.15,0.3", "--max-steps", str(STEPS), "--save-every", "4",
        "--eval-every", "8", "--batch-size", "4", "--max-length", "32", "--cpu", "--seed", "3", *extra,
    ]  # fmt: skip


def environment() -> dict[str, str]:
    """This checkout's tokenmask, one thread (the test's process trains beside it), unbuffered."""
    source = str(Path(tokenmask.__file__).resolve().parents[1])
    existing = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": source + (os.pathsep + existing if existing else ""), "OMP_NUM_THREADS": "1",
            "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}  # fmt: skip


def logged_steps(run: Path) -> int:
    path = run / "metrics.jsonl"
    return path.read_text(encoding="utf-8").count('"loss"') if path.exists() else 0


def kill_when_logged(argv: list[str], run: Path, *, steps: int, log: Path) -> None:
    """Start ``argv`` (this checkout's python) and SIGKILL it once ``run`` has logged ``steps`` steps:
    no handler, no clean-up. Fails if it ended before, or did not get there in 4 minutes."""
    with log.open("w") as written:
        process = subprocess.Popen(argv, env=environment(), stdout=written, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 240
        while logged_steps(run) < steps and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert process.poll() is None, log.read_text()
        process.kill()
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def fingerprint(folder: Path) -> dict[str, tuple[int, str]]:
    """Every file under ``folder``: its modification time (ns) and content hash."""
    return {
        str(p.relative_to(folder)): (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in sorted(folder.rglob("*")) if p.is_file()
    }  # fmt: skip


def test_a_study_killed_mid_cell_resumes_without_redoing_finished_cells(corpus_and_tokenizer, tmp_path, capsys, one_thread):
    corpus, tokenizer = corpus_and_tokenizer
    output = tmp_path / "study"
    cells = output / "cells"
    first, second = cells / "token-0.15-bert-seed3", cells / "token-0.3-bert-seed3"
    argv = [sys.executable, "-m", "tokenmask", *study_argv(corpus, tokenizer, output)]
    kill_when_logged(argv, second / "pretrain", steps=9, log=tmp_path / "killed.log")
    assert (first / "cell.json").exists() and not (second / "cell.json").exists()
    saved = json.loads((output / "study.json").read_text())
    assert not saved["complete"] and [c.get("status") for c in saved["cells"]][1:] == ["pending"] * 3
    before = fingerprint(first)

    assert main([*study_argv(corpus, tokenizer, output), "--resume"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "study: 4 cells: 2 strategies x 2 rates x 1 corruption x 1 seed" in printed and "1 finished before, kept" in printed
    assert "cell 1/4" not in printed and "cell 2/4 token-0.3-bert-seed3: started" in printed
    assert "resuming from " in printed and printed.count("resuming from ") == 1  # the interrupted cell continues
    assert fingerprint(first) == before  # the finished cell is untouched
    study = json.loads((output / "study.json").read_text())
    assert study["complete"] and [c["name"] for c in study["cells"]] == [
        "token-0.15-bert-seed3", "token-0.3-bert-seed3", "whole_word-0.15-bert-seed3", "whole_word-0.3-bert-seed3"
    ]  # fmt: skip
    assert study["cells"][0] == json.loads((first / "cell.json").read_text())
    for cell in study["cells"]:
        assert cell["steps"] == STEPS and [p["step"] for p in cell["curve"]] == [0, 8, 16, 24]
        assert (cell["own"] is None) == cell["name"].startswith("token")  # whole_word is also scored on its own masks
    records = [json.loads(line) for line in (second / "pretrain" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if "loss" in r] == list(range(1, STEPS + 1))  # each step once
    # every cell on the same common masks: the same number of targets
    assert len({cell["common"]["targets"] for cell in study["cells"]}) == 1
    page = (output / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 2 and "whole_word-0.3-bert-seed3" in page


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--strategies", "token,nonsense"], "strategies must be one of token, whole_word, span, ngram"),
        (["--rates", "0.15,1.5"], r"rates must be in (0, 1]; got 1.5"),
        (["--rates", "0"], r"rates must be in (0, 1]; got 0.0"),
        (["--strategies", ","], "the grid is empty: give at least one value for strategies"),
        (["--corruption", "bert,none"], "corruption must be one of bert, mask-only; got 'none'"),
        (["--rate-ends", "soon"], "rate_ends: expected comma-separated numbers or 'none'"),
        (["--jobs", "0"], "jobs must be >= 1; got 0"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, capsys, extra, message):
    output = tmp_path / "study"
    assert main(["study", "--output", str(output), "--max-steps", "1", *extra]) == 2
    error = capsys.readouterr().err
    assert error.startswith("tokenmask study: error: ") and message in error and error.count("\n") == 1
    assert not output.exists()


def test_a_new_study_refused_by_its_first_cell_leaves_no_study_behind(tmp_path, capsys):
    output = tmp_path / "study"
    argv = ["study", str(tmp_path / "missing.txt"), "--output", str(output), "--max-steps", "1", "--strategies", "token"]
    assert main(argv) == 2
    assert "missing.txt" in capsys.readouterr().err
    assert not (output / "study.json").exists() and not list(output.rglob("config.yaml"))


def test_resume_on_a_study_of_other_settings_is_refused(tmp_path, capsys):
    output = tmp_path / "study"
    output.mkdir()
    plan = study_config({"output": str(output), "max_steps": 1, "strategies": "token", "rates": "0.15,0.3"}).plan()
    (output / "study.json").write_text(json.dumps({"plan": plan, "cells": []}))
    grid = ["--strategies", "span", "--rates", "0.15"]  # another grid is allowed (axes may grow or shrink), another length not
    assert main(["study", "--output", str(output), "--max-steps", "2", *grid, "--resume"]) == 2
    error = capsys.readouterr().err
    assert "--resume: " in error and "holds a study of another plan (settings (max_steps)): rerun with its settings" in error
    assert [p.name for p in output.iterdir()] == ["study.json"]
    assert main(["study", "--output", str(output), "--max-steps", "1", "--strategies", "span"]) == 2
    assert "already holds a study: pass --resume" in capsys.readouterr().err


def test_a_study_replays_from_its_config_yaml(corpus_and_tokenizer, tmp_path, capsys, one_thread):
    corpus, tokenizer = corpus_and_tokenizer
    first = tmp_path / "first"
    argv = study_argv(corpus, tokenizer, first, "--jobs", "1")
    argv[argv.index("--max-steps") + 1] = "2"
    argv[argv.index("--strategies") + 1] = "token"
    argv[argv.index("--rates") + 1] = "0.3"
    assert main(argv) == 0
    settings = yaml.safe_load((first / "config.yaml").read_text())
    assert (settings["strategies"], settings["rates"], settings["max_steps"], settings["seed"]) == (["token"], [0.3], 2, 3)
    again = tmp_path / "again"
    assert main(["study", "--config", str(first / "config.yaml"), "--output", str(again)]) == 0
    capsys.readouterr()
    replayed = StudyExperiment(study_config({**settings, "output": str(again)}))
    assert json.loads((again / "study.json").read_text())["plan"] == replayed.plan()
    assert json.loads((again / "study.json").read_text())["plan"] == json.loads((first / "study.json").read_text())["plan"]
    (cell,) = json.loads((again / "study.json").read_text())["cells"]
    assert cell["common"] == json.loads((first / "study.json").read_text())["cells"][0]["common"]  # the same run again


def two_step_argv(corpus: Path, tokenizer: Path, output: Path, strategies: str) -> list[str]:
    """A study of ``strategies`` at 30%, 2 steps a cell, no forecast: for the tests of what resumes keep."""
    argv = study_argv(corpus, tokenizer, output, "--no-estimate")
    argv[argv.index("--strategies") + 1], argv[argv.index("--rates") + 1] = strategies, "0.3"
    argv[argv.index("--max-steps") + 1] = "2"
    return argv


def test_terms_cells_mask_the_terms_found_in_the_corpus_kept_for_the_resumes(corpus_and_tokenizer, tmp_path, capsys, one_thread):
    corpus, tokenizer = corpus_and_tokenizer
    output = tmp_path / "study"
    argv = two_step_argv(corpus, tokenizer, output, "terms")
    assert main(argv) == 0
    found = (output / "terms.txt").read_text().split("\n")
    printed = " ".join(capsys.readouterr().out.split())
    assert f"terms: {len(found) - 1} found in the corpus against wordfreq" in printed and found[0] in printed
    run = yaml.safe_load((output / "cells" / "terms-0.3-bert-seed3" / "pretrain" / "config.yaml").read_text())
    assert (run["strategy"], run["mask_terms"]) == ("whole_word", str(output / "terms.txt"))
    study = json.loads((output / "study.json").read_text())
    assert study["plan"]["terms"] == hashlib.sha256((output / "terms.txt").read_bytes()).hexdigest()[:16]
    assert main([*argv, "--resume"]) == 0  # the terms file of the first start: the same plan
    capsys.readouterr()
    (output / "terms.txt").write_text("thou\nthee\n")
    marker = (output / "cells" / "terms-0.3-bert-seed3" / "cell.json").read_text()
    assert main([*argv, "--resume"]) == 2  # other terms than the cells selected
    error = capsys.readouterr().err
    assert f"--resume: {output / 'terms.txt'} holds other terms than the 'terms' cells of {output} selected first" in error
    assert (output / "cells" / "terms-0.3-bert-seed3" / "cell.json").read_text() == marker
    (output / "terms.txt").unlink()  # as if given with --terms-file, and not given again
    assert main([*argv, "--resume"]) == 2
    assert "selected the terms of a file given with --terms-file first: give it again" in capsys.readouterr().err
    assert not (output / "terms.txt").exists()  # refused before the corpus's terms were found again


def markers(output: Path) -> dict[str, str]:
    return {path.parent.name: path.read_text() for path in sorted((output / "cells").glob("*/cell.json"))}


def test_a_resumed_study_adds_and_drops_the_terms_cells_and_keeps_the_others(corpus_and_tokenizer, tmp_path, capsys, one_thread):
    corpus, tokenizer = corpus_and_tokenizer
    output = tmp_path / "study"
    argv = two_step_argv(corpus, tokenizer, output, "token")
    assert main(argv) == 0
    token = markers(output)
    argv[argv.index("--strategies") + 1] = "token,terms"
    assert main([*argv, "--resume"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert (
        "1 finished before, kept" in printed and "the plan changed along its axes (grid (strategies), terms (on now))" in printed
    )
    both = markers(output)
    assert (
        list(both) == ["terms-0.3-bert-seed3", "token-0.3-bert-seed3"]
        and both["token-0.3-bert-seed3"] == token["token-0.3-bert-seed3"]
    )
    argv[argv.index("--strategies") + 1] = "token"
    assert main([*argv, "--resume"]) == 0  # the terms cells dropped: the token cell kept
    study = json.loads((output / "study.json").read_text())
    assert "terms" not in study["plan"] and [cell["name"] for cell in study["cells"]] == ["token-0.3-bert-seed3"]
    argv[argv.index("--strategies") + 1] = "token,terms"
    assert main([*argv, "--resume"]) == 0  # and added again: both kept
    assert "2 finished before, kept" in " ".join(capsys.readouterr().out.split())
    assert markers(output) == both


def test_terms_dropped_and_added_again_must_be_the_terms_the_cells_selected(corpus_and_tokenizer, tmp_path, capsys, one_thread):
    corpus, tokenizer = corpus_and_tokenizer
    output, mine, other = tmp_path / "study", tmp_path / "mine.txt", tmp_path / "other.txt"
    mine.write_text("king\nlord\n")
    other.write_text("queen\n")
    argv = two_step_argv(corpus, tokenizer, output, "token,terms")
    assert main([*argv, "--terms-file", str(mine)]) == 0
    assert (output / "terms.txt").read_text() == "king\nlord\n"  # kept beside the cells
    both = markers(output)
    argv[argv.index("--strategies") + 1] = "token"
    assert main([*argv, "--resume"]) == 0  # dropped: the record's plan holds no terms now
    argv[argv.index("--strategies") + 1] = "token,terms"
    capsys.readouterr()
    assert main([*argv, "--resume", "--terms-file", str(other)]) == 2
    assert f"{other} holds other terms than the 'terms' cells of {output} selected first" in capsys.readouterr().err
    assert main([*argv, "--resume"]) == 0  # without the file: the copy, the same terms
    assert "2 finished before, kept" in " ".join(capsys.readouterr().out.split())
    assert markers(output) == both and (output / "terms.txt").read_text() == "king\nlord\n"


def test_a_terms_study_recorded_before_cells_had_inputs_resumes(corpus_and_tokenizer, tmp_path, capsys, one_thread):
    """Before cells had inputs, the terms file's fingerprint was in every cell's identity: the plan's
    shared part (the growing axes out) with its ``terms`` entry in."""
    corpus, tokenizer = corpus_and_tokenizer
    output = tmp_path / "study"
    argv = two_step_argv(corpus, tokenizer, output, "token,terms")
    assert main(argv) == 0
    config = study_config({**yaml.safe_load((output / "config.yaml").read_text()), "terms_file": str(output / "terms.txt")})
    experiment = StudyExperiment(config)
    plan = json.loads((output / "study.json").read_text())["plan"]
    then = shared_plan(plan, [path for path in GROWING if path != ("terms",)])
    assert "terms" in then
    for cell in experiment.cells():
        marker = output / cell.folder / "cell.json"
        former = plan_digest({"plan": then, "cell": dict(cell.coordinates)})
        marker.write_text(json.dumps({**json.loads(marker.read_text()), "identity": former}))
    before = {name: json.loads(text) for name, text in markers(output).items()}
    assert main([*argv, "--resume"]) == 0
    assert "2 finished before, kept" in " ".join(capsys.readouterr().out.split())
    after = {name: json.loads(text) for name, text in markers(output).items()}
    shared = shared_part(experiment)
    assert {name: marker["identity"] for name, marker in after.items()} == {
        cell.folder.split("/")[-1]: cell_digest(shared, cell) for cell in experiment.cells()
    }
    assert all(after[name] == {**before[name], "identity": after[name]["identity"]} for name in before)  # nothing else changed
