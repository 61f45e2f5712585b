"""Fine-tuning steps with unpadded batches (``finetune --unpad``) against today's padded ones, on the CPU.

The same model (MiniLM, ``minilm``) and the same training batches as ``tokenmask finetune`` makes them
(grouped by length, so little is padded to begin with): the built-in Rotten Tomatoes at 128 tokens and
batch 32, and SQuAD windows of 384 at batch 16 (``--task qa``). Each training step (forward, backward,
AdamW) runs on the padded model, then on its unpadded copy, in turn on the same batches, so both sides
meet the machine alike; the figures are the medians over ``--steps`` steps after 3 of warm-up, and the
padding is the share of a padded batch's tokens that are padding.

    python benchmarks/unpadded.py --json benchmarks/unpadded-cpu.json
    python benchmarks/unpadded.py --tiny          # the tests' smoke run: 3 steps of Rotten Tomatoes
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from tokenmask.collate.augment import MaskingAugmenter
from tokenmask.collate.stream import Shard
from tokenmask.recipes.config import FinetuneConfig
from tokenmask.recipes.finetune import training_batches
from tokenmask.recipes.tasks import load_task_data, task_parts
from tokenmask.settings import build
from tokenmask.train.classifier import load_classifier, load_classifier_tokenizer
from tokenmask.train.documents import keep_documents_apart

CASES = {"rotten-tomatoes": {"task": "classify", "batch_size": 32}, "squad": {"task": "qa", "batch_size": 16}}


def step_seconds(model: torch.nn.Module, optimizer: torch.optim.Optimizer, loss, batch: dict[str, Any]) -> float:
    began = time.perf_counter()
    loss(model, batch).backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return time.perf_counter() - began


def measure(name: str, steps: int) -> dict[str, Any]:
    case = CASES[name]
    config = build(FinetuneConfig, {"output": "unused", "task": case["task"], "batch_size": case["batch_size"]})
    tokenizer = load_classifier_tokenizer("minilm")
    parts = task_parts(load_task_data(config, tokenizer), tokenizer, config)
    augmenter = MaskingAugmenter(tokenizer, rate=0.0, seed=0)
    batches = training_batches(parts, augmenter, case["batch_size"], 0, Shard())(0, None)
    padded = load_classifier("minilm", task=parts.head, labels=parts.labels).model.train()
    unpadded = copy.deepcopy(padded)
    assert keep_documents_apart(unpadded, unpad=True) is None
    sides = {"padded": padded, "unpadded": unpadded}
    optimizers = {side: torch.optim.AdamW(model.parameters(), lr=1e-5) for side, model in sides.items()}
    times: dict[str, list[float]] = {side: [] for side in sides}
    padding = []
    for step in range(steps + 3):
        batch = next(batches)
        padding.append(1 - float(batch["attention_mask"].float().mean()))
        for side, model in sides.items():
            seconds = step_seconds(model, optimizers[side], parts.loss, batch)
            if step >= 3:
                times[side].append(seconds)
    medians = {side: statistics.median(values) for side, values in times.items()}
    return {"case": name, "steps": steps, "padding": statistics.fmean(padding), "seconds_per_step": medians,
            "speedup": medians["padded"] / medians["unpadded"]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    names = ["rotten-tomatoes"] if args.tiny else list(CASES)
    results = [measure(name, 3 if args.tiny else args.steps) for name in names]
    for r in results:
        s = r["seconds_per_step"]
        print(f"{r['case']:<16} padding {r['padding']:.1%}  padded {s['padded']:.3f} s/step  unpadded {s['unpadded']:.3f} s/step"
              f"  speed-up ×{r['speedup']:.2f}")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps({"threads": args.threads, "cases": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
