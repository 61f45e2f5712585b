"""A disk that fills up while a block cache entry is built: one line that says so, no partial
entry left, complete entries untouched, and the CLI exits 2 without a traceback.

Faked by an ``OSError(ENOSPC)`` from the block writer (what pyarrow raises on a full disk:
``[errno 28] No space left on device``, seen on a 256 KiB tmpfs), and for real on a small
tmpfs when the tests run as root (worker processes writing the shards).
"""

from __future__ import annotations

import errno
import hashlib
import os
import subprocess

import pytest

from tokenmask.blocks import shard, store
from tokenmask.blocks.build import build_blocks
from tokenmask.blocks.cache import CacheDiskFull
from tokenmask.cli.main import main

SIZE = r"\d+\.\d [KMG]iB"
FULL = rf"the disk is full: writing the block cache entry .*blocks/[0-9a-f]{{32}} failed \(it needs about {SIZE}, {SIZE} of it written, {SIZE} free there now; "
THEN = "The partial entry was removed, entries already there are untouched, and the cache is rebuilt on the next run"


def fill_disk_after(monkeypatch, flushes: int) -> None:
    """The block writer's ``flushes``-th write (counted over all files) fails as on a full disk."""
    real, calls = store.BlockWriter._flush, []

    def flush(self):
        calls.append(1)
        if len(calls) == flushes:
            raise OSError(errno.ENOSPC, "Error writing bytes to file. Detail: [errno 28] No space left on device")
        real(self)

    monkeypatch.setattr(store.BlockWriter, "_flush", flush)


def snapshot(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_full_disk_is_one_error_and_leaves_only_complete_entries(bert_tokenizer, lines, tmp_path, monkeypatch):
    kept = build_blocks(lines[:50], bert_tokenizer, block_length=32, validation_share=0.1, cache_dir=tmp_path)
    before = snapshot(tmp_path)
    monkeypatch.setattr(shard, "CHUNK_CHARACTERS", 3000)  # several chunks done before the disk fills: an estimate
    fill_disk_after(monkeypatch, flushes=12)
    with pytest.raises(CacheDiskFull, match=FULL) as raised:
        build_blocks(lines[:3000], bert_tokenizer, block_length=32, validation_share=0.1, cache_dir=tmp_path, num_proc=1)
    message = str(raised.value)
    assert "free there now; the writer said: Error writing bytes to file. Detail: [errno 28] No space" in message
    assert THEN in message
    assert message.endswith("free some space and run again, or put the cache elsewhere with --cache-dir")
    assert isinstance(raised.value, OSError) and raised.value.errno == errno.ENOSPC
    assert [p.name for p in (tmp_path / "blocks").iterdir()] == [os.path.basename(kept.cache)]  # no .building-* left
    assert snapshot(tmp_path) == before
    fill_disk_after(monkeypatch, flushes=1)
    with pytest.raises(CacheDiskFull, match=r"writing the blocks in .* \(a temporary folder: no cache\) failed .*TMPDIR"):
        build_blocks(lines[:3000], bert_tokenizer, block_length=32, validation_share=0.1, use_cache=False, num_proc=1)


def test_other_errors_stay_what_they_were(bert_tokenizer, lines, tmp_path, monkeypatch):
    monkeypatch.setattr(store.BlockWriter, "_flush", lambda self: (_ for _ in ()).throw(OSError(errno.EACCES, "denied")))
    with pytest.raises(OSError, match="denied") as raised:
        build_blocks(lines[:50], bert_tokenizer, block_length=32, validation_share=0.1, cache_dir=tmp_path, num_proc=1)
    assert not isinstance(raised.value, CacheDiskFull)
    assert list((tmp_path / "blocks").iterdir()) == []


def test_pretrain_stops_with_one_line_and_exit_code_2(lines, tmp_path, monkeypatch, capsys):
    corpus = tmp_path / "plays.txt"
    corpus.write_text("\n\n".join(lines[:400]), encoding="utf-8")
    fill_disk_after(monkeypatch, flushes=1)
    argv = [
        "pretrain", str(corpus), "--output", str(tmp_path / "run"), "--cache-dir", str(tmp_path / "cache"),
        "--preset", "bert-tiny", "--max-steps", "2", "--max-length", "32", "--batch-size", "4", "--cpu", "--no-demo",
    ]  # fmt: skip
    assert main(argv) == 2
    stderr = capsys.readouterr().err
    error = [line for line in stderr.splitlines() if line.startswith("tokenmask")]
    assert len(error) == 1 and error[0].startswith("tokenmask pretrain: error: the disk is full: writing the block cache"), error
    assert "--cache-dir" in error[0] and "Traceback" not in stderr
    assert not (tmp_path / "run").exists() and list((tmp_path / "cache" / "blocks").iterdir()) == []


@pytest.fixture
def small_disk(tmp_path):
    """A 256 KiB tmpfs (root only: elsewhere the test is skipped)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(disk)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    yield disk
    subprocess.run(["umount", "--lazy", str(disk)], check=True)  # lazy: the kept entry may still be mapped


def test_a_real_full_disk_in_worker_processes(bert_tokenizer, lines, small_disk, monkeypatch):
    kept = build_blocks(lines[:20], bert_tokenizer, block_length=32, validation_share=0.1, cache_dir=small_disk)
    before = snapshot(small_disk)
    monkeypatch.setattr(shard, "CHUNK_CHARACTERS", 20_000)  # 5,000 lines: about 10 chunks, 0.4 MiB of blocks
    with pytest.raises(CacheDiskFull, match=FULL + "the writer said: .*No space left on device") as raised:
        build_blocks(lines, bert_tokenizer, block_length=32, validation_share=0.1, cache_dir=small_disk, num_proc=2)
    assert " 0.0 KiB free there now" in str(raised.value)
    assert snapshot(small_disk) == before and kept.cache is not None
    assert [p.name for p in (small_disk / "blocks").iterdir()] == [os.path.basename(kept.cache)]


def test_the_cache_key_ignores_the_truncation_a_previous_call_left_on_the_tokenizer(lines, tmp_path):
    """A fast tokenizer keeps the truncation and padding of its last call (question windows leave a stride set);
    blocks built before and after such a call share one cache entry."""
    from tokenmask.blocks.cache import tokenizer_fingerprint
    from tokenmask.text.tokenizer import load_tokenizer

    tokenizer = load_tokenizer("bert-base-uncased")  # not the session's: this one is changed
    before = build_blocks(lines[:200], tokenizer, block_length=32, validation_share=0.1, cache_dir=tmp_path)
    key = tokenizer_fingerprint(tokenizer)
    tokenizer(["who?"], ["the king won"], truncation="only_second", max_length=16, stride=4, return_overflowing_tokens=True)
    assert tokenizer.backend_tokenizer.truncation is not None  # the state the key must not see
    assert tokenizer_fingerprint(tokenizer) == key
    after = build_blocks(lines[:200], tokenizer, block_length=32, validation_share=0.1, cache_dir=tmp_path)
    assert after.from_cache and after.cache == before.cache
