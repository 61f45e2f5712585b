"""Fuzzing the two doors of the data pipeline with hypothesis: bytes into the corpus readers,
random settings and token ids into the collator.

Corpus files of random bytes (spiced with line ends, NULs, quotes, JSON punctuation, bytes that
are not UTF-8) either read, giving strings that encode as UTF-8, or fail with a ValueError or
FileNotFoundError that names the file: never another exception, never a codec error from deep
inside. Random masking settings on random id batches (special, padding and placeholder ids
anywhere) keep the collator's contract: labels are -100 exactly off the targets and the original
id on them, no protected id is selected or drawn, the examples are not mutated, the batch has
the examples' shape, and the same call gives the same batch.
"""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenmask import MaskingCollator
from tokenmask.blocks.build import corpus_blocks
from tokenmask.masking import IGNORE_INDEX
from tokenmask.text.byte_checks import ReadStats
from tokenmask.text.corpus import read_documents

FRAGMENTS = [
    b"\n", b"\r\n", b"\r", b"\x00", b" ", b"\t", b"text", b"word ", b",", b'"', b"'", b"[", b"]", b"{", b"}",
    b'{"text": "', b'"}\n', b'"text"', b": ", b"null", b"1", b"\\ud800", b"\\n", b"\xe9", b"\xff\xfe", b"\xc3",
    b"\xef\xbb\xbf", b"caf\xc3\xa9", b"\xf0\x9f\x98\x80",
]  # fmt: skip
CONTENTS = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.binary(max_size=6)), max_size=40).map(b"".join)
SUFFIXES = st.sampled_from([".txt", ".md", ".jsonl", ".json", ".csv", ".tsv"])
LIMITS = st.sampled_from([4, 40, 1_000_000])


def read_or_refuse(content: bytes, suffix: str, read) -> list[str] | None:
    """``read(path)`` on ``content`` saved as ``fuzz{suffix}``: its result, or None when it refused
    the file with a ValueError / FileNotFoundError naming it (anything else fails the test)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"fuzz{suffix}"
        path.write_bytes(content)
        try:
            return read(path)
        except (ValueError, FileNotFoundError) as error:
            assert not isinstance(error, UnicodeError), f"a codec error escaped: {error!r}"
            assert path.name in str(error), f"the message does not name the file: {error}"
            return None


@settings(max_examples=150, deadline=None)
@given(content=CONTENTS, suffix=SUFFIXES, boundary=st.sampled_from(["line", "paragraph", "file"]),
       strict=st.booleans(), limit=LIMITS)  # fmt: skip
def test_random_bytes_read_as_text_or_fail_naming_the_file(content, suffix, boundary, strict, limit):
    stats = ReadStats()
    documents = read_or_refuse(
        content,
        suffix,
        lambda path: list(read_documents([path], boundary=boundary, strict=strict, max_line_bytes=limit, stats=stats)),
    )
    if documents is None:
        return
    for document in documents:
        assert isinstance(document, str)
        document.encode("utf-8")  # no lone surrogate left behind
    if strict:
        assert stats.invalid_utf8 == 0
    elif stats.invalid_utf8:
        assert "fuzz" in stats.first_invalid and "\ufffd" in "".join(documents)


@settings(max_examples=40, deadline=None)
@given(content=CONTENTS, suffix=SUFFIXES)
def test_random_bytes_pack_into_blocks_or_fail_naming_the_problem(bert_tokenizer, content, suffix):
    def pack(path: Path):
        try:
            return corpus_blocks([path], bert_tokenizer, block_length=16, validation_share=0.1, use_cache=False, progress=False)
        except ValueError as error:
            if "the corpus holds no text for training" not in str(error):
                raise
            return None  # a file that reads but holds no text: refused, though not for the file's sake

    blocks = read_or_refuse(content, suffix, pack)
    if blocks is not None:
        assert blocks.documents > 0 and len(blocks.train) > 0
        assert all(len(block["input_ids"]) <= 16 for block in blocks.train)


# ---- the collator -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def masking_tokenizers(bert_tokenizer, roberta_tokenizer):
    return {"bert-base-uncased": bert_tokenizer, "roberta-gpt2": roberta_tokenizer}


BEYOND = 20
"""Ids from len(tokenizer) to len(tokenizer) + BEYOND - 1: no one's, masked as ordinary tokens."""


@st.composite
def masking_settings(draw) -> dict:
    """Any valid MaskingCollator keywords (the 'given' strategy needs spans: left out)."""
    mask_replace = draw(st.sampled_from([0.0, 0.5, 0.8, 1.0]))
    return {
        "strategy": draw(st.sampled_from(["token", "whole_word", "span", "ngram"])),
        "selection": draw(st.sampled_from(["bernoulli", "exact"])),
        "mlm_probability": draw(st.floats(0.01, 1.0)),
        "mask_replace_prob": mask_replace,
        "random_replace_prob": draw(st.floats(0.0, 1.0 - mask_replace)),
        "min_masks_per_sequence": draw(st.integers(0, 2)),
        "max_predictions": draw(st.none() | st.integers(1, 6)),
        "corrupt_per_unit": draw(st.booleans()),
        "span_geometric_p": draw(st.floats(0.05, 1.0)),
        "span_max_words": draw(st.integers(1, 6)),
        "ngram_max_n": draw(st.integers(1, 4)),
        "pad_to_multiple_of": draw(st.none() | st.integers(1, 8)),
        "seed": draw(st.integers(0, 2**31 - 1)),
    }


def examples(draw, tokenizer) -> list[dict]:
    """1-4 rows of random ids (specials, padding, [unused] ids and ids beyond the vocabulary too),
    framed or not, as lists, numpy arrays or tensors, with or without an ``id``."""
    size, rows, with_ids = len(tokenizer), [], draw(st.booleans())
    for row in range(draw(st.integers(1, 4))):
        ids = draw(st.lists(st.integers(0, size - 1) | st.integers(size, size + BEYOND - 1), min_size=0, max_size=24))
        if draw(st.booleans()):
            ids = [tokenizer.cls_token_id, *ids, tokenizer.sep_token_id]
        ids = ids or [tokenizer.cls_token_id]
        kind = draw(st.sampled_from(["list", "numpy", "tensor"]))
        value = ids if kind == "list" else np.array(ids, dtype=np.int64) if kind == "numpy" else torch.tensor(ids)
        example = {"input_ids": value}
        if with_ids:
            example["id"] = row
        rows.append(example)
    return rows


@settings(max_examples=60, deadline=None)
@given(family=st.sampled_from(["bert-base-uncased", "roberta-gpt2"]), options=masking_settings(), data=st.data())
def test_random_settings_on_random_ids_keep_the_collator_contract(masking_tokenizers, family, options, data):
    tokenizer = masking_tokenizers[family]
    features = examples(data.draw, tokenizer)
    before = copy.deepcopy(features)
    collator = MaskingCollator(tokenizer, **options)
    protected = torch.cat([torch.from_numpy(collator.vocab.protected), torch.zeros(BEYOND, dtype=torch.bool)])
    originals = [torch.as_tensor(np.asarray(f["input_ids"]), dtype=torch.long) for f in features]
    batch = collator(features)  # a row, or a batch, with nothing to mask gets no target: no error

    for feature, original in zip(features, before):  # not mutated, whatever the container
        assert np.array_equal(np.asarray(feature["input_ids"]), np.asarray(original["input_ids"]))
    ids, labels, attention = batch["input_ids"], batch["labels"], batch["attention_mask"]
    longest, multiple = max(len(o) for o in originals), options["pad_to_multiple_of"] or 1
    assert ids.shape == labels.shape == attention.shape == (len(features), -(-longest // multiple) * multiple)
    for row, original in enumerate(originals):
        n = len(original)
        targets = labels[row, :n] != IGNORE_INDEX
        assert torch.equal(labels[row, :n][targets], original[targets]), "a label is not the original id"
        assert torch.equal(ids[row, :n][~targets], original[~targets]), "a non-target was changed"
        assert not (targets & protected[original]).any(), "a protected token was selected"
        drawn = targets & (ids[row, :n] != original) & (ids[row, :n] != tokenizer.mask_token_id)
        assert not protected[ids[row, :n][drawn]].any(), "a protected id was drawn"
        assert (ids[row, :n][drawn] < len(tokenizer)).all(), "an id beyond the vocabulary was drawn"
        if options["mask_replace_prob"] == 1.0:
            assert (ids[row, :n][targets] == tokenizer.mask_token_id).all()
        if options["mask_replace_prob"] + options["random_replace_prob"] == 0.0:
            assert torch.equal(ids[row, :n], original)
        if options["min_masks_per_sequence"] > 0 and (~protected[original]).any():
            assert targets.any(), "a row with maskable tokens has no target"
        assert (labels[row, n:] == IGNORE_INDEX).all() and (attention[row, :n] == 1).all() and (attention[row, n:] == 0).all()
    again = MaskingCollator(tokenizer, **options)(copy.deepcopy(before))  # the same settings: the same batch
    assert all(torch.equal(batch[k], again[k]) for k in ("input_ids", "labels", "attention_mask")), "not deterministic"
