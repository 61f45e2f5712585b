"""Time to accuracy: the wall-clock training time tokenmask's default run and the Hugging Face
recipe each need to reach a fixed-mask accuracy on the same held-out blocks.

Run through ``benchmarks/pretrain.py --equal-accuracy A [--minutes M]``.

- tokenmask: the default run (``tokenmask pretrain``: modernbert-tiny, batch 8 x 128, lr 2e-3,
  its schedule fitted to ``M`` minutes), evaluated by the loop every ``EVAL_EVERY`` steps on
  its fixed masks: the first 128 validation blocks of the bundled plays, 15% token masking with
  the seed-0 evaluation masks.
- Hugging Face: ``transformers.Trainer`` + ``DataCollatorForLanguageModeling`` on the same
  model configuration, blocks, batch, learning rate, warm-up and decay (its steps fitted to ``M``
  minutes from a measured pace), bf16 autocast when tokenmask's run uses it; a callback pauses
  its clock every ``EVAL_SECONDS`` of training to score it on the same blocks and masks.

Evaluation time is left out of both clocks. A side's time to ``A`` is its training time at the
first evaluation at or above ``A`` (so it is resolved to one evaluation interval); a side that
never gets there in ``M`` minutes is reported as "not reached", with the accuracy it ended at.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from transformers import DataCollatorForLanguageModeling, Trainer, TrainerCallback, TrainingArguments

from tokenmask import LoopConfig, PretrainConfig
from tokenmask.blocks.build import build_blocks
from tokenmask.collate.collator import MaskingCollator
from tokenmask.recipes.pretrain import pretrain
from tokenmask.text.resources import shakespeare_scenes
from tokenmask.text.tokenizer import load_tokenizer
from tokenmask.train.parallel import resolve_precision
from tokenmask.train.presets import build_model
from tokenmask.use.evaluate import EVAL_SEED_OFFSET, evaluate_mlm

EVAL_EVERY = 400  # tokenmask's steps between evaluations (about 20 s of training on 2 cores)
EVAL_SECONDS = 20.0  # the Trainer's training seconds between evaluations
CALIBRATION_STEPS = 25


def run_ours(workdir: Path, minutes: float) -> tuple[list[tuple[float, float]], str]:
    """The default run for ``minutes``; its evaluations as (training seconds, accuracy), and its precision."""
    config = PretrainConfig(
        loop=LoopConfig(output=str(workdir / "ours"), max_time=minutes, eval_every=EVAL_EVERY, overwrite=True)
    )
    pretrain(config)
    records = [json.loads(line) for line in (workdir / "ours" / "metrics.jsonl").read_text().splitlines()]
    steps = {0: 0.0, **{r["step"]: r["seconds"] for r in records if "loss" in r}}  # seconds since the start, evaluations included
    times = [steps[number] for number in sorted(steps)]
    typical = statistics.median(b - a for a, b in zip(times[1:], times[2:]))
    accuracies = {r["step"]: r["eval_accuracy"] for r in records if "eval_accuracy" in r}
    points, spent = [], 0.0  # spent: the evaluations' cost so far
    for step in sorted(accuracies):
        points.append((steps[step] - spent, accuracies[step]))
        if step + 1 in steps:  # it ran between its step and the next (step 0's before step 1): that gap less a step
            spent += steps[step + 1] - steps[step] - typical
    return points, resolve_precision("auto", torch.device("cpu"))


class EvaluatingClock(TrainerCallback):
    """Scores the model every ``interval`` training seconds (clock paused) and stops at ``budget``."""

    def __init__(self, blocks: list[dict[str, Any]], collator: MaskingCollator, *, interval: float, budget: float) -> None:
        self.blocks, self.collator, self.interval, self.budget = blocks, collator, interval, budget
        self.trained, self.began = 0.0, 0.0
        self.points: list[tuple[float, float]] = []
        self.step_times: list[float] = []

    def on_step_begin(self, args, state, control, **kwargs):
        self.began = time.perf_counter()

    def on_step_end(self, args, state, control, model=None, **kwargs):
        spent = time.perf_counter() - self.began
        self.trained += spent
        self.step_times.append(spent)
        if not self.points or self.trained - self.points[-1][0] >= self.interval or self.trained >= self.budget:
            model.eval()
            self.points.append((self.trained, evaluate_mlm(model, self.blocks, self.collator, batch_size=32).accuracy))
            model.train()
        if self.trained >= self.budget:
            control.should_training_stop = True


def run_hf(workdir: Path, tokenizer, blocks, *, steps: int, bf16: bool, clock: EvaluatingClock) -> EvaluatingClock:
    torch.manual_seed(0)
    model = build_model("modernbert-tiny", vocab_size=len(tokenizer), max_length=128, pad_token_id=tokenizer.pad_token_id)
    defaults = LoopConfig()
    args = TrainingArguments(
        output_dir=str(workdir / "hf"), per_device_train_batch_size=defaults.batch_size, max_steps=steps,
        learning_rate=defaults.lr, adam_beta2=0.98, adam_epsilon=1e-6, weight_decay=0.01, warmup_steps=defaults.warmup,
        lr_scheduler_type="linear", max_grad_norm=1.0, bf16=bf16, report_to=[], use_cpu=True, save_strategy="no",
        logging_strategy="no", dataloader_num_workers=0, seed=0, disable_tqdm=True,
    )  # fmt: skip
    data = [{"input_ids": b["input_ids"]} for b in blocks.train]
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15)
    Trainer(model=model, args=args, train_dataset=data, data_collator=collator, callbacks=[clock]).train()
    return clock


def first_at(points: list[tuple[float, float]], accuracy: float) -> float | None:
    return next((seconds for seconds, reached in points if reached >= accuracy), None)


def main(*, accuracy: float, minutes: float, json_path: Path | None) -> None:
    tokenizer = load_tokenizer("bert-base-uncased")
    blocks = build_blocks(shakespeare_scenes(), tokenizer, block_length=128, validation_share=0.02)
    validation = list(blocks.validation[:128])
    masks = MaskingCollator(tokenizer, seed=EVAL_SEED_OFFSET)  # the default run's evaluation masks (seed 0)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        ours, precision = run_ours(workdir, minutes)
        bf16 = precision == "bf16"
        pace = EvaluatingClock(validation, masks, interval=float("inf"), budget=float("inf"))
        run_hf(workdir, tokenizer, blocks, steps=CALIBRATION_STEPS, bf16=bf16, clock=pace)
        step = statistics.median(pace.step_times[3:])
        budget = minutes * 60
        clock = EvaluatingClock(validation, masks, interval=EVAL_SECONDS, budget=budget)
        hf = run_hf(workdir, tokenizer, blocks, steps=max(10, int(budget / step)), bf16=bf16, clock=clock).points
    ours_time, hf_time = first_at(ours, accuracy), first_at(hf, accuracy)
    ratio = hf_time / ours_time if ours_time and hf_time else None
    print(
        f"time to fixed-mask accuracy {accuracy:g} (128 held-out blocks, {precision}, {minutes:g} min each at most): "
        f"tokenmask {_when(ours_time, ours)}, HF Trainer recipe {_when(hf_time, hf)}"
        + (f": tokenmask needs {1 / ratio:.2f} of HF's time ({ratio:.1f}x faster)" if ratio else "")
    )
    if json_path is not None:
        result = {"accuracy": accuracy, "minutes": minutes, "precision": precision, "hf_seconds_per_step": step,
                  "ours": {"seconds": ours_time, "curve": ours}, "hf": {"seconds": hf_time, "curve": hf}, "ratio": ratio}  # fmt: skip
        json_path.write_text(json.dumps(result, indent=2), encoding="utf-8")


def _when(seconds: float | None, points: list[tuple[float, float]]) -> str:
    if seconds is None:
        return f"not reached (ended at {points[-1][1]:.3f} after {points[-1][0] / 60:.1f} min)"
    return f"{seconds / 60:.2f} min"
