"""Runs that must stop cleanly: non-finite steps are skipped (and too many in a row stop the run);
SIGTERM / SIGINT save a checkpoint that --resume continues exactly."""

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace

import pytest
import torch
from safetensors.torch import load_file
from transformers import BertConfig, BertForMaskedLM

from tokenmask.train.checkpoint import newest_valid_checkpoint
from tokenmask.train.config import LoopConfig
from tokenmask.train.interrupt import Interrupted
from tokenmask.train.job import Job, NonFiniteSteps
from tokenmask.train.loop import train
from tokenmask.train.step import mlm_loss_sum


def make_batch(step):
    g = torch.Generator().manual_seed(step)
    ids = torch.randint(5, 100, (4, 12), generator=g)
    labels = torch.full_like(ids, -100)
    labels[:, 2:5] = ids[:, 2:5]
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}


class Tokenizer:
    """Enough of a tokenizer for a checkpoint folder."""

    def save_pretrained(self, folder):
        (folder / "tokenizer_config.json").write_text("{}")


def nan_job(bad_steps, checkpoint=None, before_step=lambda step, horizon: {}):
    """A tiny BERT (from ``checkpoint`` if given) whose loss is NaN on the (1-based) steps in ``bad_steps``."""
    torch.manual_seed(0)
    config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)
    model = BertForMaskedLM(config) if checkpoint is None else BertForMaskedLM.from_pretrained(checkpoint)
    calls = {"n": 0}

    def loss(model, batch):
        calls["n"] += 1
        value = mlm_loss_sum(model, batch)
        return value * float("nan") if calls["n"] in bad_steps else value

    def batches(skip, horizon):
        step = skip
        while True:
            yield make_batch(step)
            step += 1

    return Job(
        model=model, tokenizer=Tokenizer(), batches=batches, evaluate=lambda model, step, horizon: {"loss": 0.0}, loss=loss,
        before_step=before_step,
    )  # fmt: skip


def settings(tmp_path, **overrides):
    values = dict(output=str(tmp_path / "run"), max_steps=6, eval_every=100, save_every=2, lr=1e-3, cpu=True)
    return LoopConfig(**{**values, **overrides})


def records(tmp_path):
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if '"loss"' in line and "eval_loss" not in line]


def test_a_non_finite_step_is_skipped_and_logged(tmp_path):
    result = train(settings(tmp_path), lambda checkpoint, shard: nan_job({3}))
    assert result.steps == 6
    steps = records(tmp_path)
    assert [r["step"] for r in steps if "skipped" in r] == [3]
    assert all(torch.isfinite(p).all() for p in result.model.parameters())
    state = torch.load(newest_valid_checkpoint(tmp_path / "run" / "checkpoints") / "training_state.pt", weights_only=True)
    counts = {int(s["step"]) for s in state["optimizer"]["state"].values()}
    assert counts == {5}  # six steps, one without an update


def test_too_many_bad_steps_in_a_row_stop_the_run_and_keep_the_good_checkpoint(tmp_path):
    job = nan_job(set(range(4, 100)))  # from step 4 on
    with pytest.raises(NonFiniteSteps, match=r"stopped at step 6: 3 steps in a row .* the last good checkpoint is .*step-2"):
        train(settings(tmp_path, max_bad_steps=3), lambda checkpoint, shard: job)
    run = tmp_path / "run"
    assert [p.name for p in (run / "checkpoints").iterdir() if not p.name.startswith(".")] == ["step-2"]
    assert not (run / "model").exists()  # no final model from a diverged run
    saved = load_file(run / "checkpoints" / "step-2" / "model.safetensors")
    assert all(torch.isfinite(t).all() for t in saved.values())


@pytest.fixture(scope="module")
def corpus(plays_file):
    return plays_file(1200)


def pretrain_command(corpus, output, *extra):
    return [
        sys.executable, "-m", "tokenmask", "pretrain", str(corpus), "--output", str(output), "--preset", "bert-tiny",
        "--max-steps", "40", "--batch-size", "4", "--max-length", "32", "--eval-every", "1000", "--save-every", "1000",
        "--cpu", "--no-demo", "--seed", "5", *extra,
    ]  # fmt: skip


def logged_steps(output):
    path = output / "metrics.jsonl"
    return path.read_text().count('"loss"') if path.exists() else 0


def test_sigint_saves_a_checkpoint_that_resume_continues_exactly(tmp_path):
    def interrupt_at_step_5(step, horizon):
        if step == 4:  # before the 5th step: the signal arrives while it runs
            os.kill(os.getpid(), signal.SIGINT)
        return {}

    # step 5 is also an evaluation step: the evaluation runs before the stop (a resumed run would not redo it)
    whole = train(settings(tmp_path / "whole", max_steps=8, eval_every=5, save_every=100), lambda checkpoint, shard: nan_job(()))
    cut = settings(tmp_path / "cut", max_steps=8, eval_every=5, save_every=100)
    with pytest.raises(Interrupted, match=r"SIGINT at step 5: checkpoint saved in .*step-5; continue with --resume") as stop:
        train(cut, lambda checkpoint, shard: nan_job((), checkpoint, interrupt_at_step_5))
    assert stop.value.exit_code == 130
    resumed = train(replace(cut, resume=True), lambda checkpoint, shard: nan_job((), checkpoint))
    assert resumed.steps == 8
    for (name, expected), got in zip(whole.model.state_dict().items(), resumed.model.state_dict().values()):
        assert torch.equal(expected, got), name
    evaluated = [r["step"] for r in map(json.loads, (tmp_path / "cut" / "run" / "metrics.jsonl").read_text().splitlines())
                 if "eval_loss" in r]  # fmt: skip
    assert evaluated == [e["step"] for e in whole.evaluations] == [0, 5, 8]


def signalling_at(step_to_signal, checkpoint=None):
    """The NaN-free job whose evaluation at ``step_to_signal`` receives SIGTERM while it runs."""
    job = nan_job((), checkpoint)

    def evaluate(model, step, horizon):
        if step == step_to_signal:
            os.kill(os.getpid(), signal.SIGTERM)
        return {"loss": float(step)}

    return replace(job, evaluate=evaluate)


def test_a_signal_during_the_final_evaluation_stops_the_run_at_a_checkpoint(tmp_path):
    # after the last step no step checks for a signal: it must not be dropped (a study would go on to its next cell)
    whole = train(settings(tmp_path / "whole", save_every=100), lambda checkpoint, shard: nan_job(()))
    cut, before = settings(tmp_path / "cut", save_every=100), signal.getsignal(signal.SIGTERM)
    with pytest.raises(Interrupted, match=r"SIGTERM at step 6: checkpoint saved in .*step-6; continue with --resume"):
        train(cut, lambda checkpoint, shard: signalling_at(6, checkpoint))
    run = tmp_path / "cut" / "run"
    assert not (run / "model").exists()  # the run is not finished: no final model
    assert signal.getsignal(signal.SIGTERM) == before  # the handlers came back
    # a signal in the resumed run's evaluation stops it again, at the checkpoint it resumed from
    with pytest.raises(Interrupted, match=r"SIGTERM at step 6: checkpoint saved in .*step-6;"):
        train(replace(cut, resume=True), lambda checkpoint, shard: signalling_at(6, checkpoint))
    assert [p.name for p in (run / "checkpoints").iterdir() if not p.name.startswith(".")] == ["step-6"]
    resumed = train(replace(cut, resume=True), lambda checkpoint, shard: nan_job((), checkpoint))
    assert resumed.steps == 6 and (run / "model" / "model.safetensors").is_file()
    for (name, expected), got in zip(whole.model.state_dict().items(), resumed.model.state_dict().values()):
        assert torch.equal(expected, got), name
    evaluated = [r["step"] for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "eval_loss" in r]
    assert evaluated == [0, 6]  # the final one logged once, by the run the signal stopped


def test_a_signal_in_the_final_evaluation_names_the_last_steps_periodic_checkpoint_without_saving_again(tmp_path):
    folder = tmp_path / "run" / "checkpoints" / "step-6"
    inodes = []

    def job(checkpoint):
        signalling = signalling_at(6, checkpoint)

        def evaluate(model, step, horizon):
            if step == 6:
                inodes.append(folder.stat().st_ino)  # saved at step 6 (save_every), before the final evaluation
            return signalling.evaluate(model, step, horizon)

        return replace(signalling, evaluate=evaluate)

    with pytest.raises(Interrupted, match=r"SIGTERM at step 6: checkpoint saved in .*step-6;"):
        train(settings(tmp_path, save_every=6), lambda checkpoint, shard: job(checkpoint))
    assert inodes == [folder.stat().st_ino]  # not written again (a save replaces the folder)


def test_a_resumed_run_with_a_higher_step_limit_decays_to_the_new_limit(tmp_path):
    first = settings(tmp_path, max_steps=4, save_every=2, warmup=0.25)
    train(first, lambda checkpoint, shard: nan_job(()))
    messages = []
    reporter = type("Messages", (), {"message": lambda self, text: messages.append(text), "step": lambda self, *a: None})()
    train(replace(first, max_steps=8, resume=True), lambda checkpoint, shard: nan_job((), checkpoint), reporter)
    rates = [r["lr"] for r in records(tmp_path)]
    # the first run decayed to 0 at its step 4; the extension decays again, linearly, to 0 at step 8
    assert len(rates) == 8 and rates[3] == 0.0 and rates[4] > rates[5] > rates[6] > 0.0 == rates[7]
    assert "the step limit changed from 4 to 8: the learning-rate decay now ends there" in messages


def test_sigterm_through_the_command_line_exits_143_and_resumes_exactly(corpus, tmp_path):
    whole = tmp_path / "whole"
    subprocess.run(pretrain_command(corpus, whole), check=True, capture_output=True, timeout=300)
    cut = tmp_path / "cut"
    # with DataLoader workers, and the signal sent to the whole process group (as a scheduler does):
    # the workers must outlive it until the checkpoint is saved, and must not change what is trained
    command = pretrain_command(corpus, cut, "--num-workers", "1")
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 240
    while logged_steps(cut) < 5 and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 143, stderr[-2000:]
    assert "stopped: SIGTERM at step" in stderr and "continue with --resume" in stderr and "Traceback" not in stderr
    (checkpoint,) = (cut / "checkpoints").iterdir()
    step = int(checkpoint.name.split("-")[1])
    assert 5 <= step < 40 and f"at step {step}:" in stderr
    subprocess.run(pretrain_command(corpus, cut, "--resume"), check=True, capture_output=True, timeout=300)
    expected = load_file(whole / "model" / "model.safetensors")
    for name, tensor in load_file(cut / "model" / "model.safetensors").items():
        assert torch.equal(tensor, expected[name]), name


def test_resuming_a_finished_run_trains_nothing_more(tmp_path):
    done = settings(tmp_path, max_steps=4, save_every=2)
    train(done, lambda checkpoint, shard: nan_job(()))
    before = (tmp_path / "run" / "metrics.jsonl").read_text()
    messages = []

    class Messages:
        def message(self, text):
            messages.append(text)

        def step(self, *args):
            raise AssertionError("no step may run")

    again = train(replace(done, resume=True), lambda checkpoint, shard: nan_job((), checkpoint), Messages())
    assert again.steps == 4
    assert (tmp_path / "run" / "metrics.jsonl").read_text() == before
    assert "the run had reached its limit at step 4: nothing to train" in messages
