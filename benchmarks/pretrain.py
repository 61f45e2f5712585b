"""Pre-training: tokenmask's loop against the Hugging Face recipe, at equal model, data and batch.

Both sides train the same model configuration (a preset, freshly initialised with the same
seed) on the same 128-token blocks of the bundled Shakespeare with the same batch size and
optimizer settings (AdamW, betas 0.9/0.98, eps 1e-6, weight decay 0.01, 6% warm-up, linear
decay, gradient clipping at 1):

- tokenmask: ``tokenmask.recipes.pretrain.pretrain`` (MaskingCollator, sparse prediction head,
  loss normalised per optimizer step);
- Hugging Face: ``transformers.Trainer`` + ``DataCollatorForLanguageModeling`` (full
  prediction head), as ``run_mlm.py`` does.

Two measurements:

1. Throughput: ``--steps`` optimizer steps per run, runs alternating between the two sides
   ``--repeats`` times; each run's median step time (after the first few steps), then the
   median over runs. Also the share of tokenmask's step time spent collating and masking.
2. With ``--equal-time MINUTES``: each side trains for that wall-clock time (its learning-rate
   schedule fitted to the time: tokenmask fits its own; the Trainer gets the number of steps
   its measured pace allows), then both models are scored on the same held-out blocks at the
   same fixed masks (tokenmask's ``evaluate_mlm``): masked-token accuracy and loss.

Run from the repository root::

    python benchmarks/pretrain.py                          # throughput, bert-mini, ~5 min on 2 cores
    python benchmarks/pretrain.py --equal-time 4           # plus accuracy at 4 minutes each (~14 min)
    python benchmarks/pretrain.py --preset modernbert-tiny --batch-size 8 --lr 2e-3 --repeats 1 --equal-time 4
    python benchmarks/pretrain.py --init minilm            # continued pre-training, 10 min per run (~35 min)
    python benchmarks/pretrain.py --equal-accuracy 0.2     # time to accuracy 0.2, default run vs Trainer (~20 min)
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

from tokenmask import BlocksConfig, LoopConfig, PretrainConfig
from tokenmask.blocks.build import build_blocks
from tokenmask.collate.collator import MaskingCollator
from tokenmask.recipes.pretrain import pretrain
from tokenmask.text.resources import shakespeare_scenes
from tokenmask.text.tokenizer import load_tokenizer
from tokenmask.train.presets import build_model
from tokenmask.use.evaluate import EVAL_SEED_OFFSET, evaluate_mlm

WARMUP_STEPS = 3  # left out of the medians
VALIDATION_SHARE = 0.02
EVAL_BLOCKS = 128


class StepClock(TrainerCallback):
    """Wall time at the end of every Trainer step; stops training after ``budget`` seconds."""

    def __init__(self, budget: float | None = None) -> None:
        self.times: list[float] = []
        self.budget = budget
        self.started = 0.0

    def on_train_begin(self, args, state, control, **kwargs):
        self.started = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self.times.append(time.perf_counter())
        if self.budget is not None and self.times[-1] - self.started > self.budget:
            control.should_training_stop = True


def median_step(times: list[float]) -> float:
    gaps = [b - a for a, b in zip(times, times[1:])]
    return statistics.median(gaps[WARMUP_STEPS:] or gaps or [float("nan")])


def run_hf(
    preset: str,
    steps: int,
    batch_size: int,
    blocks: list[dict],
    tokenizer,
    workdir: Path,
    *,
    lr: float,
    precision: str = "fp32",
    budget: float | None = None,
):
    """Train with the Trainer recipe; returns (median step seconds, steps done, model)."""
    torch.manual_seed(0)
    model = build_model(preset, vocab_size=len(tokenizer), max_length=128, pad_token_id=tokenizer.pad_token_id)
    clock = StepClock(budget)
    args = TrainingArguments(
        output_dir=str(workdir / "hf"),
        per_device_train_batch_size=batch_size,
        max_steps=steps,
        learning_rate=lr,
        adam_beta2=0.98,
        adam_epsilon=1e-6,
        weight_decay=0.01,
        warmup_steps=0.06,
        lr_scheduler_type="linear",
        max_grad_norm=1.0,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        logging_strategy="no",
        dataloader_num_workers=0,
        seed=0,
        bf16=precision == "bf16",
    )
    data = [{"input_ids": b["input_ids"]} for b in blocks]
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=data,
        data_collator=DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15),
        callbacks=[clock],
    )
    trainer.train()
    return median_step(clock.times), len(clock.times), model


def run_ours(
    preset: str,
    steps: int | None,
    batch_size: int,
    workdir: Path,
    *,
    lr: float,
    precision: str = "fp32",
    minutes: float | None = None,
):
    """Train with tokenmask's loop on the bundled plays; returns (median step s, collate share, steps, model)."""
    loop = LoopConfig(
        output=str(workdir / "ours"),
        max_steps=steps,
        max_time=minutes,
        batch_size=batch_size,
        lr=lr,
        precision=precision,
        eval_every=10**6,
        save_every=10**6,
        overwrite=True,
    )
    config = PretrainConfig(loop=loop, preset=preset, eval_blocks=1, blocks=BlocksConfig(validation_share=VALIDATION_SHARE))
    result = pretrain(config)
    records = [json.loads(line) for line in (workdir / "ours" / "metrics.jsonl").read_text().splitlines()]
    steps_records = [r for r in records if "loss" in r]
    step = median_step([r["seconds"] for r in steps_records])
    collate = statistics.median(r["data_seconds"] for r in steps_records[WARMUP_STEPS:] or steps_records)
    return step, collate / step, result.steps, result.model


def throughput(args, tokenizer, train_blocks, workdir: Path) -> dict:
    ours, hf, shares = [], [], []
    for _ in range(args.repeats):
        step, share, _, _ = run_ours(args.preset, args.steps, args.batch_size, workdir, lr=args.lr, precision=args.precision)
        ours.append(step)
        shares.append(share)
        hf.append(
            run_hf(
                args.preset, args.steps, args.batch_size, train_blocks, tokenizer, workdir, lr=args.lr, precision=args.precision
            )[0]
        )
    tokens = args.batch_size * 128
    ours_step, hf_step = statistics.median(ours), statistics.median(hf)
    print(
        f"throughput, {args.preset}, batch {args.batch_size}x128, {args.precision}, {torch.get_num_threads()} threads, median of "
        f"{args.repeats} runs x steps {WARMUP_STEPS + 2}-{args.steps}: tokenmask {ours_step:.3f} s/step "
        f"({tokens / ours_step:,.0f} tok/s), HF Trainer recipe {hf_step:.3f} s/step ({tokens / hf_step:,.0f} tok/s): "
        f"{hf_step / ours_step:.2f}x; collating + masking {100 * statistics.median(shares):.2f}% of tokenmask's step"
    )
    return {
        "ours_s_per_step": ours_step,
        "hf_s_per_step": hf_step,
        "ours_runs": ours,
        "hf_runs": hf,
        "ours_tokens_per_s": tokens / ours_step,
        "hf_tokens_per_s": tokens / hf_step,
        "ratio": hf_step / ours_step,
        "collate_share": statistics.median(shares),
    }


def equal_time(args, tokenizer, blocks, workdir: Path, hf_step: float) -> dict:
    budget = args.equal_time * 60
    collator = MaskingCollator(tokenizer, seed=EVAL_SEED_OFFSET)  # the same fixed masks for both
    validation = blocks.validation[:EVAL_BLOCKS]
    _, _, ours_steps, ours_model = run_ours(
        args.preset, None, args.batch_size, workdir, lr=args.lr, precision=args.precision, minutes=args.equal_time
    )
    ours = evaluate_mlm(ours_model, validation, collator, batch_size=32)
    _, hf_steps, hf_model = run_hf(
        args.preset,
        max(10, int(0.95 * budget / hf_step)),
        args.batch_size,
        blocks.train,
        tokenizer,
        workdir,
        lr=args.lr,
        precision=args.precision,
        budget=budget,
    )
    hf = evaluate_mlm(hf_model, validation, collator, batch_size=32)
    print(
        f"equal time, {args.equal_time:g} min each, {ours.targets:,} fixed masked tokens in {len(validation)} held-out "
        f"blocks: tokenmask {ours_steps} steps, accuracy {ours.accuracy:.4f}, loss {ours.loss:.3f}; "
        f"HF Trainer recipe {hf_steps} steps, accuracy {hf.accuracy:.4f}, loss {hf.loss:.3f}"
    )
    return {
        "minutes": args.equal_time,
        "eval_targets": ours.targets,
        "ours": {"steps": ours_steps, **ours.as_dict()},
        "hf": {"steps": hf_steps, **hf.as_dict()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="bert-mini")
    parser.add_argument("--steps", type=int, default=16, help="optimizer steps per throughput run")
    parser.add_argument("--repeats", type=int, default=2, help="throughput runs per side, alternating")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3, help="peak learning rate, both sides")
    parser.add_argument(
        "--precision",
        choices=["fp32", "bf16"],
        default="fp32",
        help="both sides: fp32, or bf16 autocast (the Trainer's bf16=True)",
    )
    parser.add_argument("--equal-time", type=float, metavar="MINUTES", help="also compare accuracy after this training time")
    parser.add_argument(
        "--init",
        choices=["minilm"],
        help="instead: continued pre-training at equal time (--equal-time, default 10 min) against the Trainer, "
        "scored on the King James Bible (benchmarks/continued.py)",
    )
    parser.add_argument("--hf-lr", type=float, default=3e-4, help="with --init: the Trainer's learning rate")
    parser.add_argument(
        "--equal-accuracy",
        type=float,
        metavar="A",
        help="instead: the training time the default run and the Trainer recipe each need to reach fixed-mask accuracy A "
        "(benchmarks/accuracy_time.py; --minutes each at most)",
    )
    parser.add_argument("--minutes", type=float, default=9.0, help="with --equal-accuracy: each side's time budget")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.equal_accuracy:
        from accuracy_time import main as accuracy_time

        accuracy_time(accuracy=args.equal_accuracy, minutes=args.minutes, json_path=args.json)
        return
    if args.init:
        from continued import main as continued

        continued(minutes=args.equal_time or 10.0, hf_lr=args.hf_lr, json_path=args.json)
        return

    tokenizer = load_tokenizer("bert-base-uncased")
    # the same documents, split and blocks as tokenmask's default run (the bundled plays)
    blocks = build_blocks(shakespeare_scenes(), tokenizer, block_length=128, validation_share=VALIDATION_SHARE)
    result = {
        "preset": args.preset,
        "batch": f"{args.batch_size}x128",
        "lr": args.lr,
        "precision": args.precision,
        "threads": torch.get_num_threads(),
        "steps": args.steps,
    }
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        result["throughput"] = throughput(args, tokenizer, blocks.train, workdir)
        if args.equal_time:
            result["equal_time"] = equal_time(args, tokenizer, blocks, workdir, result["throughput"]["hf_s_per_step"])
    if args.json:
        args.json.write_text(json.dumps(result, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
