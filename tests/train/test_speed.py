"""A run's speed: FLOPs per token, MFU against known peaks, tokens/s and data wait in the log, the data-loader warning."""

import pytest
import torch
from transformers import BertConfig, BertForMaskedLM, BertForSequenceClassification, ModernBertConfig, ModernBertForMaskedLM

from tokenmask.train.speed import Speedometer, flops_per_token, peak_flops

SHAPE = {"vocab_size": 1000, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 128}


def encoder_parameters(model):
    return sum(p.numel() for n, p in model.bert.named_parameters() if "embeddings" not in n)


def test_flops_of_a_task_model_are_6_per_parameter_plus_attention():
    model = BertForSequenceClassification(BertConfig(**SHAPE))
    body = sum(p.numel() for n, p in model.named_parameters() if "embeddings" not in n)
    assert flops_per_token(model, length=32) == 6 * body + 12 * 2 * 32 * 64


def test_the_sparse_head_and_last_layer_count_at_the_targets_only():
    model = BertForMaskedLM(BertConfig(**SHAPE))
    layer = sum(p.numel() for p in model.bert.encoder.layer[-1].parameters())
    encoder = encoder_parameters(model) - (layer - 2 * 64 * 64) * 0.8  # keys and values at every token
    attention = 12 * 64 * 32 * (2 - 0.8)  # the last layer's queries: 20% of the tokens
    head = 6 * (64 * 64 + 64 * 1000) * 0.2
    assert flops_per_token(model, length=32, target_share=0.2) == pytest.approx(6 * encoder + attention + head)


def test_a_sliding_window_layer_attends_to_its_window_only():
    config = ModernBertConfig(
        **SHAPE | {"num_hidden_layers": 3}, local_attention=16, global_attn_every_n_layers=3, pad_token_id=0
    )
    model = ModernBertForMaskedLM(config)
    dense = sum(p.numel() for n, p in model.named_parameters() if "embeddings" not in n)
    # layer 0 global (128 keys), layers 1 and 2 sliding (17 keys at most)
    assert flops_per_token(model, length=128) == 6 * dense + 12 * 64 * (128 + 17 + 17)


def test_peaks_are_known_by_name_or_given(monkeypatch):
    assert peak_flops(torch.device("cpu")) is None
    assert peak_flops(torch.device("cpu"), 2.5) == 2.5e12
    # CUDA device names as torch reports them; a PCIe H100 is not taken for the SXM part
    for name, tflops in [("NVIDIA H100 80GB HBM3", 989.0), ("NVIDIA H100 PCIe", 756.0), ("NVIDIA H200", 989.0),
                         ("NVIDIA A100-SXM4-80GB", 312.0), ("Tesla T4", 65.0), ("NVIDIA GeForce RTX 4090", None)]:  # fmt: skip
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda device, name=name: name)
        assert peak_flops(torch.device("cuda")) == (None if tflops is None else tflops * 1e12), name
    assert peak_flops(torch.device("cuda"), 100.0) == 100e12  # given wins over the table


def test_speed_per_step_and_a_line_per_interval():
    said = []
    meter = Speedometer(1e6, 1e10, said.append, every=2)
    first = meter.step(1, tokens=1000, trained=0.5, data_seconds=0.05)  # 0.5 s since the start
    assert first == pytest.approx({"tokens_per_second": 2000, "data_share": 0.1, "mfu": 0.2})
    meter.step(2, tokens=1000, trained=2.0, data_seconds=0.05)  # 1.5 s
    assert said == ["step 2: 1,000 tokens/s, 5% of it waiting for data, MFU 10.0%"]
    assert "mfu" not in Speedometer(None, 1e10, said.append, every=2).step(1, tokens=1, trained=1, data_seconds=0)


@pytest.mark.parametrize(("data", "warned"), [(0.2, True), (0.08, False)])
def test_the_data_loader_is_named_once_when_it_holds_back_more_than_a_tenth(data, warned):
    said = []
    meter = Speedometer(None, None, said.append, every=1000)
    for step in range(1, 201):
        meter.step(step, tokens=100, trained=float(step), data_seconds=data)
    warnings = [line for line in said if "data loader" in line]
    assert len(warnings) == int(warned)
    if warned:  # the first window (steps 1-50) is the warm-up's
        assert warnings[0].startswith("step 100: the data loader held back 20% of the step time")


def test_every_step_of_a_run_logs_its_speed_and_mfu_with_a_given_peak(plays_file, tmp_path, capsys):
    import json
    import re

    from tokenmask.cli.main import main

    main(["pretrain", str(plays_file(600)), "--output", str(tmp_path / "run"), "--preset", "bert-tiny", "--max-steps", "4",
          "--eval-every", "2", "--max-length", "64", "--eval-blocks", "4", "--peak-tflops", "0.5", "--report-to", "none"])  # fmt: skip
    steps = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in steps if "loss" in r]
    assert len(steps) == 4 and all(r["tokens_per_second"] > 0 and 0 <= r["data_share"] < 1 and r["mfu"] > 0 for r in steps)
    assert re.search(r"step 4: [\d,]+ tokens/s, \d+% of it waiting for data, MFU \d", capsys.readouterr().out)
