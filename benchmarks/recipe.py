"""The 2025 encoder recipe on the CPU, side by side: document-aware packing and a 30% -> 15% masking phase
against BERT's packing at a constant 15%, at equal time.

Four pre-trainings of ``modernbert-tiny`` from scratch on SQuAD's 18,891 training paragraphs (short
documents: most 128-token blocks hold a boundary), each ``--minutes`` long on one thread, all four at
once (so whatever else the machine does slows each alike):

- ``blocks``: today's default, every token of a block attends to the whole block; 15%;
- ``documents``: ``--packing documents``; 15%;
- ``phases``: ``--mlm-probability 0.3 --mlm-phases 0.5:0.15``, 30% for the first half, then 15%;
- ``both``: the two together.

Each is scored at the end on the same fixed masks (15%, token-level, the same held-out blocks), each
model as it trained (a ``documents`` model with its documents apart), and fine-tuned on the built-in
Rotten Tomatoes with ``--seeds`` seeds, the same seeds for every model (paired): accuracy on its
held-out movies. Differences against ``blocks``: mean and paired 95% interval over the seeds
(:class:`tokenmask.experiments.stats.Paired`).

    python benchmarks/squad_corpus.py /tmp/squad-paragraphs.txt
    python benchmarks/recipe.py /tmp/squad-paragraphs.txt runs/recipe --minutes 30 --json benchmarks/recipe-cpu.json

``--tiny`` runs the same code for a few steps on a bundled text (the tests run it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tokenmask.experiments.stats import Paired

ARMS: dict[str, list[str]] = {
    "blocks": [],
    "documents": ["--packing", "documents"],
    "phases": ["--mlm-probability", "0.3", "--mlm-phases", "0.5:0.15"],
    "both": ["--packing", "documents", "--mlm-probability", "0.3", "--mlm-phases", "0.5:0.15"],
}


def run_together(commands: list[list[str]], logs: list[Path], *, at_once: int) -> None:
    """Run the commands ``at_once`` at a time, one thread each; stop at the first that fails."""
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    for start in range(0, len(commands), at_once):
        running = []
        for command, log in zip(commands[start : start + at_once], logs[start : start + at_once]):
            with log.open("w") as out:
                running.append((subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=environment), log))
        for process, log in running:
            if process.wait() != 0:
                sys.exit(f"failed: see {log}")


def pretrain_command(corpus: str | None, output: Path, arm: str, minutes: float, tiny: bool) -> list[str]:
    limit = ["--max-steps", "4", "--preset", "bert-tiny", "--max-length", "64", "--eval-blocks", "8"] if tiny else []
    return [
        sys.executable, "-m", "tokenmask", "pretrain", *([corpus] if corpus else []), "--output", str(output),
        "--max-time", str(minutes), *limit, *ARMS[arm], "--report-to", "none", "--no-demo", "--overwrite",
    ]  # fmt: skip


def finetune_command(model: Path, output: Path, seed: int, tiny: bool) -> list[str]:
    limit = ["--max-steps", "3", "--max-time", "1"] if tiny else ["--max-steps", "400"]
    return [
        sys.executable, "-m", "tokenmask", "finetune", "--model", str(model), "--output", str(output), "--seed", str(seed),
        *limit, "--report-to", "none", "--overwrite",
    ]  # fmt: skip


def final_evaluation(run: Path) -> dict[str, Any]:
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    trained = [r for r in records if "loss" in r]
    last = [r for r in records if "eval_accuracy" in r][-1]
    return {"steps": trained[-1]["step"], "tokens": trained[-1]["tokens"], "accuracy": last["eval_accuracy"],
            "loss": last["eval_loss"]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", nargs="?", help="SQuAD's paragraphs (benchmarks/squad_corpus.py); --tiny: none")
    parser.add_argument("workdir", type=Path)
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    work = args.workdir
    work.mkdir(parents=True, exist_ok=True)
    arms = list(ARMS)
    if not args.tiny:  # fill the block cache first, so that the four do not race to build it
        run_together([pretrain_command(args.corpus, work / "cache", "blocks", 0.01, False)], [work / "cache.log"], at_once=1)
    run_together(  # all four at once: whatever else the machine does meets every arm alike
        [pretrain_command(args.corpus, work / arm, arm, args.minutes, args.tiny) for arm in arms],
        [work / f"{arm}.log" for arm in arms],
        at_once=len(arms),
    )
    tunings = [(arm, seed) for arm in arms for seed in range(args.seeds)]
    run_together(
        [finetune_command(work / arm / "model", work / f"{arm}-tune-{seed}", seed, args.tiny) for arm, seed in tunings],
        [work / f"{arm}-tune-{seed}.log" for arm, seed in tunings],
        at_once=2,
    )
    scores = {
        arm: [
            json.loads((work / f"{arm}-tune-{seed}" / "results.json").read_text())["final"]["accuracy"]
            for seed in range(args.seeds)
        ]
        for arm in arms
    }
    record: dict[str, Any] = {"minutes": args.minutes, "seeds": args.seeds, "arms": {}}
    print(f"{'arm':<10} {'steps':>6} {'tokens':>11} {'fixed-mask acc':>15} {'RT accuracy':>12}  Δ vs blocks [95% interval]")
    for arm in arms:
        pretrained = final_evaluation(work / arm)
        paired = Paired.of([a - b for a, b in zip(scores[arm], scores["blocks"])])
        record["arms"][arm] = {**pretrained, "finetune_accuracy": scores[arm], "against_blocks": paired.to_dict()}
        interval = "" if paired.low is None or arm == "blocks" else f"{paired.mean:+.4f} [{paired.low:+.4f}, {paired.high:+.4f}]"
        mean = sum(scores[arm]) / len(scores[arm])
        print(
            f"{arm:<10} {pretrained['steps']:>6} {pretrained['tokens']:>11,} {pretrained['accuracy']:>15.4f} {mean:>12.4f}  {interval}"
        )
    if args.json:
        args.json.write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
