"""Training throughput: tokenmask's pre-training loop against the Hugging Face recipe.

The same model configuration (a preset, freshly initialised with the same seed), the same
128-token blocks of Shakespeare and the same batch size, for the same number of optimizer
steps: ``tokenmask.train.loop.pretrain`` (MaskingCollator + sparse head + normalised loss)
against ``transformers.Trainer`` + ``DataCollatorForLanguageModeling`` (run_mlm.py style,
full prediction head). Step times are taken per step (a Trainer callback on one side, the
run's metrics on the other) and the median after the first few steps is reported.

Run from the repository root::

    python benchmarks/pretrain.py                      # bert-mini, 16 steps each, ~2-3 min on 2 cores
    python benchmarks/pretrain.py --preset bert-tiny --steps 30
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch
from transformers import DataCollatorForLanguageModeling, Trainer, TrainerCallback, TrainingArguments

from tokenmask.data.blocks import pack_texts
from tokenmask.data.resources import shakespeare_scenes
from tokenmask.data.tokenizers import load_tokenizer
from tokenmask.train.config import PretrainConfig
from tokenmask.train.loop import pretrain
from tokenmask.train.models import build_model

WARMUP_STEPS = 3  # left out of the medians


class StepClock(TrainerCallback):
    """Wall time at the end of every Trainer step."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def on_step_end(self, args, state, control, **kwargs):
        self.times.append(time.perf_counter())


def median_step(times: list[float]) -> float:
    gaps = [b - a for a, b in zip(times, times[1:])][WARMUP_STEPS:]
    return statistics.median(gaps)


def run_hf(preset: str, steps: int, batch_size: int, blocks: list[dict], tokenizer, workdir: Path) -> float:
    torch.manual_seed(0)
    model = build_model(preset, vocab_size=len(tokenizer), max_length=128, pad_token_id=tokenizer.pad_token_id)
    clock = StepClock()
    args = TrainingArguments(
        output_dir=str(workdir / "hf"), per_device_train_batch_size=batch_size, max_steps=steps,
        learning_rate=1e-3, report_to=[], use_cpu=True, save_strategy="no", logging_strategy="no",
        dataloader_num_workers=0,
    )
    data = [{"input_ids": b["input_ids"]} for b in blocks]
    trainer = Trainer(model=model, args=args, train_dataset=data,
                      data_collator=DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15), callbacks=[clock])
    trainer.train()
    return median_step(clock.times)


def run_ours(preset: str, steps: int, batch_size: int, corpus: Path, workdir: Path) -> float:
    config = PretrainConfig(
        output=str(workdir / "ours"), corpus=(str(corpus),), preset=preset, max_steps=steps, batch_size=batch_size,
        lr=1e-3, eval_every=10**6, eval_blocks=1, save_every=10**6, validation_share=0.01,
    )
    pretrain(config)
    records = [json.loads(line) for line in (workdir / "ours" / "metrics.jsonl").read_text().splitlines()]
    return median_step([r["seconds"] for r in records if "loss" in r])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="bert-mini")
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    tokenizer = load_tokenizer("bert-base-uncased")
    scenes = shakespeare_scenes()[:120]
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        corpus = workdir / "scenes.txt"
        corpus.write_text("\n\n".join(scenes), encoding="utf-8")
        blocks = [b for b in pack_texts(scenes, tokenizer, block_length=128) if len(b["input_ids"]) == 128]
        ours = run_ours(args.preset, args.steps, args.batch_size, corpus, workdir)
        hf = run_hf(args.preset, args.steps, args.batch_size, blocks, tokenizer, workdir)
    tokens = args.batch_size * 128
    result = {
        "preset": args.preset, "batch": f"{args.batch_size}x128", "steps": args.steps, "threads": torch.get_num_threads(),
        "ours_s_per_step": ours, "hf_s_per_step": hf, "ours_tokens_per_s": tokens / ours, "hf_tokens_per_s": tokens / hf,
        "ratio": hf / ours,
    }
    print(
        f"{args.preset}, batch {args.batch_size}x128, {torch.get_num_threads()} threads, median of steps "
        f"{WARMUP_STEPS + 2}-{args.steps}: tokenmask {ours:.3f} s/step ({tokens / ours:,.0f} tok/s), "
        f"HF Trainer recipe {hf:.3f} s/step ({tokens / hf:,.0f} tok/s): {hf / ours:.2f}x"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
