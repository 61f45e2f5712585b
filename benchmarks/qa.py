"""Question answering at equal time: ``tokenmask finetune --task qa`` against a Hugging Face ``Trainer``
pipeline shaped like ``run_qa.py``, on SQuAD v1.1, with MiniLM.

Both sides start from all-MiniLM-L6-v2 (``minilm``), train on the 87,599 SQuAD train questions for the
same wall-clock minutes with the same batch size, learning rate, warm-up share and linear decay, and
are scored on the same 1,000 dev questions (every tenth) with SQuAD v1.1's exact match and F1
(:mod:`tokenmask.use.answer_scores`, the official definitions), in percent as SQuAD reports them. They run at the same time, each on
``--threads`` CPU threads, so both meet the same machine.

- tokenmask: ``finetune`` with ``task="qa"``: windows of 384 sharing 128, batches grouped by length
  and padded to their longest window, its time limit fitting the schedule.
- Hugging Face, as ``run_qa.py`` does it: ``datasets.map`` over the questions (question stripped on
  the left, ``truncation="only_second"``, stride 128, ``padding="max_length"``), labels at ``[CLS]``
  for a window without the whole answer, ``Trainer`` with ``default_data_collator``; its steps are
  fitted to the minutes from a measured pace. Its post-processing is ``postprocess_qa_predictions``'s
  (the 20 best starts and ends per window, spans inside the context, at most 30 tokens, the best
  start + end logit over a question's windows), written here from that description.

Tokenising is left out of both clocks. ``--tiny`` is a smoke run on a few questions (the tests run it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np


def squad_slices(train_questions: int | None, eval_questions: int):
    from tokenmask.labelled.questions import read_questions, squad_file

    train = read_questions(squad_file("train"))
    return train[:train_questions] if train_questions else train, read_questions(squad_file("dev"))[::10][:eval_questions]


def run_ours(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    from tokenmask.recipes.config import FinetuneConfig
    from tokenmask.recipes.finetune import finetune
    from tokenmask.settings import build

    settings: dict[str, Any] = {
        "task": "qa", "model": "minilm", "output": str(workdir / "ours"), "batch_size": args.batch_size, "lr": args.lr,
        "warmup": 0.1, "max_time": args.minutes, "eval_every": 10**9, "eval_at_start": False, "seed": 0, "save_every": 10**9,
    }  # fmt: skip
    if args.train_questions or args.eval_questions != 1000:  # the built-in squad is all of train and these 1,000
        train, evaluation = write_slices(workdir, *squad_slices(args.train_questions, args.eval_questions))
        settings.update(data=(train,), eval=(evaluation,))
    result = finetune(build(FinetuneConfig, settings))
    records = [json.loads(line) for line in (workdir / "ours" / "metrics.jsonl").read_text().splitlines()]
    final = result.final.metrics()
    return {"exact_match": 100 * final["exact_match"], "f1": 100 * final["f1"], "steps": result.steps,
            "train_seconds": max(r["seconds"] for r in records if "loss" in r), "windows_seen": result.steps * args.batch_size}  # fmt: skip


def write_slices(workdir: Path, train, evaluation) -> tuple[str, str]:
    paths = []
    for name, questions in (("train", train), ("eval", evaluation)):
        path = workdir / f"{name}.jsonl"
        with path.open("w", encoding="utf-8") as handle:
            for q in questions:
                answers = {"text": [a.text for a in q.answers], "answer_start": [a.start for a in q.answers]}
                handle.write(json.dumps({"question": q.question, "context": q.context, "answers": answers}) + "\n")
        paths.append(str(path))
    return paths[0], paths[1]


# ---- the Hugging Face side ------------------------------------------------------------------


def hf_train_features(questions, tokenizer, max_length: int, stride: int):
    """``prepare_train_features`` of ``run_qa.py``: padded windows, labels at [CLS] when the answer is not whole."""
    from datasets import Dataset

    rows = Dataset.from_dict({
        "question": [q.question for q in questions], "context": [q.context for q in questions],
        "answer_start": [q.answers[0].start for q in questions], "answer_text": [q.answers[0].text for q in questions],
    })  # fmt: skip

    def prepare(batch):
        encoded = tokenizer(
            [q.lstrip() for q in batch["question"]], batch["context"], truncation="only_second", max_length=max_length,
            stride=stride, return_overflowing_tokens=True, return_offsets_mapping=True, padding="max_length",
        )  # fmt: skip
        starts, ends = [], []
        for i, offsets in enumerate(encoded["offset_mapping"]):
            cls = encoded["input_ids"][i].index(tokenizer.cls_token_id)
            sequence = encoded.sequence_ids(i)
            sample = encoded["overflow_to_sample_mapping"][i]
            first = batch["answer_start"][sample]
            last = first + len(batch["answer_text"][sample])
            token_start = sequence.index(1)
            token_end = len(sequence) - 1 - sequence[::-1].index(1)
            if not (offsets[token_start][0] <= first and offsets[token_end][1] >= last):
                starts.append(cls)
                ends.append(cls)
                continue
            while token_start < len(offsets) and offsets[token_start][0] <= first:
                token_start += 1
            while offsets[token_end][1] >= last:
                token_end -= 1
            starts.append(token_start - 1)
            ends.append(token_end + 1)
        encoded.pop("offset_mapping")
        encoded.pop("overflow_to_sample_mapping")
        return {**encoded, "start_positions": starts, "end_positions": ends}

    return rows.map(prepare, batched=True, remove_columns=rows.column_names)


def hf_eval_features(questions, tokenizer, max_length: int, stride: int):
    """``prepare_validation_features``: padded windows, offsets kept for the context's tokens only."""
    encoded = tokenizer(
        [q.question.lstrip() for q in questions], [q.context for q in questions], truncation="only_second",
        max_length=max_length, stride=stride, return_overflowing_tokens=True, return_offsets_mapping=True,
        padding="max_length",
    )  # fmt: skip
    owners, offsets = [], []
    for i, mapping in enumerate(encoded["offset_mapping"]):
        sequence = encoded.sequence_ids(i)
        owners.append(encoded["overflow_to_sample_mapping"][i])
        offsets.append([span if sequence[k] == 1 else None for k, span in enumerate(mapping)])
    features = [
        {key: encoded[key][i] for key in ("input_ids", "attention_mask", "token_type_ids") if key in encoded}
        for i in range(len(owners))
    ]
    return features, owners, offsets


def hf_postprocess(questions, owners, offsets, starts, ends, *, n_best: int = 20, max_answer_length: int = 30) -> dict[str, str]:
    """``postprocess_qa_predictions`` for SQuAD v1: over a question's windows, the admissible span with the best start + end logit."""
    best: dict[int, tuple[float, str]] = {}
    for feature, owner in enumerate(owners):
        mapping, start_logits, end_logits = offsets[feature], starts[feature], ends[feature]
        for s in np.argsort(start_logits)[-1 : -n_best - 1 : -1]:
            for e in np.argsort(end_logits)[-1 : -n_best - 1 : -1]:
                if s >= len(mapping) or e >= len(mapping) or mapping[s] is None or mapping[e] is None:
                    continue
                if e < s or e - s + 1 > max_answer_length:
                    continue
                score = float(start_logits[s] + end_logits[e])
                if owner not in best or score > best[owner][0]:
                    best[owner] = (score, questions[owner].context[mapping[s][0] : mapping[e][1]])
    return {questions[owner].id: text for owner, (_, text) in best.items()}


def run_hf(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    import torch
    from transformers import AutoModelForQuestionAnswering, Trainer, TrainerCallback, TrainingArguments, default_data_collator

    from tokenmask.train.classifier import load_classifier_tokenizer
    from tokenmask.train.names import resolve_checkpoint
    from tokenmask.train.parallel import resolve_precision
    from tokenmask.use.answer_scores import answer_scores

    train_questions, eval_questions = squad_slices(args.train_questions, args.eval_questions)
    tokenizer = load_classifier_tokenizer("minilm")
    train = hf_train_features(train_questions, tokenizer, 384, 128)
    folder = resolve_checkpoint("minilm").folder
    bf16 = resolve_precision("auto", torch.device("cpu")) == "bf16"

    class Clock(TrainerCallback):
        """Wall-clock seconds from the first step's start (the Trainer's own work between steps included, as
        tokenmask's clock includes its loop's); stops the run at ``budget``."""

        def __init__(self, budget: float) -> None:
            self.budget, self.trained, self.times, self.began, self.last = budget, 0.0, [], None, 0.0

        def on_step_begin(self, args, state, control, **kwargs):
            self.began = self.began or time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            now = time.perf_counter()
            self.times.append(now - (self.last or self.began))
            self.last, self.trained = now, now - self.began
            if self.trained >= self.budget:  # never unset: the Trainer's own callback stops it at max_steps
                control.should_training_stop = True

    def trainer(steps: int, clock: Clock) -> Trainer:
        torch.manual_seed(0)
        model = AutoModelForQuestionAnswering.from_pretrained(folder)
        arguments = TrainingArguments(
            output_dir=str(workdir / "hf"), per_device_train_batch_size=args.batch_size, max_steps=steps,
            learning_rate=args.lr, warmup_steps=max(1, round(0.1 * steps)), lr_scheduler_type="linear", bf16=bf16, use_cpu=True,
            save_strategy="no", logging_strategy="no", report_to=[], dataloader_num_workers=0, seed=0, disable_tqdm=True,
        )  # fmt: skip
        return Trainer(model=model, args=arguments, train_dataset=train, data_collator=default_data_collator, callbacks=[clock])

    budget = args.minutes * 60
    pace = Clock(float("inf"))
    trainer(args.calibration_steps, pace).train()
    per_step = float(np.median(pace.times[1:])) if len(pace.times) > 1 else pace.times[0]
    clock = Clock(budget)
    steps = max(2, int(budget / per_step))
    fitted = trainer(steps, clock)
    fitted.train()
    features, owners, offsets = hf_eval_features(eval_questions, tokenizer, 384, 128)
    model = fitted.model.eval()
    starts, ends = [], []
    with torch.no_grad():
        for i in range(0, len(features), 32):
            batch = default_data_collator(features[i : i + 32])
            out = model(**batch)
            starts.extend(out.start_logits.float().numpy())
            ends.extend(out.end_logits.float().numpy())
    predictions = hf_postprocess(eval_questions, owners, offsets, starts, ends)
    scores = answer_scores(predictions, {q.id: [a.text for a in q.answers] for q in eval_questions})
    return {"exact_match": 100 * scores["exact_match"], "f1": 100 * scores["f1"], "steps": len(clock.times), "train_seconds": clock.trained, "windows_seen": len(clock.times) * args.batch_size,
            "fitted_steps": steps, "seconds_per_step": per_step}  # fmt: skip


# ---- both, side by side -------------------------------------------------------------------------


def side(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        result = (run_ours if args.side == "ours" else run_hf)(args, Path(tmp))
    Path(args.out).write_text(json.dumps(result), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--threads", type=int, default=1, help="CPU threads of each side (they run at once)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--train-questions", type=int, default=None, help="the first N train questions (default all)")
    parser.add_argument("--eval-questions", type=int, default=1000)
    parser.add_argument("--calibration-steps", type=int, default=4)
    parser.add_argument("--tiny", action="store_true", help="a smoke run: 64 questions, 4 to score, a few seconds")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--side", choices=("ours", "hf"), help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.tiny:
        args.minutes, args.train_questions, args.eval_questions, args.calibration_steps = 0.05, 64, 4, 2
    if args.side:
        return side(args)
    with tempfile.TemporaryDirectory() as tmp:
        outs = {name: Path(tmp) / f"{name}.json" for name in ("ours", "hf")}
        env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "TOKENIZERS_PARALLELISM": "false"}
        given = [a for a in sys.argv[1:] if a not in ("--json",) and not a.endswith(".json")]
        running = [
            subprocess.Popen([sys.executable, __file__, *given, "--side", name, "--out", str(out)], env=env)
            for name, out in outs.items()
        ]
        codes = [process.wait() for process in running]  # both, whatever the first gives
        if any(codes):
            raise SystemExit("a side failed")
        results = {name: json.loads(out.read_text()) for name, out in outs.items()}
    ours, hf = results["ours"], results["hf"]
    print(
        f"SQuAD v1.1, {args.eval_questions:,} dev questions, minilm, {args.minutes:g} min each on {args.threads} thread(s), "
        f"batch {args.batch_size}, lr {args.lr:g}:"
    )
    for name, result in (("tokenmask", ours), ("HF Trainer (run_qa.py)", hf)):
        print(
            f"  {name:<24} EM {result['exact_match']:5.1f}  F1 {result['f1']:5.1f}  {result['steps']:,} steps, "
            f"{result['windows_seen']:,} windows in {result['train_seconds'] / 60:.1f} min"
        )
    if args.json is not None:
        settings = {k: getattr(args, k) for k in ("minutes", "threads", "batch_size", "lr", "train_questions", "eval_questions")}
        args.json.write_text(json.dumps({"settings": settings, "machine": machine(), **results}, indent=2), encoding="utf-8")


def machine() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    except OSError:
        names = []
    return f"{names[0] if names else 'unknown CPU'}, {os.cpu_count()} cores"


if __name__ == "__main__":
    main()
