"""Continued pre-training: the recipe switch on ``init``, the parameter groups, the head-only warm-up."""

import pytest
import torch
from transformers import AutoModelForMaskedLM, BertConfig, BertForMaskedLM

from tokenmask.cli.flags import requested_settings
from tokenmask.cli.parser import build_parser
from tokenmask.recipes.config import CONTINUED_LOOP, PretrainConfig, pretrain_config
from tokenmask.recipes.pretrain import describe, pretrain
from tokenmask.train.config import LoopConfig
from tokenmask.train.groups import lr_multipliers, parameter_groups

# ---- the recipe switch --------------------------------------------------------------------


def test_init_brings_the_continued_recipe():
    loop = pretrain_config({"init": "minilm", "output": "o"}).loop
    assert (loop.lr, loop.head_warmup_steps, loop.layer_decay) == (1e-3, 30, 0.8)
    assert (loop.batch_size, loop.warmup, loop.weight_decay) == (8, 0.06, 0.01)  # the rest as from scratch
    assert loop.max_time == 9.0 and loop.max_steps is None


def test_given_settings_win_over_the_recipe():
    loop = pretrain_config({"init": "minilm", "output": "o", "lr": 3e-4, "max_steps": 50}).loop
    assert (loop.lr, loop.head_warmup_steps, loop.layer_decay) == (3e-4, 30, 0.8)
    assert loop.max_steps == 50 and loop.max_time is None  # a given limit is the only one, as without init
    assert pretrain_config({"init": "minilm", "layer_decay": 1.0}).loop.layer_decay == 1.0


def test_without_init_the_from_scratch_defaults():
    assert pretrain_config({"output": "o"}).loop == PretrainConfig().with_loop(output="o").loop
    assert pretrain_config({"output": "o", "init": None}).loop.lr == 2e-3  # a replayed from-scratch config.yaml


def test_the_command_line_takes_the_same_path():
    def loop_of(*argv):
        args = build_parser().parse_args(["pretrain", "--output", "o", *argv])
        return pretrain_config(requested_settings(PretrainConfig, args)).loop

    assert (loop_of("--init", "minilm").lr, loop_of("--init", "minilm").head_warmup_steps) == (1e-3, 30)
    assert loop_of("--init", "minilm", "--lr", "3e-4", "--head-warmup-steps", "0").lr == 3e-4
    assert loop_of("--init", "minilm", "--head-warmup-steps", "0").head_warmup_steps == 0
    assert loop_of().lr == 2e-3 and loop_of().head_warmup_steps == 0 and loop_of().layer_decay == 1.0


def test_the_first_line_names_the_recipe():
    assert describe(pretrain_config({"init": "minilm", "output": "o"})) == (
        "pre-training: continuing minilm with the continued-pretraining recipe "
        "(lr 0.001, head-only warm-up 30 steps, layer decay 0.8); stops at 9 min"
    )
    assert (
        describe(pretrain_config({"output": "o"}))
        == "pre-training modernbert-tiny from scratch (lr 0.002, batch 8); stops at 9 min"
    )
    assert CONTINUED_LOOP.lr == 1e-3


@pytest.mark.parametrize("bad", [{"layer_decay": 0.0}, {"layer_decay": 1.5}, {"head_warmup_steps": -1}])
def test_out_of_range_settings_are_refused(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        LoopConfig(**bad)


# ---- parameter groups ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def bert():
    torch.manual_seed(0)
    config = BertConfig(vocab_size=50, hidden_size=8, num_hidden_layers=2, num_attention_heads=2, intermediate_size=16)
    return BertForMaskedLM(config)


def names_by_group(model, groups):
    names = {id(p): n for n, p in model.named_parameters()}
    return [[names[id(p)] for p in group["params"]] for group in groups]


def test_defaults_give_the_two_old_groups(bert):
    groups = parameter_groups(bert, LoopConfig())
    assert [(g["weight_decay"], g["lr_scale"], g["head"]) for g in groups] == [(0.01, 1.0, False), (0.0, 1.0, False)]
    decayed, plain = names_by_group(bert, groups)
    assert all(bert.get_parameter(n).ndim == 2 and "LayerNorm" not in n for n in decayed)
    assert all(bert.get_parameter(n).ndim == 1 or "LayerNorm" in n for n in plain)
    assert len(decayed) + len(plain) == len(list(bert.parameters()))


def test_layer_decay_scales_by_depth_and_the_tied_decoder_is_an_embedding(bert):
    groups = parameter_groups(bert, LoopConfig(layer_decay=0.5, head_warmup_steps=2))
    scale = {n: g["lr_scale"] for g, names in zip(groups, names_by_group(bert, groups)) for n in names}
    head = {n: g["head"] for g, names in zip(groups, names_by_group(bert, groups)) for n in names}
    # 2 layers: embeddings depth 0 -> 0.5^3, layer 0 -> 0.5^2, layer 1 -> 0.5, head -> 1
    assert scale["bert.embeddings.word_embeddings.weight"] == 0.125
    assert scale["bert.embeddings.LayerNorm.weight"] == 0.125
    assert scale["bert.encoder.layer.0.attention.self.query.weight"] == 0.25
    assert scale["bert.encoder.layer.1.output.dense.bias"] == 0.5
    assert scale["cls.predictions.transform.dense.weight"] == 1.0 and head["cls.predictions.transform.dense.weight"]
    assert head["cls.predictions.bias"] and not head["bert.embeddings.word_embeddings.weight"]
    # the decoder weight is the word embedding: one tensor, counted once, in the body
    assert bert.cls.predictions.decoder.weight is bert.bert.embeddings.word_embeddings.weight
    assert "cls.predictions.decoder.weight" not in scale
    assert sum(len(g["params"]) for g in groups) == len(list(bert.parameters()))


def test_the_body_waits_then_ramps_in():
    groups = [{"lr_scale": 0.5, "head": False}, {"lr_scale": 1.0, "head": True}]
    body, head = lr_multipliers(groups, lambda step: 1.0, head_warmup_steps=3, ramp_steps=lambda: 4)
    assert [body(s) for s in range(8)] == [0, 0, 0, 0.125, 0.25, 0.375, 0.5, 0.5]  # 0.5 x (s - 3 + 1) / 4, capped
    assert [head(s) for s in range(4)] == [1.0] * 4


# ---- the head-only warm-up in a run --------------------------------------------------------


@pytest.fixture(scope="module")
def corpus(plays_file):
    return plays_file(800)


def test_head_warmup_keeps_the_encoder_still_then_lets_it_train(tiny_mlm_folder, corpus, tmp_path):
    config = pretrain_config(dict(
        init=str(tiny_mlm_folder), corpus=[str(corpus)], output=str(tmp_path / "run"), max_steps=5, head_warmup_steps=3,
        batch_size=4, max_length=32, eval_every=5, eval_blocks=4, save_every=1, keep_last=5,
    ))  # fmt: skip
    assert config.loop.layer_decay == 0.8
    pretrain(config)
    start = BertForMaskedLM.from_pretrained(tiny_mlm_folder).state_dict()
    at = {step: AutoModelForMaskedLM.from_pretrained(tmp_path / "run" / "checkpoints" / f"step-{step}").state_dict()
          for step in (1, 3, 4)}  # fmt: skip
    body = [n for n in start if n.startswith("bert.") and "position_ids" not in n]
    for step in (1, 3):
        assert all(torch.equal(at[step][n], start[n]) for n in body), step
    assert not torch.equal(at[1]["cls.predictions.transform.dense.weight"], start["cls.predictions.transform.dense.weight"])
    assert not torch.equal(at[4]["bert.encoder.layer.0.output.dense.weight"], start["bert.encoder.layer.0.output.dense.weight"])
    assert not torch.equal(at[4]["bert.embeddings.word_embeddings.weight"], start["bert.embeddings.word_embeddings.weight"])


# ---- end to end: a checkpoint that knows something keeps it ---------------------------------


@pytest.fixture(scope="module")
def minilm_slice(tmp_path_factory):
    """A small real checkpoint with knowledge: MiniLM's embeddings and first two layers, under a new MLM head."""
    from tokenmask.train.models import load_minilm, paired_tokenizer

    folder = tmp_path_factory.mktemp("minilm-2") / "model"
    torch.manual_seed(0)  # the new head's initialisation, whatever ran before
    model = load_minilm().model
    model.bert.encoder.layer = model.bert.encoder.layer[:2]
    model.config.num_hidden_layers = 2
    model.save_pretrained(folder)
    paired_tokenizer("minilm", None).save_pretrained(folder)
    return folder


def test_the_continued_recipe_stays_off_the_plateau_where_the_scratch_recipe_falls(minilm_slice, tmp_path):
    """60 steps on the plays from a 2-layer MiniLM slice whose MLM head is new.

    Measured when this test was written (fp32, 64 blocks of 64 tokens, about 600 fixed targets,
    where always guessing the commonest target scores about 0.088): the from-scratch recipe
    (lr 2e-3 from the first step, no head-only warm-up, no layer decay) sits on that share at
    steps 30 and 60 and is warned; the continued recipe reads the encoder: about 0.11 at step 30
    (head only) and 0.13 at step 60. The band asked, 0.03, is over four standard errors of an
    accuracy on 600 targets (sqrt(0.1 * 0.9 / 600) = 0.012), so the gap cannot be luck of the masks.
    """
    from tokenmask.text.resources import shakespeare_scenes

    corpus = tmp_path / "plays.txt"
    corpus.write_text("\n\n".join(shakespeare_scenes()[:300]), encoding="utf-8")
    common = dict(
        corpus=[str(corpus)], init=str(minilm_slice), batch_size=8, max_length=64, eval_blocks=64, max_steps=60,
        eval_every=30, save_every=10**6, precision="fp32",
    )  # fmt: skip
    scratch_recipe = dict(lr=2e-3, head_warmup_steps=0, layer_decay=1.0)
    runs = {
        name: pretrain(pretrain_config(dict(output=str(tmp_path / name), **extra, **common))).evaluations
        for name, extra in (("continued", {}), ("scratch", scratch_recipe))
    }
    accuracy = {name: [e["eval_accuracy"] for e in evaluations] for name, evaluations in runs.items()}
    warned = {name: [e.get("eval_plateau_warning", False) for e in evaluations] for name, evaluations in runs.items()}
    assert warned["scratch"] == [False, True, False]  # warned once, after its warm-up
    assert not any(warned["continued"])
    assert accuracy["continued"][-1] - accuracy["scratch"][-1] >= 0.03, accuracy
    assert accuracy["continued"][-1] > accuracy["continued"][1] > accuracy["scratch"][1], accuracy  # and it keeps learning
