"""Retrieval on SQuAD v1.1 dev (10,570 questions over 2,067 paragraphs): BM25, MiniLM as it is, and MiniLM after
``--minutes`` of ``tokenmask finetune --task retrieval`` on SQuAD's training pairs.

all-MiniLM-L6-v2 was itself trained contrastively on question-paragraph pairs that include SQuAD's
train split, so its row is no zero-shot baseline. Its vectors here are the mean over every attended
token (sentence-transformers' pooling, which it was trained with). BM25 is ``bm25s`` with its
defaults and English stop words. One run each: the scores are deterministic given the model.

    python benchmarks/retrieval.py --minutes 10 --json benchmarks/retrieval-cpu.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=2e-5, help="sentence-transformers' usual rate for MiniLM")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    import torch

    from tokenmask.labelled.pairs import squad_retrieval
    from tokenmask.recipes.config import FinetuneConfig
    from tokenmask.recipes.finetune import finetune
    from tokenmask.settings import build
    from tokenmask.use.embed import load_encoder
    from tokenmask.use.retrieval import bm25_scores, evaluate_retrieval

    if args.threads:
        torch.set_num_threads(args.threads)
    held_out = squad_retrieval()
    rows: dict[str, dict] = {}
    began = time.perf_counter()
    rows["BM25 (bm25s)"] = {"scores": bm25_scores(held_out), "seconds": time.perf_counter() - began}
    encoder, tokenizer = load_encoder("minilm", device="cpu")
    began = time.perf_counter()
    rows["MiniLM as it is"] = {
        "scores": evaluate_retrieval(encoder, tokenizer, held_out).scores,
        "seconds": time.perf_counter() - began,
    }
    with tempfile.TemporaryDirectory() as tmp:
        config = build(FinetuneConfig, {
            "task": "retrieval", "model": "minilm", "output": str(Path(tmp) / "run"), "batch_size": args.batch_size,
            "lr": args.lr, "warmup": 0.1, "max_time": args.minutes, "eval_every": 10**9, "eval_at_start": False, "seed": 0,
            "save_every": 10**9,
        })  # fmt: skip
        result = finetune(config)
        final = result.final.to_dict()
    tuned = f"MiniLM + {args.minutes:g} min contrastive (tokenmask)"
    rows[tuned] = {"scores": {k: final[k] for k in rows["BM25 (bm25s)"]["scores"]}, "steps": result.steps,
                   "pairs_seen": result.steps * args.batch_size}  # fmt: skip
    names = list(rows["BM25 (bm25s)"]["scores"])
    print(f"SQuAD v1.1 dev: {len(held_out.queries):,} questions over {len(held_out.corpus):,} paragraphs")
    print(f"{'':44}" + "".join(f"{n:>11}" for n in names))
    for name, row in rows.items():
        print(f"{name:44}" + "".join(f"{100 * row['scores'][n]:>11.1f}" for n in names))
    if args.json is not None:
        settings = {"minutes": args.minutes, "batch_size": args.batch_size, "lr": args.lr, "threads": torch.get_num_threads()}
        args.json.write_text(json.dumps({"settings": settings, **rows}, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
