"""The GPU recipe, measured: tokens/s, step time, MFU and masking on the device, against the Trainer,
and the 2025 encoder recipe at ModernBERT-base's shape.

1. For each model (BERT-base, ModernBERT-base) and sequence length (128, 512), on the same blocks of the
   bundled plays and at the same batch:

   - tokenmask's recipe: blocks in pinned host memory copied with ``non_blocking``, masking on the
     device (``mask_tokens(..., backend="torch")``, token strategy, 15%, 80/10/10), bf16 autocast on
     CUDA, the sparse prediction head, fused AdamW, optionally ``torch.compile`` of the encoder
     (``--compile``, as ``tokenmask pretrain --compile``);
   - the Hugging Face recipe: ``transformers.Trainer`` + ``DataCollatorForLanguageModeling`` (full
     prediction head), bf16 on CUDA, the same batch.

2. ModernBERT-base (22 layers, 768) at 1,024 tokens, batch 16, on blocks packed from the plays cut into
   passages of about 80 words (short documents, several per block, as ModernBERT's corpus), four ways: documents sharing
   attention or kept apart (``pretrain --packing documents``: torch's ``varlen_attn`` on CUDA), each
   without and with ``torch.compile``. Printed beside ModernBERT's published 304k tokens/s per H100
   (about 25% MFU).

MFU is :func:`tokenmask.train.speed.flops_per_token` (6 × the encoder's non-embedding parameters, the
attention over the whole block, also with documents apart, so both ways count the same work; the
head and the last layer at the 15% of targets) times tokens/s over the device's dense
bf16 peak (:func:`tokenmask.train.speed.peak_flops`: 989 TFLOP/s for H100/H200 SXM, 312 for A100;
``--peak-tflops`` for others). Masking throughput is ``mask_tokens`` alone on a device batch, in
billions of tokens per second, and its share of the step. ``--tiny --device cpu`` runs the same code
on tiny models in about a minute (without compiling), so the script cannot rot (the test suite runs it).

Run from the repository root::

    python benchmarks/gpu.py --json gpu.json           # on a GPU: the one prepared command
    python benchmarks/gpu.py --tiny --device cpu        # the CI check
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import DataCollatorForLanguageModeling, PreTrainedModel, Trainer, TrainerCallback, TrainingArguments

from tokenmask.blocks.build import build_blocks
from tokenmask.masking import CorruptionConfig, SelectionConfig, mask_tokens
from tokenmask.text.resources import shakespeare_scenes
from tokenmask.text.token_tables import tables_from_tokenizer
from tokenmask.text.tokenizer import load_tokenizer
from tokenmask.train.documents import keep_documents_apart
from tokenmask.train.heads import compile_encoder, masked_lm_loss
from tokenmask.train.presets import build_model
from tokenmask.train.speed import flops_per_token, peak_flops

RATE = 0.15


@dataclass(frozen=True)
class Case:
    model: str  # a tokenmask preset, or "modernbert-base"
    length: int
    batch: int


def build(name: str, vocab_size: int, length: int, pad_token_id: int) -> PreTrainedModel:
    """A freshly initialised model: a tokenmask preset, or ModernBERT-base's shape (22 layers, 768)."""
    if name != "modernbert-base":
        return build_model(name, vocab_size=vocab_size, max_length=length, pad_token_id=pad_token_id)
    from transformers import ModernBertConfig, ModernBertForMaskedLM

    config = ModernBertConfig(
        vocab_size=vocab_size, hidden_size=768, num_hidden_layers=22, num_attention_heads=12, intermediate_size=1152,
        max_position_embeddings=max(512, length), pad_token_id=pad_token_id,
        bos_token_id=None, eos_token_id=None, cls_token_id=None, sep_token_id=None,
    )  # fmt: skip
    return ModernBertForMaskedLM(config)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_ours(
    case: Case,
    blocks: torch.Tensor,
    vocab,
    tokenizer,
    device: torch.device,
    steps: int,
    *,
    compile: bool,
    documents: bool = False,
) -> dict:
    """tokenmask's recipe for ``steps`` steps: median step seconds and the masking share (``documents``:
    each packed document attends to itself, as ``pretrain --packing documents``)."""
    torch.manual_seed(0)
    model = build(case.model, len(tokenizer), case.length, tokenizer.pad_token_id).to(device)
    if documents:
        assert keep_documents_apart(model, separator=tokenizer.sep_token_id) is None
    if compile:
        compile_encoder(model)  # as `tokenmask pretrain --compile`
    fused = device.type in ("cpu", "cuda")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-6, fused=fused)
    bf16 = device.type == "cuda" and torch.cuda.is_bf16_supported()
    pinned = blocks.pin_memory() if device.type == "cuda" else blocks
    step_times, mask_times = [], []
    for step in range(steps):
        rows = torch.arange(step * case.batch, (step + 1) * case.batch) % len(pinned)
        synchronize(device)
        started = time.perf_counter()
        ids = pinned[rows].to(device, non_blocking=True)
        masked = mask_tokens(
            ids, vocab=vocab, example_ids=rows.to(device), seed=0, selection=SelectionConfig(mlm_probability=RATE),
            corruption=CorruptionConfig(), backend="torch",
        )  # fmt: skip
        synchronize(device)
        mask_times.append(time.perf_counter() - started)
        batch = {"input_ids": masked.input_ids, "attention_mask": torch.ones_like(ids), "labels": masked.labels}
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            loss = masked_lm_loss(model, batch, count_correct=False)
        (loss.loss_sum / max(loss.targets, 1)).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        synchronize(device)
        step_times.append(time.perf_counter() - started)
    skip = min(3, steps - 1)  # warm-up (and compilation) left out
    step = statistics.median(step_times[skip:])
    return {"s_per_step": step, "mask_share": statistics.median(mask_times[skip:]) / step}


class StepClock(TrainerCallback):
    """Wall time at the end of every Trainer step (synchronised with the device)."""

    def __init__(self, device: torch.device) -> None:
        self.device, self.times = device, []

    def on_step_end(self, args, state, control, **kwargs):
        synchronize(self.device)
        self.times.append(time.perf_counter())


def run_hf(case: Case, blocks: torch.Tensor, tokenizer, device: torch.device, steps: int, workdir: Path) -> float:
    """The Trainer recipe for ``steps`` steps: median step seconds."""
    torch.manual_seed(0)
    model = build(case.model, len(tokenizer), case.length, tokenizer.pad_token_id)
    clock = StepClock(device)
    args = TrainingArguments(
        output_dir=str(workdir / "hf"), per_device_train_batch_size=case.batch, max_steps=steps, learning_rate=1e-4,
        report_to=[], use_cpu=device.type == "cpu", bf16=device.type == "cuda" and torch.cuda.is_bf16_supported(),
        save_strategy="no", logging_strategy="no", dataloader_num_workers=0, seed=0, disable_tqdm=True,
    )  # fmt: skip
    data = [{"input_ids": row.tolist()} for row in blocks[: steps * case.batch]]
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=RATE)
    Trainer(model=model, args=args, train_dataset=data, data_collator=collator, callbacks=[clock]).train()
    gaps = [b - a for a, b in zip(clock.times, clock.times[1:])]
    return statistics.median(gaps[2:] or gaps)


def masking_rate(blocks: torch.Tensor, vocab, device: torch.device, batch: int, repeats: int) -> float:
    """Tokens per second of ``mask_tokens`` alone on a device batch (median of ``repeats``)."""
    ids = blocks[:batch].to(device)
    example_ids = torch.arange(len(ids), device=device)
    times = []
    for epoch in range(repeats + 1):
        synchronize(device)
        started = time.perf_counter()
        mask_tokens(ids, vocab=vocab, example_ids=example_ids, seed=0, epoch=epoch, backend="torch")
        synchronize(device)
        times.append(time.perf_counter() - started)
    return ids.numel() / statistics.median(times[1:])


PUBLISHED = "ModernBERT's paper: 304k tokens/s per H100, about 25% MFU"


def passages(count: int | None) -> list[str]:
    """The plays cut into passages of 80 words or more, ended at a sentence's end: short documents."""
    out: list[str] = []
    for scene in list(shakespeare_scenes())[:count]:
        words: list[str] = []
        for word in scene.split():
            words.append(word)
            if len(words) >= 80 and word.endswith((".", "!", "?")):
                out.append(" ".join(words))
                words = []
        out += [" ".join(words)] if words else []
    return out


def full_blocks(texts: list[str], tokenizer, length: int) -> torch.Tensor:
    built = build_blocks(texts, tokenizer, block_length=length, validation_share=0.0, progress=False)
    return torch.tensor([list(b["input_ids"]) for b in built.train if len(b["input_ids"]) == length], dtype=torch.int64)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--tiny", action="store_true", help="tiny models, short rows, few steps (the CI check)")
    parser.add_argument("--steps", type=int, default=None, help="steps per run (default 30; --tiny 6)")
    parser.add_argument("--compile", action="store_true", help="torch.compile tokenmask's model in part 1")
    parser.add_argument("--peak-tflops", type=float, default=None, help="the device's dense bf16 peak, if not known")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args()
    device = torch.device(args.device)
    steps = args.steps or (6 if args.tiny else 30)
    if args.tiny:
        cases, recipe = [Case("bert-tiny", 32, 8), Case("modernbert-tiny", 64, 4)], Case("modernbert-tiny", 128, 4)
    else:
        cases = [Case(m, length, 64 if length == 128 else 16) for m in ("bert-base", "modernbert-base") for length in (128, 512)]
        recipe = Case("modernbert-base", 1024, 16)
    tokenizer = load_tokenizer("bert-base-uncased")
    vocab = tables_from_tokenizer(tokenizer)
    peak = peak_flops(device, args.peak_tflops)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    print(f"device: {name}; peak bf16 {peak / 1e12:.0f} TFLOP/s" if peak else f"device: {name}; peak unknown (no MFU)")
    results: dict = {"device": name, "peak_flops": peak, "steps": steps, "compile": args.compile, "cases": [], "recipe": []}

    @functools.cache
    def flops_of(case: Case) -> float:  # one model built per shape, not per variant
        model = build(case.model, len(tokenizer), case.length, tokenizer.pad_token_id)
        return flops_per_token(model, length=case.length, target_share=RATE)

    def speed(case: Case, seconds: float) -> tuple[float, float | None, float]:
        tokens, flops = case.batch * case.length / seconds, flops_of(case)
        return tokens, None if peak is None else flops * tokens / peak, flops

    texts = list(shakespeare_scenes())[: 200 if args.tiny else None]
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            blocks = full_blocks(texts, tokenizer, case.length)
            ours = run_ours(case, blocks, vocab, tokenizer, device, steps, compile=args.compile)
            hf_step = run_hf(case, blocks, tokenizer, device, steps, Path(tmp))
            tokens_per_s, mfu, flops = speed(case, ours["s_per_step"])
            row = {
                **case.__dict__, "tokens_per_s": tokens_per_s, "s_per_step": ours["s_per_step"],
                "hf_tokens_per_s": case.batch * case.length / hf_step, "ratio": hf_step / ours["s_per_step"],
                "flops_per_token": flops, "mfu": mfu, "mask_share": ours["mask_share"],
                "mask_gtok_per_s": masking_rate(blocks, vocab, device, case.batch * 4, repeats=5) / 1e9,
            }  # fmt: skip
            results["cases"].append(row)
            shown = "" if mfu is None else f", MFU {100 * mfu:.1f}%"
            print(
                f"{case.model} x {case.length}, batch {case.batch}: {tokens_per_s:,.0f} tok/s "
                f"({1000 * row['s_per_step']:.1f} ms/step){shown}; Trainer {row['hf_tokens_per_s']:,.0f} tok/s "
                f"({row['ratio']:.2f}x); masking {row['mask_gtok_per_s']:.3f} Gtok/s, {100 * row['mask_share']:.1f}% of the step; "
                f"{flops / 1e9:.2f} GFLOP/token"
            )
    blocks = full_blocks(passages(200 if args.tiny else None), tokenizer, recipe.length)
    documents_per_block = float((blocks == tokenizer.sep_token_id).sum(dim=1).float().mean())
    print(f"{recipe.model} x {recipe.length}, batch {recipe.batch}, {documents_per_block:.1f} documents per block ({PUBLISHED}):")
    for documents in (False, True):
        for compiled in (False,) if args.tiny else (False, True):
            ours = run_ours(recipe, blocks, vocab, tokenizer, device, steps, compile=compiled, documents=documents)
            tokens_per_s, mfu, _ = speed(recipe, ours["s_per_step"])
            results["recipe"].append({**recipe.__dict__, "documents": documents, "compile": compiled,
                                      "tokens_per_s": tokens_per_s, "mfu": mfu, "s_per_step": ours["s_per_step"]})  # fmt: skip
            shown = "" if mfu is None else f", MFU {100 * mfu:.1f}%"
            how = f"{'documents apart' if documents else 'documents share attention'}{', compiled' if compiled else ''}"
            print(f"  {how}: {tokens_per_s:,.0f} tok/s{shown}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
