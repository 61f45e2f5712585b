"""Every encoder family through the command line: pretrain → evaluate → fill → finetune → embed.

One tiny checkpoint of each family (``hub_checkpoints.py``: BERT, RoBERTa, XLM-R, CamemBERT,
DistilBERT, ALBERT, ModernBERT, DeBERTa-v3, ELECTRA's generator, MPNet), each with a real
tokenizer of its own kind and class, from the session's Hub cache (fixture ``hub_cache``).
``pretrain --init`` runs once per family (:func:`pretrained`); every later command is a test of
its own, so a failure names its family and command.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from transformers import (
    AutoModelForMaskedLM,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    AutoTokenizer,
)

from hub_checkpoints import FAMILIES
from tokenmask.cli.main import main
from tokenmask.labelled.align import encode_tagged_sentences
from tokenmask.labelled.examples import TaggedSentence, tag_vocab
from tokenmask.train.heads import head_support

TINY = ["--max-length", "32", "--batch-size", "2", "--max-steps", "2", "--report-to", "none", "--cpu"]
"""Two steps of two 32-token examples, on the CPU, no tracker: what every training command gets."""


def starting_model(hub_cache, family: str) -> str:
    """What the commands are given as the family's checkpoint: its Hub id, resolved through the
    session's Hugging Face cache with ``HF_HUB_OFFLINE=1``."""
    return hub_cache.families[family]


@pytest.fixture(scope="module")
def corpus(plays_file) -> Path:
    """100 paragraphs of 6 lines of Shakespeare: about 8,000 tokens, 260 blocks of 32."""
    return plays_file(600, 6)


@pytest.fixture(scope="module")
def pretrained(hub_cache, corpus, tmp_path_factory) -> Callable[[str], Path]:
    """``pretrained(family)``: OUTPUT of ``pretrain --init`` from the family's checkpoint, run
    once per family (whole-word masking: word ids from the family's tokenizer; the encoder trains
    from the first step, not only the head)."""
    outputs: dict[str, Path] = {}

    def pretrain(family: str) -> Path:
        if family not in outputs:
            out = tmp_path_factory.mktemp(f"pretrain-{family}")
            argv = [
                "pretrain", str(corpus), "--init", starting_model(hub_cache, family), "--tokenizer", starting_model(hub_cache, family),
                "--output", str(out), *TINY,
                "--eval-blocks", "2", "--num-proc", "1", "--strategy", "whole_word", "--head-warmup-steps", "0", "--no-demo",
            ]  # fmt: skip
            said = io.StringIO()
            with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
                assert main(argv) == 0, family
            (out / "said.txt").write_text(said.getvalue(), encoding="utf-8")  # what the run told the user
            outputs[family] = out
        return outputs[family]

    return pretrain


@pytest.mark.parametrize("family", FAMILIES)
def test_pretrain_continues_from_the_family_checkpoint(family, hub_cache, pretrained):
    start, folder = starting_model(hub_cache, family), pretrained(family) / "model"
    before = AutoModelForMaskedLM.from_pretrained(start).state_dict()
    model = AutoModelForMaskedLM.from_pretrained(folder, local_files_only=True)
    assert type(model).__name__ == FAMILIES[family].model
    after = model.state_dict()
    assert after.keys() == before.keys() and all(after[k].shape == before[k].shape for k in before)
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    base = model.base_model_prefix + "."
    assert any(k.startswith(base) for k in changed) and any(not k.startswith(base) for k in changed), sorted(changed)
    tokenizer, own = AutoTokenizer.from_pretrained(folder), AutoTokenizer.from_pretrained(start)
    assert type(tokenizer) is type(own) and tokenizer.get_vocab() == own.get_vocab()
    said = (pretrained(family) / "said.txt").read_text(encoding="utf-8")
    assert f"sparse head: {FAMILIES[family].model}'s MLM head" in said, said  # in the run's first lines
    assert head_support(model).sparse
    evals = [json.loads(line) for line in (pretrained(family) / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in evals if "eval_loss" in r] == [0, 2] and all(math.isfinite(r.get("eval_loss", 0)) for r in evals)


@pytest.mark.parametrize("family", FAMILIES)
def test_evaluate_the_start_and_the_result(family, hub_cache, pretrained, corpus, capsys):
    vocabulary = AutoModelForMaskedLM.from_pretrained(starting_model(hub_cache, family)).config.vocab_size
    for model in (starting_model(hub_cache, family), str(pretrained(family) / "model")):
        assert main(["evaluate", model, str(corpus), "--max-length", "32", "--max-blocks", "2", "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["targets"] > 0 and report["perplexity"] == pytest.approx(math.exp(report["loss"]))
        # tiny random models guess about uniformly over their ids: a loss near ln(V)
        assert abs(report["loss"] - math.log(vocabulary)) < 1.0, (model, report)


@pytest.mark.parametrize("family", FAMILIES)
def test_fill_a_mask_written_the_bert_way(family, hub_cache, pretrained, capsys):
    for model in (starting_model(hub_cache, family), str(pretrained(family) / "model")):
        assert main(["fill", model, "the [MASK] of the play", "--json"]) == 0
        (guesses,) = json.loads(capsys.readouterr().out)["predictions"]  # one mask, whatever the family spells it
        scores = [guess["score"] for guess in guesses]
        assert len(guesses) == 5 and all(isinstance(guess["token"], str) for guess in guesses)
        assert scores == sorted(scores, reverse=True) and 0 < sum(scores) <= 1


@pytest.mark.parametrize("family", FAMILIES)
def test_finetune_to_classify(family, hub_cache, reviews_csv, tmp_path):
    argv = ["finetune", str(reviews_csv), "--task", "classify", "--model", starting_model(hub_cache, family)]  # by Hub id
    assert main([*argv, "--output", str(tmp_path), *TINY, "--validation-share", "0.05"]) == 0
    model = AutoModelForSequenceClassification.from_pretrained(tmp_path / "model", local_files_only=True)
    assert type(model).__name__ == FAMILIES[family].model.replace("MaskedLM", "SequenceClassification")
    results = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    assert model.config.id2label == dict(enumerate(results["labels"])) and sorted(results["labels"]) == ["neg", "pos"]


@pytest.mark.parametrize("family", FAMILIES)
def test_finetune_to_tag_words(family, pretrained, tagged_jsonl, tmp_path):
    argv = ["finetune", str(tagged_jsonl), "--task", "tokens", "--model", str(pretrained(family) / "model")]
    assert main([*argv, "--output", str(tmp_path), *TINY]) == 0
    model = AutoModelForTokenClassification.from_pretrained(tmp_path / "model", local_files_only=True)
    assert type(model).__name__ == FAMILIES[family].model.replace("MaskedLM", "TokenClassification")
    results = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    assert set(results["labels"]) == {"O", "B-PER", "I-PER", "B-LOC", "I-LOC"}


@pytest.mark.parametrize("family", FAMILIES)
def test_tagged_words_are_tokenized_as_in_running_text(family, hub_cache):
    """Token labelling feeds the model the pieces pre-training showed it: the words of a tagged
    sentence, tokenized one by one, give the ids of the sentence's text."""
    tokenizer = AutoTokenizer.from_pretrained(hub_cache.families[family])
    words = ("Anna", "visited", "new", "york", "today,", "wedding-day")
    sentence = TaggedSentence(words, ("B-PER", "O", "B-LOC", "I-LOC", "O", "O"))
    (example,) = encode_tagged_sentences([sentence], tokenizer, tag_vocab(["O", "B-PER", "B-LOC", "I-LOC"])).examples
    assert tokenizer.convert_ids_to_tokens(example["input_ids"]) == tokenizer.tokenize(" ".join(words), add_special_tokens=True)
    assert sorted(set(example["word_ids"]) - {-1}) == list(range(len(words)))


@pytest.mark.parametrize("family", FAMILIES)
def test_embed_texts_with_the_encoder(family, hub_cache, pretrained, short_texts, tmp_path):
    for name, model in (("start", starting_model(hub_cache, family)), ("trained", str(pretrained(family) / "model"))):
        index = tmp_path / f"{name}.npy"
        assert main(["embed", model, "--input", str(short_texts), "--output", str(index)]) == 0
        vectors = np.load(index)
        assert vectors.shape == (3, 32) and vectors.dtype == np.float32  # 3 texts x the encoder's hidden size
        assert np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5) and not np.allclose(vectors[0], vectors[1])


DOCS = Path(__file__).resolve().parents[2] / "docs" / "hub.md"
ROWS = {
    "BERT": "bert", "RoBERTa": "roberta", "XLM-RoBERTa": "xlm-roberta", "CamemBERT": "camembert", "DistilBERT": "distilbert",
    "ALBERT": "albert", "ModernBERT": "modernbert", "DeBERTa-v2/v3": "deberta-v2", "ELECTRA (generator)": "electra",
    "MPNet": "mpnet",
}  # fmt: skip
"""The docs table's family names -> the families built here."""
KINDS = {"WordPiece": "wordpiece", "byte-level BPE": "bpe", "SentencePiece (Unigram)": "unigram"}


def family_table() -> dict[str, dict[str, str]]:
    """docs/hub.md's family table: ``{"BERT": {"model class": "BertForMaskedLM", "sparse head": "yes", ...}}``."""
    text = DOCS.read_text(encoding="utf-8").split("## Encoder families", 1)[1]
    rows = [
        [cell.strip().strip("`") for cell in line.strip().strip("|").split("|")]
        for line in text.splitlines()
        if line.startswith("|")
    ]
    header = rows[0]
    return {row[0]: dict(zip(header, row)) for row in rows[2:]}  # rows[1] is the |---| line


@pytest.mark.parametrize("name", ROWS)
def test_each_row_of_the_docs_family_table_holds(name, hub_cache, pretrained):
    """The row's class, sparse head, last layer and tokenizer kind are what the family's checkpoint
    gets; its whole-word masking is the pre-training run above (``--strategy whole_word``)."""
    row, family = family_table()[name], ROWS[name]
    model = AutoModelForMaskedLM.from_pretrained(starting_model(hub_cache, family))
    support = head_support(model)
    assert row["model class"] == type(model).__name__ == FAMILIES[family].model
    assert (row["sparse head"], row["last layer at the targets"].split()[0]) == (
        "yes" if support.sparse else "no",
        "yes" if support.last_layer else "no",
    ), support.note
    assert KINDS[row["tokenizer kind"]] == FAMILIES[family].kind
    trained = yaml.safe_load((pretrained(family) / "config.yaml").read_text(encoding="utf-8"))
    assert row["whole-word masking"] == "yes" and trained["strategy"] == "whole_word"  # the run above masked whole words


def test_the_docs_family_table_lists_every_family_tested():
    assert sorted(ROWS[name] for name in family_table()) == sorted(FAMILIES)
