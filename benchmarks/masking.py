"""Throughput of tokenmask's masking against Hugging Face's ``DataCollatorForLanguageModeling``.

Measured, in tokens per second (tokens = real, non-padding tokens of the batch, [CLS] and
[SEP] included), on the same inputs for both sides:

- ``collator token``: ``MaskingCollator.__call__`` vs ``DataCollatorForLanguageModeling.__call__``
  on a list of dicts (ragged rows, padded by the collator);
- ``collator whole-word``: the same with ``strategy="whole_word"`` / ``whole_word_mask=True``;
- ``collator token, arrays`` / ``collator whole-word, arrays``: the same with the rows as int32
  numpy arrays (as the block store and ``datasets`` in numpy format give them) on both sides;
- ``bare token``: :func:`tokenmask.masking.mask_tokens` vs HF ``torch_mask_tokens`` on padded
  tensors with a precomputed special-tokens mask;
- ``bare whole-word``: ``mask_tokens(..., unit_config=UnitConfig("whole_word"))`` vs HF
  ``torch_mask_tokens(..., offset_mapping=...)`` of a ``whole_word_mask=True`` collator.

Inputs are real bert-base-uncased WordPiece ids of Shakespeare's scenes, ``[CLS] … [SEP]``
rows of 64×512 and 512×128, about 30% of the rows shorter (so padded). Each case runs with 1
and 2 torch threads; ours and HF's are timed interleaved in the same repeat loop (their order
alternating) after a warm-up call, and the table reports medians over the repeats and the ratio
HF time / our time. Both sides are sanity-checked on each batch before any timing.

Run from the repository root::

    python benchmarks/masking.py                  # full run, about 70 s on 2 cores
    python benchmarks/masking.py --quick          # smoke run, about 15 s
    python benchmarks/masking.py --repeats 31 --json bench.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
import transformers
from transformers import DataCollatorForLanguageModeling, PreTrainedTokenizerFast

from tokenmask import IGNORE_INDEX, MaskingCollator, Outcome, UnitConfig, mask_tokens
from tokenmask.masking import MaskedBatch, VocabTables
from tokenmask.text.resources import shakespeare_scenes
from tokenmask.text.token_tables import tables_from_tokenizer
from tokenmask.text.tokenizer import load_tokenizer

SHAPES: tuple[tuple[int, int], ...] = ((64, 512), (512, 128))
THREADS: tuple[int, ...] = (1, 2)
MLM_PROBABILITY = 0.15
SHORT_SHARE = 0.3  # share of rows shorter than the batch width
RATE_TOLERANCE = 0.03  # sanity: selected share of eligible tokens within 0.15 ± this
SCENES_PER_CHUNK = 32  # scenes tokenized at a time while building rows
TARGETS: dict[str, float] = {
    "collator token": 20.0,
    "collator whole-word": 30.0,
    "collator token, arrays": 20.0,
    "collator whole-word, arrays": 30.0,
    "bare token": 4.0,
}

HF_WHOLE_WORD_NEEDS = (
    "transformers {version}: whole_word_mask=True finds words from 'offset_mapping' (a token "
    "starts a word when its start offset differs from the previous token's end, or the previous "
    "token is special); it ignores word_ids. tokenizer.pad does not pad 'offset_mapping', so "
    "each feature carries it pre-padded with (0, 0) to the batch width (outside the timing); "
    "'special_tokens_mask' is left out and computed by HF per row, as for token masking. "
    "HF forces mask_replace_prob=1 (no random replacements) with whole words; ours keeps 80/10/10."
)


@dataclass(frozen=True)
class Row:
    """One example: ``[CLS] pieces [SEP]`` with per-token word ids (-1 on specials) and offsets."""

    input_ids: list[int]
    word_ids: list[int]
    offsets: list[tuple[int, int]]


@dataclass(frozen=True)
class Inputs:
    """A batch in every form the two sides take."""

    ours_features: list[dict[str, Any]]
    hf_token_features: list[dict[str, Any]]
    hf_word_features: list[dict[str, Any]]
    ours_array_features: list[dict[str, Any]]  # the same rows as int32 numpy arrays
    hf_token_array_features: list[dict[str, Any]]
    hf_word_array_features: list[dict[str, Any]]
    input_ids: torch.Tensor  # (B, T) int64, right-padded
    special_tokens_mask: torch.Tensor  # (B, T) bool: [CLS], [SEP] and padding
    word_ids: torch.Tensor  # (B, T) int64, -1 on specials and padding
    offsets: torch.Tensor  # (B, T, 2) int64, (0, 0) on specials and padding
    example_ids: torch.Tensor  # (B,) int64
    lengths: torch.Tensor  # (B,) int64 real (non-padding) tokens per row

    @property
    def tokens(self) -> int:
        return int(self.lengths.sum())


@dataclass(frozen=True)
class Case:
    """One comparison: two zero-argument callables doing the same work on the same batch."""

    what: str
    ours: Callable[[], Any]
    hf: Callable[[], Any]


@dataclass(frozen=True)
class Result:
    """Medians of one case at one shape and thread count."""

    shape: str
    threads: int
    what: str
    ours_tokens_per_s: float
    hf_tokens_per_s: float
    ratio: float
    target: float | None
    ours_median_ms: float
    hf_median_ms: float
    repeats: int


# --------------------------------------------------------------------------------------- inputs


def scene_encodings(tokenizer: PreTrainedTokenizerFast) -> Iterator[Any]:
    """Fast-tokenizer encodings of Shakespeare's scenes, in order, without special tokens."""
    scenes = shakespeare_scenes()
    for start in range(0, len(scenes), SCENES_PER_CHUNK):
        batch = tokenizer(
            scenes[start : start + SCENES_PER_CHUNK],
            add_special_tokens=False,
            return_offsets_mapping=True,
        )
        yield from batch.encodings


def row_lengths(batch: int, width: int, rng: np.random.Generator) -> np.ndarray:
    """``(B,)`` row lengths: ``width``, except ~30% of rows drawn from ``[width/4, width)``."""
    lengths = np.full(batch, width, dtype=np.int64)
    short = rng.choice(batch, size=round(SHORT_SHARE * batch), replace=False)
    lengths[short] = rng.integers(width // 4, width, size=short.size)
    return lengths


def cut_row(encoding: Any, start: int, count: int, cls_id: int, sep_id: int) -> Row:
    """``count`` pieces of ``encoding`` from ``start``, wrapped in [CLS] … [SEP]."""
    words = encoding.word_ids[start : start + count]
    first = words[0]
    return Row(
        input_ids=[cls_id, *encoding.ids[start : start + count], sep_id],
        word_ids=[-1, *(w - first for w in words), -1],
        offsets=[(0, 0), *encoding.offsets[start : start + count], (0, 0)],
    )


def make_rows(tokenizer: PreTrainedTokenizerFast, lengths: np.ndarray) -> list[Row]:
    """Consecutive rows cut from the scenes (never across two scenes), one per length."""
    rows: list[Row] = []
    for encoding in scene_encodings(tokenizer):
        start = 0
        while len(rows) < len(lengths) and start + lengths[len(rows)] - 2 <= len(encoding.ids):
            count = int(lengths[len(rows)]) - 2
            rows.append(cut_row(encoding, start, count, tokenizer.cls_token_id, tokenizer.sep_token_id))
            start += count
        if len(rows) == len(lengths):
            return rows
    raise RuntimeError(f"the scenes hold fewer than {len(lengths)} rows of these lengths")


def pad(rows: Sequence[Sequence[Any]], width: int, fill: Any) -> list[list[Any]]:
    """Right-pad Python lists to ``width``."""
    return [[*row, *([fill] * (width - len(row)))] for row in rows]


def make_inputs(tokenizer: PreTrainedTokenizerFast, batch: int, width: int, seed: int = 0) -> Inputs:
    """The batch of ``batch`` rows of at most ``width`` tokens, as features and as tensors."""
    rows = make_rows(tokenizer, row_lengths(batch, width, np.random.default_rng(seed)))
    width = max(len(r.input_ids) for r in rows)
    input_ids = torch.tensor(pad([r.input_ids for r in rows], width, tokenizer.pad_token_id))
    word_ids = torch.tensor(pad([r.word_ids for r in rows], width, -1))
    special = torch.isin(input_ids, torch.tensor([tokenizer.cls_token_id, tokenizer.sep_token_id]))
    lengths = torch.tensor([len(r.input_ids) for r in rows])
    real = torch.arange(width)[None, :] < lengths[:, None]
    padded_offsets = pad([r.offsets for r in rows], width, (0, 0))
    arrays = [(np.asarray(r.input_ids, dtype=np.int32), np.asarray(r.word_ids, dtype=np.int32)) for r in rows]
    return Inputs(
        ours_features=[{"input_ids": r.input_ids, "word_ids": r.word_ids, "id": i} for i, r in enumerate(rows)],
        hf_token_features=[{"input_ids": r.input_ids} for r in rows],
        hf_word_features=[{"input_ids": r.input_ids, "offset_mapping": o} for r, o in zip(rows, padded_offsets)],
        ours_array_features=[{"input_ids": ids, "word_ids": words, "id": i} for i, (ids, words) in enumerate(arrays)],
        hf_token_array_features=[{"input_ids": ids} for ids, _ in arrays],
        hf_word_array_features=[{"input_ids": ids, "offset_mapping": o} for (ids, _), o in zip(arrays, padded_offsets)],
        input_ids=input_ids,
        special_tokens_mask=special | ~real,
        word_ids=word_ids,
        offsets=torch.tensor(pad([r.offsets for r in rows], width, (0, 0))),
        example_ids=torch.arange(batch, dtype=torch.int64),
        lengths=lengths,
    )


# ---------------------------------------------------------------------------------------- sides


@dataclass(frozen=True)
class Sides:
    """Our collators and tables, and HF's collators, for one tokenizer."""

    ours_token: MaskingCollator
    ours_word: MaskingCollator
    vocab: VocabTables
    hf_token: DataCollatorForLanguageModeling
    hf_word: DataCollatorForLanguageModeling


def make_sides(tokenizer: PreTrainedTokenizerFast) -> Sides:
    """Both libraries' collators at p = 0.15 (HF's whole-word one drops random replacements)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Random token replacement is not supported")
        hf_word = DataCollatorForLanguageModeling(tokenizer, mlm_probability=MLM_PROBABILITY, whole_word_mask=True)
    return Sides(
        ours_token=MaskingCollator(tokenizer, mlm_probability=MLM_PROBABILITY, seed=0),
        ours_word=MaskingCollator(tokenizer, mlm_probability=MLM_PROBABILITY, strategy="whole_word", seed=0),
        vocab=tables_from_tokenizer(tokenizer),
        hf_token=DataCollatorForLanguageModeling(tokenizer, mlm_probability=MLM_PROBABILITY),
        hf_word=hf_word,
    )


def ours_bare(sides: Sides, x: Inputs, *, whole_word: bool) -> MaskedBatch:
    words = {"unit_config": UnitConfig(strategy="whole_word"), "word_ids": x.word_ids} if whole_word else {}
    return mask_tokens(
        x.input_ids,
        vocab=sides.vocab,
        example_ids=x.example_ids,
        seed=0,
        special_tokens_mask=x.special_tokens_mask,
        **words,
    )


def hf_bare(sides: Sides, x: Inputs, *, whole_word: bool) -> tuple[torch.Tensor, torch.Tensor]:
    # torch_mask_tokens writes [MASK] and random ids into its `inputs` in place, while
    # mask_tokens leaves its input alone: the clone is part of a like-for-like comparison.
    # It does not modify special_tokens_mask, so that one is passed as it is.
    if whole_word:
        return sides.hf_word.torch_mask_tokens(
            x.input_ids.clone(), special_tokens_mask=x.special_tokens_mask, offset_mapping=x.offsets
        )
    return sides.hf_token.torch_mask_tokens(x.input_ids.clone(), special_tokens_mask=x.special_tokens_mask)


def cases(sides: Sides, x: Inputs) -> list[Case]:
    """The six comparisons on batch ``x``."""
    return [
        Case(
            "collator token",
            lambda: sides.ours_token(x.ours_features),
            lambda: sides.hf_token(x.hf_token_features),
        ),
        Case(
            "collator whole-word",
            lambda: sides.ours_word(x.ours_features),
            lambda: sides.hf_word(x.hf_word_features),
        ),
        Case(
            "collator token, arrays",
            lambda: sides.ours_token(x.ours_array_features),
            lambda: sides.hf_token(x.hf_token_array_features),
        ),
        Case(
            "collator whole-word, arrays",
            lambda: sides.ours_word(x.ours_array_features),
            lambda: sides.hf_word(x.hf_word_array_features),
        ),
        Case(
            "bare token",
            lambda: ours_bare(sides, x, whole_word=False),
            lambda: hf_bare(sides, x, whole_word=False),
        ),
        Case(
            "bare whole-word",
            lambda: ours_bare(sides, x, whole_word=True),
            lambda: hf_bare(sides, x, whole_word=True),
        ),
    ]


# ---------------------------------------------------------------------------------------- sanity


def require(condition: bool, message: str) -> None:
    if not condition:
        raise RuntimeError(f"sanity check failed: {message}")


def partial_words(labels: torch.Tensor, word_ids: torch.Tensor) -> int:
    """Words (by tokenizer word ids) with some but not all pieces selected."""
    selected = labels != IGNORE_INDEX
    real = word_ids >= 0
    rows = torch.arange(word_ids.shape[0])[:, None].expand_as(word_ids)
    keys = (rows * (int(word_ids.max()) + 1) + word_ids)[real]
    _, inverse = torch.unique(keys, return_inverse=True)
    size = torch.bincount(inverse)
    hit = torch.zeros_like(size).index_add_(0, inverse, selected[real].long())
    return int(((hit > 0) & (hit < size)).sum())


def check_labels(name: str, labels: torch.Tensor, x: Inputs, *, whole_word: bool) -> float:
    """Common checks of one side's labels; returns the selected share of eligible tokens."""
    require(
        labels.shape == x.input_ids.shape,
        f"{name}: labels {tuple(labels.shape)} vs inputs {tuple(x.input_ids.shape)}",
    )
    selected = labels != IGNORE_INDEX
    eligible = ~x.special_tokens_mask
    require(not bool((selected & ~eligible).any()), f"{name}: a special or padding token was selected")
    require(
        bool((labels[selected] == x.input_ids[selected]).all()),
        f"{name}: labels differ from the original ids",
    )
    if whole_word:
        require(partial_words(labels, x.word_ids) == 0, f"{name}: words selected only in part")
    rate = float(selected.sum()) / float(eligible.sum())
    require(
        abs(rate - MLM_PROBABILITY) < RATE_TOLERANCE,
        f"{name}: selected {rate:.3f} of the eligible tokens",
    )
    return rate


def check_ours(name: str, masked: MaskedBatch, labels: torch.Tensor) -> None:
    """Our labels are -100 exactly where the outcome says 'not a target'."""
    require(torch.equal(labels, masked.labels), f"{name}: __call__ and mask() disagree")
    not_selected = masked.outcome == Outcome.NONE
    require(bool((labels[not_selected] == IGNORE_INDEX).all()), f"{name}: label set where not selected")
    require(bool((labels[~not_selected] != IGNORE_INDEX).all()), f"{name}: -100 at a selected token")


def sanity(sides: Sides, x: Inputs) -> dict[str, dict[str, float]]:
    """Check both sides on the batch; returns the selected shares per case and side."""
    torch.manual_seed(0)
    rates: dict[str, dict[str, float]] = {}
    for what, whole_word in (("collator token", False), ("collator whole-word", True)):
        collator = sides.ours_word if whole_word else sides.ours_token
        ours = collator(x.ours_features)["labels"]
        check_ours(what, collator.mask(x.ours_features)[1], ours)
        hf = (sides.hf_word if whole_word else sides.hf_token)(x.hf_word_features if whole_word else x.hf_token_features)[
            "labels"
        ]
        require(ours.shape == hf.shape, f"{what}: label shapes {tuple(ours.shape)} vs {tuple(hf.shape)}")
        rates[what] = {
            "ours": check_labels(f"ours {what}", ours, x, whole_word=whole_word),
            "hf": check_labels(f"HF {what}", hf, x, whole_word=whole_word),
        }
        # the epoch of the call above: calling again on the same examples would count a new pass
        from_arrays = collator.collate(x.ours_array_features, epoch=collator.epoch)["labels"]
        require(torch.equal(from_arrays, ours), f"{what}: array rows gave other labels than list rows")
        hf_features = x.hf_word_array_features if whole_word else x.hf_token_array_features
        hf_arrays = (sides.hf_word if whole_word else sides.hf_token)(hf_features)["labels"]
        rates[f"{what}, arrays"] = {
            "ours": check_labels(f"ours {what}, arrays", from_arrays, x, whole_word=whole_word),
            "hf": check_labels(f"HF {what}, arrays", hf_arrays, x, whole_word=whole_word),
        }
    for what, whole_word in (("bare token", False), ("bare whole-word", True)):
        masked = ours_bare(sides, x, whole_word=whole_word)
        check_ours(what, masked, masked.labels)
        _, hf = hf_bare(sides, x, whole_word=whole_word)
        rates[what] = {
            "ours": check_labels(f"ours {what}", masked.labels, x, whole_word=whole_word),
            "hf": check_labels(f"HF {what}", hf, x, whole_word=whole_word),
        }
    return rates


# ---------------------------------------------------------------------------------------- timing


def per_call(fn: Callable[[], Any], calls: int) -> float:
    """Seconds per call of ``fn``, over ``calls`` back-to-back calls."""
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def calls_for(fn: Callable[[], Any], min_sample_s: float) -> int:
    """Calls per sample so that one sample lasts at least ``min_sample_s`` (one warm-up call first)."""
    fn()
    return max(1, math.ceil(min_sample_s / per_call(fn, 1)))


def measure(case: Case, repeats: int, min_sample_s: float) -> tuple[float, float]:
    """Median seconds per call of ours and HF's, sampled interleaved in alternating order."""
    sides = [(fn, calls_for(fn, min_sample_s), []) for fn in (case.ours, case.hf)]
    for repeat in range(repeats):
        for fn, calls, samples in sides if repeat % 2 == 0 else sides[::-1]:
            samples.append(per_call(fn, calls))
    (_, _, ours), (_, _, hf) = sides
    return statistics.median(ours), statistics.median(hf)


def run(repeats: int, min_sample_s: float) -> tuple[list[Result], dict[str, Any]]:
    """Sanity-check, then time every case at every shape and thread count."""
    tokenizer = load_tokenizer("bert-base-uncased")
    sides = make_sides(tokenizer)
    results: list[Result] = []
    rates: dict[str, Any] = {}
    for batch, width in SHAPES:
        shape = f"{batch}x{width}"
        x = make_inputs(tokenizer, batch, width)
        rates[shape] = sanity(sides, x)
        print_rates(shape, x, rates[shape])
        for threads in THREADS:
            torch.set_num_threads(threads)
            torch.manual_seed(0)
            for case in cases(sides, x):
                ours_s, hf_s = measure(case, repeats, min_sample_s)
                results.append(
                    Result(
                        shape=shape,
                        threads=threads,
                        what=case.what,
                        ours_tokens_per_s=x.tokens / ours_s,
                        hf_tokens_per_s=x.tokens / hf_s,
                        ratio=hf_s / ours_s,
                        target=TARGETS.get(case.what),
                        ours_median_ms=ours_s * 1e3,
                        hf_median_ms=hf_s * 1e3,
                        repeats=repeats,
                    )
                )
    return results, rates


# ---------------------------------------------------------------------------------------- output


def print_rates(shape: str, x: Inputs, rates: dict[str, dict[str, float]]) -> None:
    padded = int((x.lengths < x.input_ids.shape[1]).sum())
    print(
        f"sanity {shape}: ok ({x.tokens} real tokens, {padded}/{x.input_ids.shape[0]} rows padded); "
        "selected share of eligible tokens (ours / HF): "
        + ", ".join(f"{what} {r['ours']:.3f} / {r['hf']:.3f}" for what, r in rates.items())
    )


def format_table(results: Sequence[Result]) -> str:
    header = ("shape", "threads", "what", "ours tok/s", "HF tok/s", "ratio", "target", "ours ms", "HF ms")
    rows = [
        (
            r.shape,
            str(r.threads),
            r.what,
            f"{r.ours_tokens_per_s / 1e6:.2f}M",
            f"{r.hf_tokens_per_s / 1e6:.2f}M",
            f"{r.ratio:.1f}x",
            "-" if r.target is None else f">={r.target:g}x {'met' if r.ratio >= r.target else 'MISSED'}",
            f"{r.ours_median_ms:.2f}",
            f"{r.hf_median_ms:.2f}",
        )
        for r in results
    ]
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in (header, *rows)]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def environment() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "numpy": np.__version__,
        "cpus": os.cpu_count(),
        "load_average_1min": round(os.getloadavg()[0], 2),
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--repeats",
        type=int,
        default=None,
        help="timed samples per side and case (default 25; 3 with --quick)",
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: few, short samples")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    args = parser.parse_args(argv)
    if args.repeats is None:
        args.repeats = 3 if args.quick else 25
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    min_sample_s = 0.005 if args.quick else 0.05
    started = time.perf_counter()
    env = environment()
    print(", ".join(f"{k} {v}" for k, v in env.items()))
    results, rates = run(args.repeats, min_sample_s)
    hf_needs = HF_WHOLE_WORD_NEEDS.format(version=transformers.__version__)
    elapsed = time.perf_counter() - started
    print()
    print(format_table(results))
    print()
    print(
        f"tok/s: real (non-padding) tokens per second, median of {args.repeats} samples of "
        f">= {min_sample_s * 1e3:g} ms; ratio = HF time / our time. HF token __call__ gets only "
        "input_ids (it builds the special-tokens mask in Python per row); bare HF = torch_mask_tokens "
        "with a precomputed special-tokens mask, on a clone of input_ids (it writes in place)."
    )
    print(f"HF whole-word: {hf_needs}")
    print(f"total {elapsed:.1f} s")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(
                {
                    "environment": env,
                    "repeats": args.repeats,
                    "min_sample_s": min_sample_s,
                    "hf_whole_word_inputs": hf_needs,
                    "selected_share": rates,
                    "results": [asdict(r) for r in results],
                    "total_s": elapsed,
                },
                f,
                indent=2,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
