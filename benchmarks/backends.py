"""Masking backends side by side: ``mask_tokens(..., backend="numpy")`` against ``"torch"``.

Both give the same masks (tested); this measures which is faster on a device, which is what
``backend="auto"`` follows: numpy for host data, torch for tensors on an accelerator. The runs
alternate, 30 repeats each, medians after 3 warm-up runs; a (64, 128) batch of random ids
with words of 1-4 pieces, 15% masking. Torch runs on one CPU thread, as numpy does (and as
masking in a DataLoader worker does): its small element-wise ops gain nothing from more.

Run from the repository root::

    python benchmarks/backends.py                 # the CPU
    python benchmarks/backends.py --device cuda   # the torch backend on a GPU (numpy stays on the host)
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from tokenmask.masking import UnitConfig, VocabTables, mask_tokens

STRATEGIES = ("token", "whole_word", "span")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    device = torch.device(args.device)
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    vocab = VocabTables.from_ids(30522, mask_token_id=103, protected_ids=[0, 101, 102])
    ids = torch.from_numpy(rng.integers(1000, 30522, (64, 128)))
    words = torch.from_numpy(np.cumsum(rng.random((64, 128)) < 0.75, axis=1) - 1)
    inputs = {
        "numpy": (ids, words, torch.arange(64)),
        "torch": (ids.to(device), words.to(device), torch.arange(64, device=device)),
    }
    for strategy in STRATEGIES:
        seconds: dict[str, list[float]] = {"numpy": [], "torch": []}
        for epoch in range(args.repeats):
            for backend, (x, w, examples) in inputs.items():
                if device.type == "cuda":
                    torch.cuda.synchronize()
                started = time.perf_counter()
                masked = mask_tokens(
                    x, vocab=vocab, example_ids=examples, seed=0, epoch=epoch, unit_config=UnitConfig(strategy=strategy),
                    word_ids=w, backend=backend,
                )  # fmt: skip
                masked.labels.sum().item()  # waits for the device
                seconds[backend].append(time.perf_counter() - started)
        numpy_s, torch_s = (statistics.median(seconds[b][3:]) for b in ("numpy", "torch"))
        print(
            f"{strategy}: numpy {1000 * numpy_s:.2f} ms, torch on {device} {1000 * torch_s:.2f} ms "
            f"(torch / numpy {torch_s / numpy_s:.2f})"
        )


if __name__ == "__main__":
    main()
