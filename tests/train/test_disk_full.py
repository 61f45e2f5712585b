"""A disk that fills up while a checkpoint is written: one clear line, nothing intact is lost, --resume continues.

Tried as a new user would (before this): the run died with torch's raw
``RuntimeError: [enforce fail at inline_container.cc:672] . unexpected pos 15637632 vs 15637520``.
Here torch.save fails as it does on a full tmpfs (that message, measured on a 3 MiB tmpfs) and
the disk is reported nearly full while it does.
"""

from __future__ import annotations

from collections import namedtuple

import pytest
import torch

import tokenmask.train.checkpoint as checkpoint
from tokenmask.cli.main import main
from tokenmask.train.checkpoint import DiskFull, save_checkpoint, verify_checkpoint
from tokenmask.train.presets import build_model

TORCH_FULL = "[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534"
Usage = namedtuple("Usage", "total used free")


def full_disk_on(monkeypatch, failing_call: int) -> None:
    """torch.save fails on its ``failing_call``-th call (1-based) as on a full disk; the disk then looks full."""
    real_save, calls = torch.save, []

    def save(obj, path, *args, **kwargs):
        calls.append(path)
        if len(calls) == failing_call:
            monkeypatch.setattr(checkpoint.shutil, "disk_usage", lambda path: Usage(10**9, 10**9, 4096))
            raise RuntimeError(TORCH_FULL)
        return real_save(obj, path, *args, **kwargs)

    monkeypatch.setattr(checkpoint.torch, "save", save)


@pytest.fixture
def tiny(bert_tokenizer):
    return build_model("bert-tiny", vocab_size=len(bert_tokenizer), max_length=32, pad_token_id=0), bert_tokenizer


def test_a_full_disk_is_named_and_the_folder_already_there_survives(tiny, tmp_path, monkeypatch):
    model, tokenizer = tiny
    folder = save_checkpoint(tmp_path / "step-10", model, tokenizer, {"step": torch.tensor(10)})
    full_disk_on(monkeypatch, failing_call=1)
    with pytest.raises(
        DiskFull, match=r"the disk is full: writing .*step-10 failed \(0.0 MiB free there now; the writer said: \[enforce"
    ):
        save_checkpoint(folder, model, tokenizer, {"step": torch.tensor(20)})
    assert verify_checkpoint(folder)["step"] == 10  # the old one is untouched
    assert [p.name for p in tmp_path.iterdir()] == ["step-10"]  # no partial copy left taking space


def test_the_same_torch_error_with_room_on_the_disk_is_not_called_a_full_disk(tiny, tmp_path, monkeypatch):
    model, tokenizer = tiny
    monkeypatch.setattr(checkpoint.torch, "save", lambda *a, **k: (_ for _ in ()).throw(RuntimeError(TORCH_FULL)))
    monkeypatch.setattr(checkpoint.shutil, "disk_usage", lambda path: Usage(10**12, 0, 10**12))
    with pytest.raises(RuntimeError, match="unexpected pos") as raised:
        save_checkpoint(tmp_path / "step-1", model, tokenizer, {})
    assert not isinstance(raised.value, DiskFull)
    assert list(tmp_path.iterdir()) == []  # the partial copy is removed here too


def test_a_run_whose_disk_fills_says_so_in_one_line_and_resumes(lines, tmp_path, monkeypatch, capsys):
    corpus = tmp_path / "plays.txt"
    corpus.write_text("\n\n".join(" ".join(lines[i : i + 6]) for i in range(0, 240, 6)), encoding="utf-8")
    output = tmp_path / "run"
    argv = [
        "pretrain", str(corpus), "--output", str(output), "--preset", "bert-tiny", "--max-steps", "4", "--save-every", "2",
        "--eval-every", "100", "--batch-size", "4", "--max-length", "32", "--cpu", "--no-demo", "--precision", "fp32",
    ]  # fmt: skip
    full_disk_on(monkeypatch, failing_call=2)  # step-2 is written, step-4 meets the full disk
    assert main(argv) == 2
    stderr = capsys.readouterr().err
    error = [line for line in stderr.splitlines() if line.startswith("tokenmask")]  # (in-process: transformers' bars too)
    assert len(error) == 1 and error[0].startswith("tokenmask pretrain: error: the disk is full: writing "), error
    assert "step-4" in error[0] and "--resume" in error[0] and "Traceback" not in stderr
    assert verify_checkpoint(output / "checkpoints" / "step-2")["step"] == 2

    monkeypatch.undo()
    assert main([*argv, "--resume"]) == 0
    assert (output / "model" / "model.safetensors").exists()
    assert verify_checkpoint(output / "checkpoints" / "step-4")["step"] == 4
