"""The 2025 encoder recipe on the CPU, side by side: document-aware packing and a 30% -> 15% masking phase
against BERT's packing at a constant 15%, at equal time.

Four pre-trainings of ``modernbert-tiny`` from scratch on SQuAD's 18,891 training paragraphs (short
documents: most 128-token blocks hold a boundary), each ``--minutes`` long on one thread, all four at
once (so whatever else the machine does slows each alike):

- ``blocks``: today's default, every token of a block attends to the whole block; 15%;
- ``documents``: ``--packing documents``; 15%;
- ``phases``: ``--mlm-probability 0.3 --mlm-phases 0.5:0.15``, 30% for the first half, then 15%;
- ``both``: the two together.

Each arm is pre-trained with ``--pretrain-seeds`` seeds (four runs at a time, one per arm), scored at
the end on the same fixed masks (15%, token-level, the same held-out blocks), each model as it trained
(a ``documents`` model with its documents apart), also at the fewest tokens any arm of its seed reached
(equal tokens), and fine-tuned on the built-in Rotten Tomatoes with ``--seeds`` seeds, 400 steps:
accuracy on its held-out movies. Differences against ``blocks``: mean and paired 95% interval over the
(pre-training seed, fine-tuning seed) pairs (:class:`tokenmask.experiments.stats.Paired`). A run whose
output is complete is not run again, so a record can grow by a pre-training seed.

    python benchmarks/squad_corpus.py /tmp/squad-paragraphs.txt
    python benchmarks/recipe.py /tmp/squad-paragraphs.txt runs/recipe --minutes 30 --json benchmarks/recipe-cpu.json   # ~2 h

``--tiny`` runs the same code for a few steps on a bundled text (the tests run it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
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


def pretrain_command(corpus: str | None, output: Path, arm: str, minutes: float, tiny: bool, seed: int = 0) -> list[str]:
    limit = ["--max-steps", "4", "--preset", "bert-tiny", "--max-length", "64", "--eval-blocks", "8"] if tiny else []
    return [
        sys.executable, "-m", "tokenmask", "pretrain", *([corpus] if corpus else []), "--output", str(output),
        "--max-time", str(minutes), "--seed", str(seed), *limit, *ARMS[arm], "--report-to", "none", "--no-demo", "--overwrite",
    ]  # fmt: skip


def finetune_command(model: Path, output: Path, seed: int, tiny: bool) -> list[str]:
    limit = ["--max-steps", "3", "--max-time", "1"] if tiny else ["--max-steps", "400"]
    return [
        sys.executable, "-m", "tokenmask", "finetune", "--model", str(model), "--output", str(output), "--seed", str(seed),
        *limit, "--report-to", "none", "--overwrite",
    ]  # fmt: skip


def evaluations(run: Path) -> list[dict[str, Any]]:
    return [r for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "eval_accuracy" in r]


def at_tokens(run: Path, tokens: int) -> float:
    """The fixed-mask accuracy of the last evaluation at no more than ``tokens`` tokens."""
    return [e["eval_accuracy"] for e in evaluations(run) if e["tokens"] <= tokens][-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", nargs="?", help="SQuAD's paragraphs (benchmarks/squad_corpus.py); --tiny: none")
    parser.add_argument("workdir", type=Path)
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--pretrain-seeds", type=int, default=2)
    parser.add_argument("--seeds", type=int, default=3, help="fine-tuning seeds per pre-trained model")
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    work = args.workdir
    work.mkdir(parents=True, exist_ok=True)
    arms, pretrainings = list(ARMS), range(args.pretrain_seeds)
    if not args.tiny:  # fill the block cache first, so that the four do not race to build it
        run_together([pretrain_command(args.corpus, work / "cache", "blocks", 0.01, False)], [work / "cache.log"], at_once=1)
    for p in pretrainings:  # a run already done (its model saved) is not run again
        todo = [arm for arm in arms if not (work / f"{arm}-p{p}" / "model" / "config.json").exists()]
        run_together(  # the four at once: whatever else the machine does meets every arm alike
            [pretrain_command(args.corpus, work / f"{arm}-p{p}", arm, args.minutes, args.tiny, p) for arm in todo],
            [work / f"{arm}-p{p}.log" for arm in todo],
            at_once=len(arms),
        )
    tunings = [(f"{arm}-p{p}", seed) for arm in arms for p in pretrainings for seed in range(args.seeds)]
    tunings = [(run, seed) for run, seed in tunings if not (work / f"{run}-tune-{seed}" / "results.json").exists()]
    run_together(
        [finetune_command(work / run / "model", work / f"{run}-tune-{seed}", seed, args.tiny) for run, seed in tunings],
        [work / f"{run}-tune-{seed}.log" for run, seed in tunings],
        at_once=2,
    )
    scores = {  # (pre-training seed, fine-tuning seed) -> accuracy
        arm: {(p, seed): json.loads((work / f"{arm}-p{p}-tune-{seed}" / "results.json").read_text())["final"]["accuracy"]
              for p in pretrainings for seed in range(args.seeds)}
        for arm in arms
    }  # fmt: skip
    record: dict[str, Any] = {"minutes": args.minutes, "pretrain_seeds": args.pretrain_seeds, "seeds": args.seeds, "arms": {}}
    fewest = {p: min(evaluations(work / f"{arm}-p{p}")[-1]["tokens"] for arm in arms) for p in pretrainings}
    print(
        f"{'arm':<10} {'tokens':>11} {'fixed-mask acc':>15} {'at equal tokens':>16} {'RT accuracy':>12}  Δ vs blocks [95% interval]"
    )
    for arm in arms:
        runs = [evaluations(work / f"{arm}-p{p}")[-1] for p in pretrainings]
        equal = [at_tokens(work / f"{arm}-p{p}", fewest[p]) for p in pretrainings]
        paired = Paired.of([scores[arm][key] - scores["blocks"][key] for key in scores[arm]])
        record["arms"][arm] = {"tokens": [r["tokens"] for r in runs], "accuracy": [r["eval_accuracy"] for r in runs],
                               "accuracy_at_equal_tokens": equal, "finetune_accuracy": list(scores[arm].values()),
                               "against_blocks": paired.to_dict()}  # fmt: skip
        interval = "" if paired.low is None or arm == "blocks" else f"{paired.mean:+.4f} [{paired.low:+.4f}, {paired.high:+.4f}]"
        mean = statistics.fmean(scores[arm].values())
        tokens, accuracy = statistics.fmean(r["tokens"] for r in runs), statistics.fmean(r["eval_accuracy"] for r in runs)
        print(f"{arm:<10} {tokens:>11,.0f} {accuracy:>15.4f} {statistics.fmean(equal):>16.4f} {mean:>12.4f}  {interval}")
    if args.json:
        args.json.write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
