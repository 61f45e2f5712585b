"""The training loop: loss normalisation under accumulation, and an end-to-end CLI run."""

import json

import pytest
import torch
import yaml
from transformers import AutoModelForMaskedLM, BertConfig, BertForMaskedLM

from tokenmask.cli.main import main
from tokenmask.recipes.config import PretrainConfig
from tokenmask.recipes.pretrain import pretrain
from tokenmask.settings import build
from tokenmask.train.checkpoint import STATE_FILE, checkpoint_folders, load_state
from tokenmask.train.config import LoopConfig
from tokenmask.train.step import backward_step
from tokenmask.train.trackers import PACKAGES


def tiny_bert():
    torch.manual_seed(0)
    model = BertForMaskedLM(
        BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)
    )
    return model.eval()  # no dropout: runs must be comparable


def make_batch(rows, targets_per_row):
    g = torch.Generator().manual_seed(rows * 7 + targets_per_row)
    ids = torch.randint(5, 100, (rows, 10), generator=g)
    labels = torch.full_like(ids, -100)
    labels[:, 1 : 1 + targets_per_row] = ids[:, 1 : 1 + targets_per_row]
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}


def gradients(model):
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_accumulation_gives_the_gradient_of_one_large_batch():
    # micro-batches with different numbers of targets (2 per row vs 5 per row): a mean per
    # micro-batch would weight them wrongly; sum / step targets does not.
    a, b = make_batch(3, 2), make_batch(2, 5)
    whole = {k: torch.cat([a[k], b[k]]) for k in a}
    one = tiny_bert()
    loss_one, tokens_one = backward_step(one, [whole])
    two = tiny_bert()
    loss_two, tokens_two = backward_step(two, [a, b])
    assert tokens_one == tokens_two == 50
    assert loss_one == pytest.approx(loss_two, rel=1e-5)
    for name, grad in gradients(one).items():
        torch.testing.assert_close(grad, gradients(two)[name], rtol=1e-4, atol=1e-6, msg=name)


def test_a_step_without_targets_adds_nothing():
    empty = make_batch(2, 0)
    model = tiny_bert()
    loss, _ = backward_step(model, [empty])
    assert loss == 0.0 and not gradients(model)
    with_empty, alone = tiny_bert(), tiny_bert()
    backward_step(with_empty, [make_batch(2, 3), empty])
    backward_step(alone, [make_batch(2, 3)])
    for name, grad in gradients(alone).items():
        torch.testing.assert_close(grad, gradients(with_empty)[name])


@pytest.fixture(scope="module")
def corpus(plays_file):
    return plays_file(2400)


def config(corpus, output, **overrides):
    settings = dict(
        output=str(output),
        corpus=(str(corpus),),
        preset="bert-tiny",
        max_steps=12,
        batch_size=8,
        eval_every=6,
        eval_blocks=16,
        max_length=64,
        lr=2e-3,
        validation_share=0.1,
    )
    settings.update(overrides)
    return build(PretrainConfig, settings)


def test_pretrain_learns_saves_and_reloads(corpus, tmp_path):
    result = pretrain(config(corpus, tmp_path / "run", save_every=6))
    losses = [e["eval_loss"] for e in result.evaluations]
    assert [e["step"] for e in result.evaluations] == [0, 6, 12]
    assert losses[-1] < losses[0] - 1.0  # from ~ln(30522) = 10.3 down
    reloaded = AutoModelForMaskedLM.from_pretrained(tmp_path / "run" / "model", local_files_only=True)
    for name, value in result.model.state_dict().items():
        assert torch.equal(value, reloaded.state_dict()[name]), name
    assert not (tmp_path / "run" / "model" / STATE_FILE).exists()  # training state: in checkpoints/ only
    assert "- 12 optimizer steps on " in (tmp_path / "run" / "model" / "README.md").read_text()
    checkpoints = sorted(p.name for p in (tmp_path / "run" / "checkpoints").iterdir())
    assert checkpoints == ["step-12", "step-6"]
    state = load_state(checkpoint_folders(tmp_path / "run" / "checkpoints")[0])  # weights_only: no pickled objects
    assert state["step"] == 12 and "optimizer" in state and state["rng"][0]["cpu"].dtype == torch.uint8
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert sum("loss" in r for r in records) == 12
    assert not list((tmp_path / "run").glob(".*partial*"))


def test_same_seed_same_run(corpus, tmp_path):
    a = pretrain(config(corpus, tmp_path / "a", max_steps=4, eval_every=2))
    b = pretrain(config(corpus, tmp_path / "b", max_steps=4, eval_every=2))
    assert [e["eval_loss"] for e in a.evaluations] == [e["eval_loss"] for e in b.evaluations]


def test_cli_pretrain_evaluate_fill(corpus, tmp_path, capsys, monkeypatch):
    asked = []  # evaluate and fill run where inference_device says (the GPU when there is one)

    def device_here():
        asked.append(True)
        return torch.device("cpu")

    monkeypatch.setattr("tokenmask.use.evaluate.inference_device", device_here)
    monkeypatch.setattr("tokenmask.use.fill.inference_device", device_here)
    out = tmp_path / "cli"
    argv = [
        "pretrain",
        str(corpus),
        "--output",
        str(out),
        "--max-steps",
        "8",
        "--batch-size",
        "8",
        "--max-length",
        "64",
        "--eval-every",
        "4",
        "--eval-blocks",
        "8",
        "--strategy",
        "whole_word",
    ]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "trained 8 steps" in printed and "guesses:" in printed
    before = len(asked)  # the run's fill-mask demo asked too
    assert main(["evaluate", str(out / "model"), str(corpus), "--max-length", "64", "--max-blocks", "16", "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["targets"] > 0 and 0 <= metrics["accuracy"] <= 1 and metrics["perplexity"] > 1
    assert len(asked) == before + 1
    assert main(["fill", str(out / "model"), "to be or not to <mask>", "--json", "--top-k", "3"]) == 0
    fill = json.loads(capsys.readouterr().out)
    assert len(fill["predictions"]) == 1 and len(fill["predictions"][0]) == 3
    assert len(asked) == before + 2
    assert main(["fill", str(out / "model"), "no mask here"]) == 2
    assert "no mask" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["pretrain", "--output", "o", "--max-steps", "0"], "max_steps must be >= 1"),
        (["pretrain", "--output", "o", "--lr", "-1"], "lr must be > 0"),
        (["pretrain", "--output", "o", "--keep-last", "0"], "keep_last must be >= 1"),
        (["pretrain", "/no/such/corpus", "--output", "o", "--max-steps", "1"], "no such file"),
        (["evaluate", "/no/such/model"], "neither a folder"),
    ],
)
def test_training_errors_exit_2(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def step_losses(run_dir):
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return {r["step"]: r["loss"] for r in records if "loss" in r}


def test_resume_continues_with_the_same_masks_and_losses(corpus, tmp_path, crash_after):
    whole = pretrain(config(corpus, tmp_path / "whole", max_steps=10, save_every=4, eval_every=5))
    interrupted = config(corpus, tmp_path / "cut", max_steps=10, save_every=4, eval_every=5)
    with pytest.raises(crash_after.Crash):
        pretrain(interrupted, crash_after(6))  # dies after step 6; the newest checkpoint is step 4
    with pytest.raises(ValueError, match="already holds a run"):
        pretrain(interrupted)
    resumed = pretrain(interrupted.with_loop(resume=True))
    assert resumed.steps == 10
    expected, got = step_losses(tmp_path / "whole"), step_losses(tmp_path / "cut")
    assert got == expected
    logged = [json.loads(line) for line in (tmp_path / "cut" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in logged if "loss" in r] == list(range(1, 11))  # steps 5-6: dropped on resume, logged again
    assert [e["eval_loss"] for e in resumed.evaluations] == [e["eval_loss"] for e in whole.evaluations if e["step"] > 4]
    for name, value in whole.model.state_dict().items():
        assert torch.equal(value, resumed.model.state_dict()[name]), name


def test_time_limit_fits_the_schedule_to_the_time(corpus, tmp_path, monkeypatch):
    # A fake clock keeps the test independent of the machine's speed: each step reads it three
    # times (before and after collating, at its end), 1/12 s per reading = 0.25 s per step.
    # The horizon is fixed at step 20 from the pace of steps 11-20: with 10 s, about 38 steps
    # fit (5% spare for evaluations), so the learning rate must reach zero only near the end.
    import tokenmask.train.loop as loop

    ticks = iter(range(10**6))
    monkeypatch.setattr(loop.time, "perf_counter", lambda: next(ticks) / 12)
    result = pretrain(config(corpus, tmp_path / "timed", max_steps=None, max_time=10 / 60, eval_every=1000))
    records = [json.loads(line) for line in (tmp_path / "timed" / "metrics.jsonl").read_text().splitlines()]
    rates = [r["lr"] for r in records if "lr" in r]
    assert 36 <= result.steps <= 44
    first_zero = next((i for i, rate in enumerate(rates) if rate == 0.0), len(rates))
    assert first_zero >= 0.85 * result.steps
    assert 0 < rates[first_zero - 1] < 0.15 * max(rates)  # decayed all the way over the run


def test_yaml_config_with_flags_overriding_it(corpus, tmp_path, capsys):
    settings = tmp_path / "run.yaml"
    out = tmp_path / "from-yaml"
    settings.write_text(
        f"corpus: [{corpus}]\noutput: {out}\nlr: 0.002\nmax-steps: 50\nbatch_size: 8\nmax_length: 64\n"
        "eval_every: 2\neval_blocks: 8\nstrategy: span\nmlm_probability: 0.3\n",
        encoding="utf-8",
    )
    assert main(["pretrain", "--config", str(settings), "--max-steps", "2", "--no-demo"]) == 0
    resolved = yaml.safe_load((out / "config.yaml").read_text())
    assert resolved["max_steps"] == 2  # the flag wins
    assert resolved["lr"] == 0.002 and resolved["batch_size"] == 8 and resolved["corpus"] == [str(corpus)]
    assert resolved["strategy"] == "span" and resolved["mlm_probability"] == 0.3
    capsys.readouterr()
    settings.write_text("learning_rate: 0.1\n", encoding="utf-8")
    assert main(["pretrain", "--config", str(settings), "--output", str(tmp_path / "x")]) == 2
    assert "unknown setting 'learning_rate'" in capsys.readouterr().err
    settings.write_text("strategy: sentences\n", encoding="utf-8")
    assert main(["pretrain", "--config", str(settings), "--output", str(tmp_path / "x")]) == 2
    assert "strategy must be one of" in capsys.readouterr().err
    assert main(["pretrain", "--max-steps", "1"]) == 2
    assert "--output is required" in capsys.readouterr().err


def test_static_masking_reuses_dupe_factor_masks(bert_tokenizer, lines):
    from tokenmask.blocks.pack import pack_texts
    from tokenmask.collate.collator import MaskingCollator
    from tokenmask.collate.stream import MicroBatches

    blocks = [{**b, "block": b["id"]} for b in pack_texts(lines[:200], bert_tokenizer, block_length=32)][:16]

    def labels_by_epoch(dupe_factor):
        collator = MaskingCollator(bert_tokenizer, seed=0)
        stream = iter(MicroBatches(blocks, collator, batch_size=16, seed=0, dupe_factor=dupe_factor))
        epochs = []
        for _ in range(4):  # one batch = one epoch here; the rows come in a new order each epoch
            batch = next(stream)
            epochs.append({int(b): batch["labels"][row] for row, b in enumerate(batch["block"])})
        return epochs

    def same(a, b):
        return all(torch.equal(a[k], b[k]) for k in a)

    static = labels_by_epoch(2)
    assert same(static[0], static[2]) and same(static[1], static[3]) and not same(static[0], static[1])
    dynamic = labels_by_epoch(None)
    assert not same(dynamic[0], dynamic[2])


def records_of(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_masking_rate_schedule_goes_from_start_to_end_rate(corpus, tmp_path):
    # 0.30 -> 0.15 over 12 steps. Each step masks ~ 8 x 64 = 512 tokens (~ 500 maskable): the
    # selected share is binomial, sd <= sqrt(0.3 * 0.7 / 500) = 0.02; bands are +-0.07 (> 3 sd).
    pretrain(config(corpus, tmp_path / "sched", mlm_probability=0.3, mlm_probability_end=0.15, eval_every=100))
    steps = [r for r in records_of(tmp_path / "sched") if "loss" in r]
    rates = [r["mlm_probability"] for r in steps]
    assert rates[0] == pytest.approx(0.3) and rates[-1] == pytest.approx(0.3 - 0.15 * 11 / 12)
    assert all(a > b for a, b in zip(rates, rates[1:]))
    first, last = steps[0]["targets"] / 512, steps[-1]["targets"] / 512
    assert 0.23 <= first <= 0.37 and 0.09 <= last <= 0.23


def test_token_limit_stops_the_run_and_spans_the_schedule(corpus, tmp_path):
    # 8 blocks of 64 tokens per step: 5,000 tokens end the run at step ceil(5000 / 512) = 10,
    # where a linear schedule fitted to the limit is back near zero.
    result = pretrain(config(corpus, tmp_path / "tokens", max_steps=None, max_tokens=5000, eval_every=100, warmup=0.1))
    assert result.steps == 10 and 5000 <= result.tokens < 5000 + 512
    rates = [r["lr"] for r in records_of(tmp_path / "tokens") if "lr" in r]
    assert rates[-1] < 0.05 * max(rates)


def test_run_log_plot_and_tensorboard(corpus, tmp_path):
    pretrain(config(corpus, tmp_path / "logs", max_steps=4, eval_every=2))
    png = (tmp_path / "logs" / "metrics.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 5000
    events = list((tmp_path / "logs" / "tensorboard" / "tokenmask").glob("events.out.tfevents.*"))
    assert events and events[0].stat().st_size > 100
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    board = EventAccumulator(str(tmp_path / "logs" / "tensorboard" / "tokenmask"))
    board.Reload()
    assert {"loss", "lr", "eval_accuracy", "tokens_per_second", "data_share"} <= set(board.Tags()["scalars"])
    assert [event.step for event in board.Scalars("loss")] == [1, 2, 3, 4]


def test_report_to_none_writes_only_the_jsonl(corpus, tmp_path):
    pretrain(config(corpus, tmp_path / "quiet", max_steps=2, eval_every=2, report_to="none"))
    assert (tmp_path / "quiet" / "metrics.jsonl").exists() and not (tmp_path / "quiet" / "tensorboard").exists()


@pytest.mark.parametrize(
    "report_to, message",
    [("tensorbored", "report_to must be 'none' or names from"), (",", "report_to must be"), ("none,wandb", "report_to")],
)
def test_bad_tracker_names_are_refused(report_to, message):
    with pytest.raises(ValueError, match=message):
        LoopConfig(output="o", report_to=report_to)


def test_a_tracker_that_is_not_installed_is_named(corpus, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("tokenmask.train.trackers.PACKAGES", {**PACKAGES, "wandb": ("no_such_wandb_package",)})
    argv = ["pretrain", str(corpus), "--output", str(tmp_path / "w"), "--max-steps", "1", "--report-to", "tensorboard,wandb"]
    assert main(argv) == 2
    assert "report_to names wandb, not installed: pip install wandb" in capsys.readouterr().err
    assert not (tmp_path / "w").exists()


def test_plot_without_records_is_skipped(tmp_path):
    from tokenmask.train.logs import plot_metrics

    assert plot_metrics([], tmp_path / "none.png") is None and not (tmp_path / "none.png").exists()


def test_bf16_autocast_runs_close_to_fp32(corpus, tmp_path):
    from tokenmask.train.parallel import resolve_precision

    assert resolve_precision("fp32", torch.device("cpu")) == "fp32"
    native = torch.cpu._is_amx_tile_supported() or torch.cpu._is_avx512_bf16_supported()
    assert resolve_precision("auto", torch.device("cpu")) == ("bf16" if native else "fp32")
    full = pretrain(config(corpus, tmp_path / "fp32", max_steps=2, eval_every=100, precision="fp32"))
    half = pretrain(config(corpus, tmp_path / "bf16", max_steps=2, eval_every=100, precision="bf16"))
    for a, b in zip(full.evaluations, half.evaluations):  # bf16 keeps ~3 significant digits
        assert b["eval_loss"] == pytest.approx(a["eval_loss"], rel=0.02)
    assert half.model.dtype == torch.float32  # autocast: the weights stay fp32


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"lr": -1.0}, "lr must be > 0; got -1.0"),
        ({"max_tokens": 0}, "max_tokens must be >= 1"),
        ({"mlm_probability_end": 1.5}, "mlm_probability_end must be in"),
        ({"precision": "fp8"}, "precision must be"),
    ],
)
def test_config_names_the_bad_setting(overrides, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        config("corpus.txt", tmp_path, **overrides)


def test_cli_pretrain_on_a_csv_column_and_a_missing_column(lines, tmp_path, capsys):
    import csv

    table = tmp_path / "reviews.csv"
    with table.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "review"])
        writer.writerows([i, " ".join(lines[i * 6 : i * 6 + 6])] for i in range(200))
    common = ["--max-steps", "2", "--batch-size", "4", "--max-length", "64", "--eval-blocks", "4", "--no-demo"]
    assert main(["pretrain", str(table), "--text-field", "review", "--output", str(tmp_path / "csv"), *common]) == 0
    resolved = yaml.safe_load((tmp_path / "csv" / "config.yaml").read_text())
    assert resolved["text_field"] == "review" and resolved["corpus"] == [str(table)]
    assert main(["pretrain", str(table), "--output", str(tmp_path / "missing"), *common]) == 2
    error = capsys.readouterr().err
    assert "text" in error and "review" in error and "Traceback" not in error


def test_schedule_fitted_late_continues_its_warmup_ramp_without_a_drop():
    from tokenmask.train.schedule import Schedule

    schedule = Schedule(LoopConfig(max_time=1.0, warmup=0.1))
    early = [schedule(step) for step in range(20)]  # provisional 100-step ramp: (step + 1) / 100
    assert early == pytest.approx([(s + 1) / 100 for s in range(20)])
    schedule.fit(1000, 20)  # warm-up becomes 100 steps of 1000; the ramp goes on from 0.21
    ramp = [schedule(step) for step in range(20, 100)]  # 0.21 + 0.79 * (step + 1 - 20) / 80
    assert ramp[0] == pytest.approx(0.21 + 0.79 / 80) and all(b > a for a, b in zip(ramp, ramp[1:]))
    assert schedule(99) == pytest.approx(1.0) and schedule(550) == pytest.approx(0.5) and schedule(1000) == 0.0
    schedule.fit(2000, 500)  # a later fit moves only the end of the decay
    assert schedule.warmup_steps == 100 and schedule(1050) == pytest.approx(0.5)


def test_time_fit_is_refined_at_each_evaluation():
    from tokenmask.train.schedule import Pace, Schedule

    config = LoopConfig(max_time=1.0)  # 60 s
    schedule, pace = Schedule(config), Pace(config, 0)
    pace.after_step(schedule, 10, 1000, 10.0, 10.0)
    pace.after_step(schedule, 20, 2000, 19.5, 19.5)  # 0.95 s per step over steps 11-20
    assert schedule.horizon == 20 + int((60 - 19.5) / (0.95 / 0.95))  # 5% kept for evaluations: 60
    pace.after_evaluation(schedule, 40, 4000, 29.5)  # then 0.5 s per step, evaluations included
    assert schedule.horizon == 40 + int((60 - 29.5) / 0.5)  # 101: the decay ends when the time does


@pytest.mark.filterwarnings("ignore:This DataLoader will create")
def test_worker_processes_collate_the_same_batches(corpus, tmp_path):
    alone = pretrain(config(corpus, tmp_path / "alone", max_steps=6, eval_every=6))
    workers = pretrain(config(corpus, tmp_path / "workers", max_steps=6, eval_every=6, num_workers=2))
    assert step_losses(tmp_path / "workers") == step_losses(tmp_path / "alone")
    for name, value in alone.model.state_dict().items():
        assert torch.equal(value, workers.model.state_dict()[name]), name


def test_compile_compiles_the_encoder_in_place(corpus, tmp_path, monkeypatch):
    # The real compilation takes about a minute here: a spy records what --compile compiles.
    compiled = []
    monkeypatch.setattr(torch.nn.Module, "compile", lambda module, *args, **kwargs: compiled.append(type(module).__name__))
    out = tmp_path / "compiled"
    argv = ["pretrain", str(corpus), "--output", str(out), "--max-steps", "2", "--batch-size", "4", "--max-length", "32",
            "--eval-every", "2", "--eval-blocks", "4", "--preset", "bert-tiny", "--compile"]  # fmt: skip
    assert main(argv) == 0
    # the layers of the encoder the sparse head calls, but the last, which runs at the targets only
    assert compiled == ["BertLayer"] * (BertConfig.from_pretrained(out / "model").num_hidden_layers - 1)
    assert yaml.safe_load((out / "config.yaml").read_text())["compile"] is True


def test_snapshots_are_taken_once_at_their_share_of_the_token_limit(corpus, tmp_path):
    # 8 blocks of 64 tokens a step: 512 tokens; a limit of 6 x 512 = 3,072 tokens puts a quarter
    # (768 tokens) at step 2 and a half (1,536) at step 3
    output = tmp_path / "run"
    pretrain(config(corpus, output, max_steps=None, max_tokens=3072, snapshots=(0.25, 0.5), save_every=3))
    notes = {
        share: json.loads((output / "snapshots" / f"fraction-{share}" / "tokenmask.json").read_text()) for share in (0.25, 0.5)
    }
    assert notes == {0.25: {"share": 0.25, "step": 2, "tokens": 1024}, 0.5: {"share": 0.5, "step": 3, "tokens": 1536}}
    snapshot = AutoModelForMaskedLM.from_pretrained(output / "snapshots" / "fraction-0.5", local_files_only=True)
    final = AutoModelForMaskedLM.from_pretrained(output / "model", local_files_only=True)
    assert not torch.equal(snapshot.bert.embeddings.word_embeddings.weight, final.bert.embeddings.word_embeddings.weight)
    taken = (output / "snapshots" / "fraction-0.25" / "model.safetensors").stat().st_mtime_ns
    pretrain(config(corpus, output, max_steps=None, max_tokens=4096, snapshots=(0.25, 0.5), save_every=3, resume=True))
    assert (output / "snapshots" / "fraction-0.25" / "model.safetensors").stat().st_mtime_ns == taken  # not taken again
    pretrain(config(corpus, output, max_steps=2, overwrite=True))  # a new run: the old one's snapshots go with its model
    assert not (output / "snapshots").exists()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"snapshots": (1.0,)}, r"snapshots are shares of the run's limit, in \(0, 1\); got 1"),
        ({"snapshots": (0.5,), "max_time": 3.0}, "give --max-tokens or --max-steps"),
    ],
)
def test_snapshots_need_a_share_below_1_of_a_token_or_step_limit(settings, message):
    with pytest.raises(ValueError, match=message):
        LoopConfig(output="o", **settings)


def test_without_an_evaluation_at_the_start_the_first_is_at_eval_every(corpus, tmp_path):
    result = pretrain(config(corpus, tmp_path / "run", max_steps=4, eval_every=2, eval_at_start=False))
    assert [e["step"] for e in result.evaluations] == [2, 4]
