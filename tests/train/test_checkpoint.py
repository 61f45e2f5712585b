"""Checkpoint folders: the manifest, verification with a reason per fault, clean-up after a kill, safe loading."""

from __future__ import annotations

import hashlib
import json
import os

import pytest
import torch
from transformers import BertConfig, BertForMaskedLM

from tokenmask.train.checkpoint import (
    MANIFEST_FILE,
    STATE_FILE,
    InvalidCheckpoint,
    checkpoint_folders,
    load_state,
    newest_valid_checkpoint,
    remove_leftovers,
    save_checkpoint,
    save_model,
    verify_checkpoint,
)


@pytest.fixture(scope="module")
def tiny(bert_tokenizer):
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(bert_tokenizer), hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16
    )
    return BertForMaskedLM(config), bert_tokenizer


def save(folder, tiny, step=4):
    model, tokenizer = tiny
    return save_checkpoint(folder, model, tokenizer, {"step": step, "tokens": 10 * step, "torch_rng": torch.get_rng_state()})


def test_the_manifest_lists_every_file_with_its_size_and_hash(tiny, tmp_path):
    folder = save(tmp_path / "step-4", tiny)
    manifest = json.loads((folder / MANIFEST_FILE).read_text())
    on_disk = sorted(p.name for p in folder.iterdir() if p.name != MANIFEST_FILE)
    assert manifest["format"] == 1 and sorted(manifest["files"]) == on_disk
    assert {"model.safetensors", "config.json", STATE_FILE} <= set(on_disk)
    for name, entry in manifest["files"].items():
        data = (folder / name).read_bytes()
        assert entry == {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    assert verify_checkpoint(folder)["step"] == 4
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # the temporary folder was renamed


def truncate(folder):
    path = folder / "model.safetensors"
    size = path.stat().st_size
    with path.open("r+b") as handle:
        handle.truncate(size // 2)
    return f"model.safetensors is truncated ({size // 2:,} of {size:,} bytes)"


def flip(folder):
    path = folder / STATE_FILE
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, other content
    path.write_bytes(bytes(data))
    return f"{STATE_FILE} is corrupted (its SHA-256 differs from the manifest)"


def unlist(folder):
    (folder / MANIFEST_FILE).unlink()
    return "no manifest.json (incomplete, or written by a tokenmask without manifests)"


def lose(folder):
    (folder / "config.json").unlink()
    return "config.json is missing"


def garble(folder):
    (folder / MANIFEST_FILE).write_text('{"files": [', encoding="utf-8")
    return "manifest.json is unreadable (JSONDecodeError"


@pytest.mark.parametrize("damage", [truncate, flip, unlist, lose, garble])
def test_each_kind_of_damage_is_named(damage, tiny, tmp_path):
    folder = save(tmp_path / "step-4", tiny)
    reason = damage(folder)
    with pytest.raises(InvalidCheckpoint) as error:
        verify_checkpoint(folder)
    assert str(error.value).startswith(reason)


def test_a_state_that_is_no_torch_file_is_named_even_with_a_matching_manifest(tiny, tmp_path):
    folder = save(tmp_path / "step-4", tiny)
    (folder / STATE_FILE).write_bytes(b"not a zip archive")
    manifest = json.loads((folder / MANIFEST_FILE).read_text())
    manifest["files"][STATE_FILE] = {"bytes": 17, "sha256": hashlib.sha256(b"not a zip archive").hexdigest()}
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest))
    with pytest.raises(InvalidCheckpoint, match=f"^{STATE_FILE}: not a readable torch file"):
        verify_checkpoint(folder)


class Payload:
    """Any object: unpickling it could run code, so weights_only refuses it."""

    def __reduce__(self):
        return (os.getcwd, ())


def test_load_state_refuses_pickled_objects(tmp_path):
    torch.save({"step": 3, "payload": Payload()}, tmp_path / STATE_FILE)
    with pytest.raises(ValueError, match="refused to load: it holds pickled objects other than tensors") as error:
        load_state(tmp_path)
    assert str(tmp_path / STATE_FILE) in str(error.value)
    torch.save({"step": 3, "rng": torch.get_rng_state(), "lr": [0.1, 0.2]}, tmp_path / STATE_FILE)
    assert load_state(tmp_path)["step"] == 3  # tensors and plain values load


def test_the_newest_valid_checkpoint_skips_damaged_ones_with_their_reason(tiny, tmp_path):
    for step in (2, 4, 6, 10):
        save(tmp_path / f"step-{step}", tiny, step)
    (tmp_path / "step-x").mkdir()
    (tmp_path / ".step-12.partial-99").mkdir()
    assert [p.name for p in checkpoint_folders(tmp_path)] == ["step-10", "step-6", "step-4", "step-2"]
    truncated, unlisted = truncate(tmp_path / "step-10"), unlist(tmp_path / "step-6")
    reports = []
    assert newest_valid_checkpoint(tmp_path, report=reports.append) == tmp_path / "step-4"
    assert reports == [f"skipping {tmp_path.name}/step-10: {truncated}", f"skipping {tmp_path.name}/step-6: {unlisted}"]
    flip(tmp_path / "step-4"), lose(tmp_path / "step-2")
    assert newest_valid_checkpoint(tmp_path) is None
    assert newest_valid_checkpoint(tmp_path / "nothing-here") is None


def test_leftovers_of_a_killed_save_are_removed_or_restored(tiny, tmp_path):
    save(tmp_path / "step-2", tiny, 2)
    (tmp_path / ".step-4.partial-123").mkdir()  # killed while writing step-4
    save(tmp_path / "model", tiny).rename(tmp_path / ".model.previous-123")  # killed between the two renames
    (tmp_path / ".model.partial-123").mkdir()
    save(tmp_path / "best", tiny)
    save(tmp_path / "other", tiny).rename(tmp_path / ".best.previous-7")  # killed after the second rename
    done = remove_leftovers(tmp_path)
    assert sorted(done) == [
        ".best.previous-7",
        ".model.partial-123",
        ".model.previous-123 (restored as model)",
        ".step-4.partial-123",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best", "model", "step-2"]
    assert verify_checkpoint(tmp_path / "model")["step"] == 4
    assert remove_leftovers(tmp_path) == []


def test_saving_over_a_checkpoint_replaces_it_whole(tiny, tmp_path):
    save(tmp_path / "best", tiny, 2)
    save(tmp_path / "best", tiny, 8)
    assert verify_checkpoint(tmp_path / "best")["step"] == 8
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best"]


def test_a_final_model_folder_holds_only_what_from_pretrained_needs_and_its_card(tiny, tmp_path):
    model, tokenizer = tiny
    model.save_pretrained(tmp_path / "plain", safe_serialization=True)
    tokenizer.save_pretrained(tmp_path / "plain")
    save_model(tmp_path / "model", model, tokenizer, card="---\nlibrary_name: transformers\n---\n# one\n")
    save_model(tmp_path / "model", model, tokenizer, card="---\nlibrary_name: transformers\n---\n# two\n")  # replaced whole
    expected = {"README.md", *(p.name for p in (tmp_path / "plain").iterdir())}  # config, weights, tokenizer files
    assert {p.name for p in (tmp_path / "model").iterdir()} == expected  # no training state, no manifest
    assert (tmp_path / "model" / "README.md").read_text(encoding="utf-8").endswith("# two\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model", "plain"]  # no temporary folder left
    reloaded = BertForMaskedLM.from_pretrained(tmp_path / "model", local_files_only=True)
    assert all(torch.equal(value, reloaded.state_dict()[name]) for name, value in model.state_dict().items())
