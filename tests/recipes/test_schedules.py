"""Today's pre-training schedules in a run: masking rate by phase, and a decay run from a stable run's checkpoint."""

import json

import pytest
import torch

from tokenmask.cli.main import main
from tokenmask.recipes.config import PretrainConfig
from tokenmask.recipes.pretrain import pretrain
from tokenmask.settings import build
from tokenmask.train.checkpoint import load_state
from tokenmask.train.config import LoopConfig
from tokenmask.train.groups import adamw
from tokenmask.train.runs import start_decay


@pytest.fixture(scope="module")
def corpus(plays_file):
    return plays_file(2400)


def config(corpus, output, **overrides):
    settings = dict(output=str(output), corpus=(str(corpus),), preset="bert-tiny", max_steps=8, batch_size=8, eval_every=4,
                    eval_blocks=16, max_length=64, validation_share=0.1, report_to="none", warmup=0.25)  # fmt: skip
    return build(PretrainConfig, {**settings, **overrides})


def steps(run):
    return [r for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "loss" in r]


def test_the_masking_rate_steps_down_by_phase(corpus, tmp_path):
    # 0.3 for steps 0-3, 0.15 for 4-5 (from 0.5 x 8), 0.05 for 6-7 (from 0.75 x 8). Each step masks ~500
    # maskable tokens: the selected share's sd is at most sqrt(0.3 x 0.7 / 500) = 0.02; bands are +-0.07
    pretrain(config(corpus, tmp_path / "phases", mlm_probability=0.3, mlm_phases=("0.5:0.15", "0.75:0.05")))
    records = steps(tmp_path / "phases")
    assert [r["mlm_probability"] for r in records] == [0.3] * 4 + [0.15] * 2 + [0.05] * 2
    shares = [r["targets"] / 512 for r in records]
    assert all(0.23 <= s <= 0.37 for s in shares[:4]) and all(0.0 < s <= 0.12 for s in shares[6:])
    # OUTPUT/config.yaml replays it, the schedules with it
    main(["pretrain", "--config", str(tmp_path / "phases" / "config.yaml"), "--output", str(tmp_path / "replay")])
    assert [r["loss"] for r in steps(tmp_path / "replay")] == [r["loss"] for r in records]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"mlm_phases": ("0.5",)}, "each phase is SHARE:RATE"),
        ({"mlm_phases": ("0.6:0.15", "0.4:0.05")}, "must rise within"),
        ({"mlm_phases": ("0.5:1.5",)}, "rates must be in"),
        ({"mlm_phases": ("0.5:0.1",), "mlm_probability_end": 0.1}, "give one"),
        ({"decay_from": "x", "init": "minilm"}, "give no --init"),
        ({"decay_from": "x", "objective": "rtd", "preset": "electra-tiny"}, "it is for --objective mlm"),
    ],
)
def test_bad_schedules_are_refused(corpus, tmp_path, settings, message):
    with pytest.raises(ValueError, match=message):
        config(corpus, tmp_path / "bad", **settings)


def test_a_decay_run_starts_from_the_stable_checkpoint_and_falls_to_zero(corpus, tmp_path):
    stable = pretrain(config(corpus, tmp_path / "stable", decay=0.25, save_every=4))
    lrs = [r["lr"] for r in steps(tmp_path / "stable")]
    assert lrs[1:6] == [2e-3] * 5 and lrs[6] < 2e-3  # warm-up 2 steps, stable to step 6, decay over the last 2
    checkpoint = tmp_path / "stable" / "checkpoints" / "step-4"
    decay = pretrain(config(corpus, tmp_path / "decay", max_steps=4, decay_from=str(checkpoint)))
    # the same model as the stable run's at step 4: the same score on the same fixed masks
    assert decay.evaluations[0]["eval_loss"] == stable.evaluations[1]["eval_loss"]
    assert [r["lr"] for r in steps(tmp_path / "decay")] == pytest.approx([1.5e-3, 1e-3, 5e-4, 0.0])
    # a model folder without training state is refused before anything is written
    with pytest.raises(ValueError, match="no training state there"):
        pretrain(config(corpus, tmp_path / "bad", decay_from=str(tmp_path / "stable" / "model")))
    assert not (tmp_path / "bad").exists()
    # Adam's moments come along, and a peak other than the stable run's is said
    model = decay.model
    optimizer = adamw(model, LoopConfig(output="o"))
    said = []
    start_decay(checkpoint, optimizer, 1e-3, Said(said))
    saved = load_state(checkpoint)["optimizer"]["state"][0]["exp_avg"]
    assert torch.count_nonzero(saved) > 0 and torch.equal(optimizer.state_dict()["state"][0]["exp_avg"], saved)
    assert optimizer.param_groups[0]["initial_lr"] == 1e-3
    assert "decaying from --lr 0.001; the stable run's peak was 0.002" in said


class Said:
    def __init__(self, lines):
        self.lines = lines

    def message(self, line):
        self.lines.append(line)


def test_the_batch_grows_from_one_micro_batch_to_grad_accum(corpus, tmp_path):
    # at most 3 micro-batches of 8 blocks of 64 = 512 tokens, warmed up over 2,048 tokens: one more
    # micro-batch every 1,024 tokens read. Steps 0-1 take 1, step 2 takes 2, then 3 (collate.rate.BatchRamp)
    pretrain(config(corpus, tmp_path / "ramp", grad_accum=3, batch_warmup_tokens=2048, max_steps=6))
    tokens = [0] + [r["tokens"] for r in steps(tmp_path / "ramp")]
    # (a corpus's last block may be short: tokens are the real ones)
    assert [round((b - a) / 512) for a, b in zip(tokens, tokens[1:])] == [1, 1, 2, 3, 3, 3]


def test_a_token_limit_spans_the_schedule_over_a_growing_batch(corpus, tmp_path):
    # 5,000 tokens: 512, 1,024, 2,048, 3,584, 5,120 read after steps 1-5; fitted after step 1, the
    # horizon is 5 steps (a fixed batch of 512 would have given 10), so the decay ends with the run
    pretrain(config(corpus, tmp_path / "ramp", grad_accum=3, batch_warmup_tokens=2048, max_steps=None, max_tokens=5000))
    records = steps(tmp_path / "ramp")
    assert len(records) == 5 and records[-1]["lr"] == 0.0


def test_a_batch_warmup_needs_micro_batches_to_add(corpus, tmp_path):
    with pytest.raises(ValueError, match="give --grad-accum above 1"):
        config(corpus, tmp_path / "bad", batch_warmup_tokens=1000)
