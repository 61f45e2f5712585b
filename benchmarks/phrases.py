"""PMI and term masking against whole-word masking: vocabulary build time and collator throughput.

Measured on the bundled plays with bert-base-uncased: the time to build the PMI vocabulary
(no cache), and the collator's tokens per second on the same packed 128-token blocks (batches
of 256, the blocks carrying their merged word ids) for ``whole_word``, ``pmi``,
``whole_word`` with terms and ``token`` with terms; the cases are timed interleaved in each
repeat, after a warm-up, and the medians reported with the ratio to whole-word masking.

Run from the repository root::

    python benchmarks/phrases.py              # about 40 s on 2 cores
    python benchmarks/phrases.py --quick      # a smoke run
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from tokenmask import MaskingCollator
from tokenmask.blocks.pack import pack_texts
from tokenmask.blocks.pmi import corpus_vocabulary
from tokenmask.masking import MaskingConfig, UnitConfig
from tokenmask.text.phrases import Phrases
from tokenmask.text.resources import shakespeare_scenes
from tokenmask.text.tokenizer import load_tokenizer

TERMS = (("falstaff",), ("my", "lord"), ("sir", "john"), ("king", "henry"), ("thou", "art"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: fewer blocks and repeats")
    parser.add_argument("--repeats", type=int, default=9, help="timed repeats per case (default: 9)")
    args = parser.parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    tokenizer = load_tokenizer("bert-base-uncased")

    start = time.perf_counter()
    vocabulary = corpus_vocabulary((), tokenizer, UnitConfig(strategy="pmi"), use_cache=False)
    print(f"PMI vocabulary of the plays: {len(vocabulary.entries)} n-grams in {time.perf_counter() - start:.1f} s")

    scenes = shakespeare_scenes()[: 60 if args.quick else 200]
    phrases = Phrases(terms=TERMS, ngrams=vocabulary.ngrams)
    blocks = list(pack_texts(scenes, tokenizer, block_length=128, phrases=phrases))
    batches = [blocks[i : i + 256] for i in range(0, len(blocks) - 255, 256)]
    tokens = sum(len(b["input_ids"]) for batch in batches for b in batch)
    with tempfile.TemporaryDirectory() as folder:
        terms = Path(folder) / "terms.txt"
        terms.write_text("\n".join(" ".join(t) for t in TERMS), encoding="utf-8")
        cases = {
            "whole_word": UnitConfig(strategy="whole_word"),
            "pmi": UnitConfig(strategy="pmi"),
            "whole_word + terms": UnitConfig(strategy="whole_word", mask_terms=str(terms)),
            "token + terms": UnitConfig(strategy="token", mask_terms=str(terms)),
        }
        collators = {name: MaskingCollator.from_config(tokenizer, MaskingConfig(units=u), seed=0) for name, u in cases.items()}
        times: dict[str, list[float]] = {name: [] for name in cases}
        for repeat in range(-1, 2 if args.quick else args.repeats):  # -1: warm-up, not counted
            for name, collator in collators.items():
                begin = time.perf_counter()
                for batch in batches:
                    collator(batch)
                if repeat >= 0:
                    times[name].append(time.perf_counter() - begin)
    base = statistics.median(times["whole_word"])
    print(f"{len(batches)} batches of 256 x 128, {tokens:,} tokens; medians of {len(times['pmi'])} repeats")
    for name, measured in times.items():
        median = statistics.median(measured)
        print(f"  {name:<20} {tokens / median:>12,.0f} tokens/s   {median / base:.2f} x whole-word time")


if __name__ == "__main__":
    main()
