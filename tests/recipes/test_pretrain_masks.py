"""Pre-training's masks, pinned: the batches a run trains on are those of commit 4ef3d17.

The masking rate of a rate schedule once reached the collator as state set before each step;
it now reaches it as an argument computed from the step. That change must not move a single
mask. Each case below runs the real training loop on the plays and hashes every micro-batch it
trains on (``input_ids`` and ``labels``, with their shapes), in order.

EXPECTED was computed with commit 4ef3d17's code by running this file as a script on that
commit's sources, with the same virtual environment::

    git archive 4ef3d17 | tar -x -C /tmp/old
    PYTHONPATH=/tmp/old/src .venv/bin/python tests/recipes/test_pretrain_masks.py

(4ef3d17 refused a schedule with DataLoader workers; the tests here also check that 2 workers
give the batches of 0, and, for ``--streaming``, whose chunks 4ef3d17 masked at the rate of the
step that first read them, that the workers change nothing either.)
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import pytest

from tokenmask.recipes import pretrain as pretrain_module
from tokenmask.recipes.config import PretrainConfig
from tokenmask.settings import build
from tokenmask.train.step import mlm_loss_sum

# 128 tokens per micro-batch (4 blocks of 32): a token limit of 900 is reached at step 8 and
# fits the horizon after step 1 to ceil(900 / 128) = 8 optimizer steps (4 with 2 micro-batches a step).
# A time limit of 10 s on the fake clock (0.25 s a step: the loop reads the clock 3 times a step)
# fits it at step 20, and again after the evaluation at step 30.
BASE = dict(preset="bert-tiny", batch_size=4, max_length=32, eval_every=1000, save_every=1000, eval_blocks=4, seed=5)
SCHEDULE = dict(mlm_probability=0.3, mlm_probability_end=0.1)
TOKENS = dict(max_steps=None, max_tokens=900)
CASES = {
    "constant": dict(max_steps=6),
    "schedule, step limit": dict(SCHEDULE, max_steps=6),
    "schedule, token limit": dict(SCHEDULE, **TOKENS),
    "schedule, token limit, grad_accum 2": dict(SCHEDULE, **TOKENS, grad_accum=2),
    "schedule, time limit": dict(SCHEDULE, max_steps=None, max_time=10 / 60, eval_every=10),
    "whole_word, schedule, step limit": dict(SCHEDULE, max_steps=5, strategy="whole_word"),
    "span, schedule, token limit": dict(SCHEDULE, **TOKENS, strategy="span", selection="exact"),
    "streaming, constant": dict(max_steps=6, streaming=True, chunk_characters=1500),
}

EXPECTED = {  # hashes of the micro-batches in order, and the logged rate of each optimizer step
    "constant": (
        "aabc0eae27af 12e452a861e5 03087fbf5c52 77bd603e9c1f ddf75a55daa8 9475d282d72a",
        "0.15 0.15 0.15 0.15 0.15 0.15",
    ),
    "schedule, step limit": (
        "9ade2e76af96 3ccb011577df e6a259c6a9b8 acafba8ee479 7d0cb37bd5ca 0344720a392b",
        "0.3 0.26666666666666666 0.23333333333333334 0.2 0.16666666666666669 0.13333333333333333",
    ),
    "schedule, token limit": (
        "9ade2e76af96 af34bff32603 09875c3df77d 907472dcea80 fe60b930e5a9 4c4777ce960f a07976a04721 1c0c4a398061",
        "0.3 0.27499999999999997 0.25 0.22499999999999998 0.2 0.175 0.15 0.125",
    ),
    "schedule, token limit, grad_accum 2": (
        "9ade2e76af96 8a7115175514 09875c3df77d 2a33a5442ee5 fe60b930e5a9 df54c88bb36f a07976a04721 da34a9ab3008",
        "0.3 0.25 0.2 0.15",
    ),
    "schedule, time limit": (
        (
            "9ade2e76af96 8a7115175514 5c6077a05d7f 9b103ed0634c bb70f6d904d1 3aac30847126 652c46810756 a0bb4b35a9f7 "
            "44537d5f5292 b6915e7a7312 bbd9730e8508 612d9cfe6a6d 8d7661f4d06f 7d8f3731fcaa 1808d2b77103 68053cd47dcd "
            "0004d1214ef0 42eb11d1335d fc9d65233987 b0cd476945e3 acfff8aa3433 4c2ad7257490 a54b01dcdf79 6a64abd4ca28 "
            "306e413d708a 219c8dbb296f 9c79a3338197 a15b48ec366d fabe474b5e2d 083b45623429 4a50ee119765 2e2017622722 "
            "21ea367ec34a 61c0d6e0fc04 5f795bbf0dd8 eed0135f95f1 b96cae85ac0c"
        ),
        (
            "0.3 0.3 0.3 0.3 0.3 0.3 0.3 0.3 0.3 0.3 0.3 0.3 0.3 0.3 0.3 0.3 0.3 0.3 0.3 0.3 0.18888888888888888 "
            "0.18333333333333332 0.17777777777777776 0.17222222222222222 0.16666666666666669 0.16111111111111112 "
            "0.15555555555555556 0.15 0.14444444444444443 0.1388888888888889 0.1285714285714286 0.12285714285714286 "
            "0.11714285714285716 0.11142857142857143 0.10571428571428573 0.1 0.1"
        ),
    ),
    "whole_word, schedule, step limit": (
        "0b174cd62ec1 defae2c029ce 09a8b5889484 6bc74ca5faa6 1044dd64ba74",
        "0.3 0.26 0.21999999999999997 0.18 0.13999999999999999",
    ),
    "span, schedule, token limit": (
        "6e37915e4c9a ba9feffca6f4 aca540e206bf a74a0c2dd6f4 5db2e2350f72 c2995b5d4e6d 7c025a35f1f1 432753d28642",
        "0.3 0.27499999999999997 0.25 0.22499999999999998 0.2 0.175 0.15 0.125",
    ),
    "streaming, constant": (
        "751d0357a5bf 7d65bfe6ac13 0ca6b340c14b fded153fd735 8bf4e06583ce d14b72bd1b5d",
        "0.15 0.15 0.15 0.15 0.15 0.15",
    ),
}


def write_corpus(folder: Path) -> Path:
    """The first 1,200 spoken lines of the plays in paragraphs of 8 (as conftest's ``plays_file(1200)``)."""
    from tokenmask.text.resources import shakespeare_lines

    lines = shakespeare_lines(1200)
    path = folder / "plays.txt"
    path.write_text("\n\n".join(" ".join(lines[i : i + 8]) for i in range(0, 1200, 8)), encoding="utf-8")
    return path


def digest(batch: dict) -> str:
    """12 hex digits of SHA-256 over the micro-batch's ``input_ids`` and ``labels`` (shape and values)."""
    hasher = hashlib.sha256()
    for key in ("input_ids", "labels"):
        tensor = batch[key].detach().cpu().contiguous()
        hasher.update(repr(tuple(tensor.shape)).encode())
        hasher.update(tensor.numpy().tobytes())
    return hasher.hexdigest()[:12]


class FakeClock:
    """The loop's ``time``: each reading 1/12 s after the previous (3 readings a step: 0.25 s), whatever the machine."""

    def __init__(self) -> None:
        self.readings = 0

    def perf_counter(self) -> float:
        self.readings += 1
        return self.readings / 12


def trained_on(corpus: Path, output: Path, patch, **settings) -> tuple[str, str]:
    """Run pre-training; returns the hashes of the micro-batches it trained on and the logged rates, each space-separated.

    ``patch(owner, name, value)`` replaces an attribute for the run (pytest's ``monkeypatch.setattr``).
    """
    import tokenmask.train.loop as loop

    seen: list[str] = []

    def recording(model, batch):
        seen.append(digest(batch))
        return mlm_loss_sum(model, batch)

    patch(pretrain_module, "mlm_loss_sum", recording)
    if settings.get("max_time") is not None:
        patch(loop, "time", FakeClock())
    config = build(PretrainConfig, {**BASE, "corpus": (str(corpus),), "output": str(output), **settings})
    pretrain_module.pretrain(config)
    records = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
    return " ".join(seen), " ".join(repr(r["mlm_probability"]) for r in records if "loss" in r)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("masks"))


@pytest.mark.parametrize("case", list(CASES))
def test_the_batches_are_those_of_commit_4ef3d17(case, corpus, tmp_path, monkeypatch):
    assert trained_on(corpus, tmp_path / "run", monkeypatch.setattr, **CASES[case]) == EXPECTED[case]


@pytest.mark.filterwarnings("ignore:This DataLoader will create")
@pytest.mark.parametrize("case", ["schedule, token limit", "schedule, token limit, grad_accum 2"])
def test_two_workers_give_the_batches_of_none_while_the_horizon_moves(case, corpus, tmp_path, monkeypatch):
    # the horizon is fitted after step 1: the loop asks for fresh batches, and the workers start again with it
    assert trained_on(corpus, tmp_path / "run", monkeypatch.setattr, **CASES[case], num_workers=2) == EXPECTED[case]


@pytest.mark.filterwarnings("ignore:This DataLoader will create")
def test_a_streamed_schedule_gives_the_same_batches_with_two_workers(corpus, tmp_path, monkeypatch):
    from tokenmask.collate.rate import RateSchedule  # not in 4ef3d17, whose code runs this file as a script

    settings = dict(SCHEDULE, **TOKENS, streaming=True, chunk_characters=1500)
    alone = trained_on(corpus, tmp_path / "alone", monkeypatch.setattr, **settings, num_workers=0)
    pooled = trained_on(corpus, tmp_path / "pooled", monkeypatch.setattr, **settings, num_workers=2)
    assert pooled == alone
    # each step's rate over the horizon fitted after step 1 (128 tokens: 8 steps); a chunk's last micro-batch
    # may be smaller, so the token limit may take a step or two more
    rates = alone[1].split()
    assert len(rates) >= 8 and rates == [repr(RateSchedule(0.3, 0.1, horizon=8).at(step)) for step in range(len(rates))]


def _print_expected() -> None:
    """Run every case on the tokenmask that Python imports (PYTHONPATH) and print EXPECTED as Python."""
    import textwrap

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    print(f"# computed with {pretrain_module.__file__}")
    print("EXPECTED = {  # hashes of the micro-batches in order, and the logged rate of each optimizer step")
    with tempfile.TemporaryDirectory() as folder:
        os.environ["TOKENMASK_CACHE"] = str(Path(folder) / "cache")
        corpus = write_corpus(Path(folder))
        for number, (case, settings) in enumerate(CASES.items()):
            with pytest.MonkeyPatch.context() as patch:
                texts = trained_on(corpus, Path(folder) / f"run-{number}", patch.setattr, **settings)
            print(f'    "{case}": (')
            for text in texts:
                lines = textwrap.wrap(text, 104)
                if len(lines) == 1:
                    print(f'        "{text}",')
                    continue
                print("        (")
                for line in lines[:-1]:
                    print(f'            "{line} "')
                print(f'            "{lines[-1]}"\n        ),')
            print("    ),")
    print("}")


if __name__ == "__main__":
    _print_expected()
