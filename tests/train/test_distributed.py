"""Data-parallel training on 2 CPU processes (gloo) under torchrun matches 1 process at the same global batch; a
streamed run on 2 processes resumes exactly."""

import json
import shutil
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file

from tokenmask.train.checkpoint import load_state


@pytest.fixture(scope="module")
def corpus(plays_file):
    return plays_file(1600)


def run_pretrain(corpus, output, *, processes, batch_size, grad_accum, extra=()):
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}"]
    command = [
        *(launcher if processes > 1 else [sys.executable]), "-m", "tokenmask", "pretrain", str(corpus),
        "--output", str(output), "--preset", "modernbert-tiny",  # no dropout, fp32 (bf16 autocast would round differently at batch 2 and 4): comparable
        "--batch-size", str(batch_size), "--grad-accum", str(grad_accum), "--max-steps", "5", "--eval-every", "5",
        "--save-every", "5", "--max-length", "64", "--cpu", "--precision", "fp32", "--no-demo", "--seed", "3", "--validation-share", "0.1", *extra,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def step_records(output):
    records = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
    return [r for r in records if "loss" in r]


def test_two_processes_match_one_process_at_the_same_global_batch(corpus, tmp_path):
    # global micro-batch 4: one process x 4, or two processes x 2; two micro-batches per step
    one = tmp_path / "one"
    two = tmp_path / "two"
    run_pretrain(corpus, one, processes=1, batch_size=4, grad_accum=2)
    done = run_pretrain(corpus, two, processes=2, batch_size=2, grad_accum=2)
    assert "global batch: 2 x 2 processes x 2 accumulated = 8 per step" in done.stdout
    assert done.stdout.count("trained 5 steps") == 1  # only the main process reports
    expected, got = step_records(one), step_records(two)
    assert [r["step"] for r in got] == [1, 2, 3, 4, 5]
    for a, b in zip(expected, got):
        # the same examples, masks and global normalisation: equal up to float summation order
        assert b["targets"] == a["targets"] and b["tokens"] == a["tokens"]
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-5, abs=1e-6), b["step"]
    for name, tensor in load_file(one / "model" / "model.safetensors").items():
        torch.testing.assert_close(load_file(two / "model" / "model.safetensors")[name], tensor, rtol=1e-4, atol=1e-5)


def test_finetuning_on_two_processes_matches_one_process(tmp_path, reviews_csv, bert_tokenizer):
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    model = tmp_path / "tiny"
    config = BertConfig(
        vocab_size=len(bert_tokenizer),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )  # comparable runs
    BertForMaskedLM(config).save_pretrained(model)
    bert_tokenizer.save_pretrained(model)
    runs = {}
    for processes, batch_size in ((1, 8), (2, 4)):
        output = tmp_path / f"p{processes}"
        launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}"]
        command = [
            *(launcher if processes > 1 else [sys.executable]), "-m", "tokenmask", "finetune", str(reviews_csv),
            "--model", str(model), "--output", str(output), "--group-by", "movie", "--batch-size",
            str(batch_size), "--max-steps", "4", "--eval-every", "2", "--lr", "1e-3", "--cpu", "--precision", "fp32", "--seed", "1",
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        records = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
        runs[processes] = records
    for a, b in zip(runs[1], runs[2], strict=True):
        assert a.keys() == b.keys()
        for key in ("loss", "eval_loss", "targets"):
            if key in a:
                assert b[key] == pytest.approx(a[key], rel=1e-5), (a["step"], key)


def test_a_streaming_run_on_two_processes_resumes_exactly(corpus, tmp_path):
    # each process reads every other document; the checkpoint of step 3 holds both positions,
    # and a run resumed from it (step 6 removed, as if the run had died) ends where the whole one did
    streaming = ("--streaming", "--chunk-characters", "2000", "--save-every", "3", "--max-steps", "6", "--keep-last", "3")
    whole = tmp_path / "whole"
    run_pretrain(corpus, whole, processes=2, batch_size=2, grad_accum=1, extra=streaming)
    positions = load_state(whole / "checkpoints" / "step-3")["data"]
    assert len(positions) == 2 and all(p["epoch"] == 0 for p in positions)
    cut = tmp_path / "cut"
    shutil.copytree(whole, cut)
    shutil.rmtree(cut / "checkpoints" / "step-6")
    shutil.rmtree(cut / "model")
    run_pretrain(corpus, cut, processes=2, batch_size=2, grad_accum=1, extra=(*streaming, "--resume"))
    assert [r["loss"] for r in step_records(cut)] == [r["loss"] for r in step_records(whole)]
    for name, tensor in load_file(whole / "model" / "model.safetensors").items():
        assert torch.equal(load_file(cut / "model" / "model.safetensors")[name], tensor), name


def test_retrieval_trains_on_two_processes(tmp_path, bert_tokenizer):
    """In-batch negatives under DDP: BERT's pooler, which mean-pooled vectors leave unused, must not stall the
    gradient reduction (it is frozen); each process contrasts its own half of the global batch."""
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    model = tmp_path / "tiny"
    BertForMaskedLM(BertConfig(vocab_size=len(bert_tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                               intermediate_size=64)).save_pretrained(model)  # fmt: skip
    bert_tokenizer.save_pretrained(model)
    pairs = tmp_path / "pairs.jsonl"
    rows = [{"query": f"who holds castle {i}?", "positive": f"castle {i} is held by lord {i * 7 % 13}"} for i in range(64)]
    pairs.write_text("".join(json.dumps(row) + "\n" for row in rows))
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    command = [*launcher, "-m", "tokenmask", "finetune", str(pairs), "--task", "retrieval", "--model", str(model),
               "--output", str(tmp_path / "out"), "--batch-size", "4", "--max-steps", "3", "--eval-every", "3",
               "--max-length", "32", "--cpu", "--precision", "fp32"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    records = [json.loads(line) for line in (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if "loss" in r] == [1, 2, 3] and (tmp_path / "out" / "model" / "modules.json").exists()
