"""Properties of the whole masking pass, over every strategy, with hypothesis."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tokenmask.masking
from tokenmask.masking import (
    IGNORE_INDEX,
    STRATEGIES,
    CorruptionConfig,
    Outcome,
    RowKeys,
    SelectionConfig,
    UnitConfig,
    VocabTables,
    build_units,
    eligible_positions,
    mask_tokens,
    token_units,
)
from tokenmask.masking.select import priority_units

V, PAD, CLS, SEP, MASK = 60, 0, 1, 2, 3
VOCAB = VocabTables.from_ids(V, mask_token_id=MASK, protected_ids=[PAD, CLS, SEP, 4], excluded_from_replacement=[5])


@st.composite
def examples(draw, max_len: int = 30):
    """One example: [CLS] words [SEP] (optionally two documents), word ids, given spans."""
    n_words = draw(st.integers(0, max_len // 3))
    pieces = draw(st.lists(st.integers(1, 3), min_size=n_words, max_size=n_words))
    ids, words = [CLS], [-1]
    for w, n in enumerate(pieces):
        ids.extend(draw(st.lists(st.integers(4, V - 1), min_size=n, max_size=n)))  # 4 is protected
        words.extend([w] * n)
        if draw(st.integers(0, 9)) == 0:  # an occasional separator inside
            ids.append(SEP)
            words.append(-1)
    ids.append(SEP)
    words.append(-1)
    # given spans: some whole words, in order
    spans, position = [], 1
    for n in pieces:
        while ids[position] == SEP:
            position += 1
        if draw(st.booleans()):
            spans.append([position, position + n])
        position += n
    return ids, words, spans


@st.composite
def batches(draw):
    rows = draw(st.lists(examples(), min_size=1, max_size=5))
    ids_list = [r[0] for r in rows]
    example_ids = draw(st.lists(st.integers(-(2**40), 2**40), min_size=len(rows), max_size=len(rows), unique=True))
    extra_pad = draw(st.integers(0, 4))
    return rows, example_ids, max(len(i) for i in ids_list) + extra_pad


def pad(rows, width):
    ids = np.full((len(rows), width), PAD, dtype=np.int64)
    words = np.full((len(rows), width), -1, dtype=np.int64)
    attention = np.zeros((len(rows), width), dtype=np.int64)
    spans = np.full((len(rows), max(1, max(len(r[2]) for r in rows)), 2), -1, dtype=np.int64)
    for i, (row_ids, row_words, row_spans) in enumerate(rows):
        ids[i, : len(row_ids)] = row_ids
        words[i, : len(row_words)] = row_words
        attention[i, : len(row_ids)] = 1
        if row_spans:
            spans[i, : len(row_spans)] = row_spans
    return torch.from_numpy(ids), torch.from_numpy(words), torch.from_numpy(attention), torch.from_numpy(spans)


def term_mask_of(ids, words):
    """Terms for the tests: every word whose first token id is a multiple of 4 (about 1 in 4)."""
    ids, words = ids.numpy(), words.numpy()
    first = np.zeros_like(words)
    first[:, 1:] = words[:, 1:] != words[:, :-1]
    first[:, 0] = 1
    first_id = np.where(first & (words >= 0), ids, 0)
    starts = np.maximum.accumulate(np.where(first == 1, np.arange(ids.shape[1])[None, :], 0), axis=1)
    return torch.from_numpy((words >= 0) & (np.take_along_axis(first_id, starts, axis=1) % 4 == 0))


def run(rows, example_ids, width, strategy, per_unit=False, terms=False, **selection):
    ids, words, attention, spans = pad(rows, width)
    before = ids.clone()
    out = mask_tokens(
        ids,
        vocab=VOCAB,
        example_ids=torch.tensor(example_ids),
        seed=11,
        epoch=1,
        unit_config=UnitConfig(strategy=strategy),
        selection=SelectionConfig(mlm_probability=0.3, **selection),
        corruption=CorruptionConfig(per_unit=per_unit),
        attention_mask=attention,
        word_ids=words,
        given_spans=spans,
        term_mask=term_mask_of(ids, words) if terms else None,
    )
    assert torch.equal(ids, before), "input_ids were mutated"
    return ids, attention, out


common = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("strategy", STRATEGIES)
@common
@given(
    batch=batches(),
    mode=st.sampled_from(["bernoulli", "exact"]),
    floor=st.sampled_from([0, 1, 2]),
    cap=st.sampled_from([None, 1, 3, 8]),
    per_unit=st.booleans(),
)
def test_labels_targets_and_protection(strategy, batch, mode, floor, cap, per_unit):
    rows, example_ids, width = batch
    ids, attention, out = run(
        rows, example_ids, width, strategy, per_unit=per_unit, mode=mode, min_masks_per_sequence=floor, max_predictions=cap
    )
    outcome, labels, inputs = out.outcome, out.labels, out.input_ids
    targets = outcome != Outcome.NONE
    # labels: the original id exactly at targets, IGNORE_INDEX elsewhere
    assert torch.equal(labels == IGNORE_INDEX, ~targets)
    assert torch.equal(labels[targets], ids[targets])
    # protected ids and padding are never targets; non-targets are unchanged
    protected = torch.from_numpy(VOCAB.protected)[ids]
    assert not (targets & (protected | (attention == 0))).any()
    assert torch.equal(inputs[~targets], ids[~targets])
    # outcomes do what they say; random draws are never protected nor excluded
    assert (inputs[outcome == Outcome.MASK] == MASK).all()
    assert torch.equal(inputs[outcome == Outcome.KEEP], ids[outcome == Outcome.KEEP])
    drawn = inputs[outcome == Outcome.RANDOM]
    assert not torch.from_numpy(VOCAB.protected)[drawn].any() and not (drawn == 5).any()
    # with a floor, every row with an eligible unit has a target (the floor wins over the cap)
    eligible_rows = ((~protected) & (attention == 1)).any(dim=1)
    if strategy == "given":
        eligible_rows = torch.tensor([any(not VOCAB.protected[r[0][a:b]].all() for a, b in r[2]) for r in rows])
    if floor > 0:
        assert torch.equal(targets.any(dim=1), eligible_rows)
    else:
        assert not (targets.any(dim=1) & ~eligible_rows).any()
        if cap is not None:
            assert (targets.sum(dim=1) <= cap).all()


@pytest.mark.parametrize("strategy", STRATEGIES)
@common
@given(batch=batches(), data=st.data(), terms=st.booleans(), mode=st.sampled_from(["bernoulli", "exact"]))
def test_mask_of_an_example_ignores_batch_composition_and_padding(strategy, batch, data, terms, mode):
    rows, example_ids, width = batch
    _, _, together = run(rows, example_ids, width, strategy, terms=terms, mode=mode)
    order = data.draw(st.permutations(range(len(rows))))
    _, _, shuffled = run([rows[i] for i in order], [example_ids[i] for i in order], width + 3, strategy, terms=terms, mode=mode)
    for new, old in enumerate(order):
        n = len(rows[old][0])
        _, _, alone = run([rows[old]], [example_ids[old]], n, strategy, terms=terms, mode=mode)
        assert torch.equal(together.input_ids[old, :n], alone.input_ids[0])
        assert torch.equal(together.labels[old, :n], alone.labels[0])
        assert torch.equal(shuffled.input_ids[new, :n], alone.input_ids[0])


@pytest.mark.parametrize("strategy", STRATEGIES)
@common
@given(batch=batches())
def test_the_masked_batch_carries_the_units_it_selected_from(strategy, batch):
    rows, example_ids, width = batch
    ids, words, attention, spans = pad(rows, width)
    _, _, out = run(rows, example_ids, width, strategy)
    out_units, out_eligible = out.units.numpy(), out.eligible.numpy()
    eligible = eligible_positions(ids.numpy(), VOCAB, attention_mask=attention.numpy().astype(bool))
    keys = RowKeys.derive(np.array(example_ids), seed=11, epoch=1)  # run()'s seed and epoch
    units = build_units(UnitConfig(strategy=strategy), eligible, keys, word_ids=words.numpy(), given_spans=spans.numpy())
    assert np.array_equal(out_eligible, eligible)
    assert np.array_equal(out_units, units) and out_units.shape == tuple(ids.shape)
    # targets are whole units: a unit is either all targets or none
    targets = (out.outcome != Outcome.NONE).numpy()
    assert not (targets & (out_units < 0)).any()
    flat = (np.arange(len(rows))[:, None] * width + out_units)[out_units >= 0]
    hit = np.bincount(flat, weights=targets[out_units >= 0], minlength=len(rows) * width)
    size = np.bincount(flat, minlength=len(rows) * width)
    assert np.all((hit == 0) | (hit == size))


@pytest.mark.parametrize("strategy", [s for s in STRATEGIES if s != "given"])
@common
@given(batch=batches(), mode=st.sampled_from(["bernoulli", "exact"]), floor=st.sampled_from([0, 1, 2]))
def test_terms_are_whole_first_and_never_special(strategy, batch, mode, floor):
    # Terms are whole words here (one word = one term), so every strategy keeps them whole. No cap:
    # bernoulli takes every term; exact takes them all when their units fit the budget round(p E).
    rows, example_ids, width = batch
    ids, words, _, _ = pad(rows, width)
    _, _, out = run(rows, example_ids, width, strategy, terms=True, mode=mode, min_masks_per_sequence=floor)
    targets = (out.outcome != Outcome.NONE).numpy()
    out_units, out_eligible = out.units.numpy(), out.eligible.numpy()
    terms = term_mask_of(ids, words).numpy() & out_eligible
    assert not (targets & ~out_eligible).any(), "a special token or padding was selected"
    for row in range(len(rows)):
        # a term is a word; a protected id inside a word cuts it into two units, as for every word
        pieces = set(zip(words.numpy()[row][terms[row]], out_units[row][terms[row]]))
        for word, unit in pieces:
            chosen = targets[row][(words.numpy()[row] == word) & (out_units[row] == unit)]
            assert chosen.all() or not chosen.any(), f"term word {word} split in row {row}"
    first = priority_units(out_units, terms)  # the units holding a term, whole
    budget = np.floor(0.3 * out_eligible.sum(axis=1) + 0.5)
    under = (first.sum(axis=1) <= budget) if mode == "exact" else np.ones(len(rows), dtype=bool)
    assert targets[under][first[under]].all(), "a term was left out while under the budget"


def test_units_of_a_hand_made_batch():
    # [CLS] a ##b c [SEP] [PAD]: words 0 0 1; the token strategy numbers each eligible token
    ids = torch.tensor([[CLS, 10, 11, 12, SEP, PAD]])
    words = torch.tensor([[-1, 0, 0, 1, -1, -1]])
    attention = torch.tensor([[1, 1, 1, 1, 1, 0]])
    kwargs = dict(vocab=VOCAB, example_ids=torch.tensor([7]), seed=0, attention_mask=attention, word_ids=words)
    by_token = mask_tokens(ids, **kwargs)
    assert by_token.strategy_units is None  # the fast path builds none; units builds it when asked
    assert by_token.units.tolist() == [[-1, 0, 1, 2, -1, -1]]
    assert np.array_equal(by_token.units.numpy(), token_units(by_token.eligible.numpy()))
    by_word = mask_tokens(ids, unit_config=UnitConfig(strategy="whole_word"), **kwargs)
    assert by_word.units.tolist() == [[-1, 0, 0, 1, -1, -1]]
    assert by_word.eligible.tolist() == [[False, True, True, True, False, False]]


@common
@given(batch=batches())
def test_same_key_same_output(batch):
    rows, example_ids, width = batch
    ids, _words, attention, _ = pad(rows, width)
    kwargs = dict(vocab=VOCAB, example_ids=torch.tensor(example_ids), seed=3, attention_mask=attention)
    a = mask_tokens(ids, epoch=0, **kwargs)
    b = mask_tokens(ids, epoch=0, **kwargs)
    assert torch.equal(a.input_ids, b.input_ids) and torch.equal(a.labels, b.labels)


def test_epochs_give_different_masks():
    ids = torch.randint(6, V, (8, 200))
    kwargs = dict(vocab=VOCAB, example_ids=torch.arange(8), seed=3)
    masks = [mask_tokens(ids, epoch=e, **kwargs).labels != IGNORE_INDEX for e in range(3)]
    assert not torch.equal(masks[0], masks[1]) and not torch.equal(masks[1], masks[2])


def test_input_validation():
    with pytest.raises(ValueError, match=">= 0"):
        mask_tokens(torch.tensor([[1, -7]]), vocab=VOCAB, example_ids=torch.tensor([0]), seed=0)
    with pytest.raises(ValueError, match="example_ids"):
        mask_tokens(torch.tensor([[1, 7]]), vocab=VOCAB, example_ids=torch.tensor([0, 1]), seed=0)
    with pytest.raises(ValueError, match="word_ids"):
        mask_tokens(
            torch.tensor([[1, 7]]), vocab=VOCAB, example_ids=torch.tensor([0]), seed=0, unit_config=UnitConfig(strategy="span")
        )
    with pytest.raises(ValueError, match="given_spans"):
        mask_tokens(
            torch.tensor([[1, 7]]), vocab=VOCAB, example_ids=torch.tensor([0]), seed=0, unit_config=UnitConfig(strategy="given")
        )
    with pytest.raises(ValueError, match="batch, length"):
        mask_tokens(torch.tensor([1, 7]), vocab=VOCAB, example_ids=torch.tensor([0]), seed=0)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_ids_beyond_the_vocabulary_are_ordinary_tokens_never_drawn(backend):
    # V = 60: ids 70 and 99 belong to no one. At rate 1 every unprotected token is a target, and with
    # random_replace_prob 1 every target is replaced by a draw from the vocabulary's replaceable ids.
    with pytest.warns(UserWarning, match="beyond the vocabulary's 60 ids"):
        masked = mask_tokens(
            torch.tensor([[CLS, 70, 99, 7, SEP]]), vocab=VOCAB, example_ids=torch.tensor([0]), seed=0,
            selection=SelectionConfig(mlm_probability=1.0),
            corruption=CorruptionConfig(mask_replace_prob=0.0, random_replace_prob=1.0), backend=backend,
        )  # fmt: skip
    assert masked.labels.tolist() == [[IGNORE_INDEX, 70, 99, 7, IGNORE_INDEX]]
    assert set(masked.input_ids[0, 1:4].tolist()) <= set(VOCAB.replaceable.tolist())


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_a_vocabulary_with_nothing_to_draw_keeps_the_random_share(backend):
    # Hugging Face's test vocabulary: five ids, all special. The same targets and [MASK]s as with a
    # vocabulary that can draw (ids from 5 on are unprotected in both), and its RANDOM targets are KEPT.
    bare = VocabTables.from_ids(5, mask_token_id=MASK, protected_ids=[0, 1, 2, 4])
    drawing = VocabTables.from_ids(1000, mask_token_id=MASK, protected_ids=[0, 1, 2, 4])
    ids = torch.arange(1000).reshape(2, 500)
    common = dict(example_ids=torch.tensor([0, 1]), seed=3, selection=SelectionConfig(mlm_probability=0.5), backend=backend)
    kept, drawn = mask_tokens(ids, vocab=bare, **common), mask_tokens(ids, vocab=drawing, **common)
    assert bare.replaceable.size == 0 and (drawn.target_outcome == Outcome.RANDOM).sum() > 10
    assert torch.equal(kept.target_index, drawn.target_index)
    assert torch.equal(
        kept.target_outcome, torch.where(drawn.target_outcome == Outcome.RANDOM, int(Outcome.KEEP), drawn.target_outcome)
    )
    assert torch.equal(kept.input_ids[kept.outcome == Outcome.KEEP], ids[kept.outcome == Outcome.KEEP])
    assert (kept.input_ids[kept.outcome == Outcome.MASK] == MASK).all()


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: SelectionConfig(mlm_probability=0.0), "mlm_probability must be in \\(0, 1\\]"),
        (lambda: SelectionConfig(mlm_probability=1.5), "mlm_probability must be in \\(0, 1\\]"),
        (lambda: SelectionConfig(mode="sometimes"), "selection must be one of"),
        (lambda: SelectionConfig(min_masks_per_sequence=-1), "min_masks_per_sequence"),
        (lambda: SelectionConfig(max_predictions=0), "max_predictions"),
        (lambda: CorruptionConfig(mask_replace_prob=0.9, random_replace_prob=0.2), "must be <= 1"),
        (lambda: CorruptionConfig(mask_replace_prob=-0.1), "mask_replace_prob must be in \\[0, 1\\]"),
        (lambda: UnitConfig(strategy="sentence"), "strategy must be one of"),
        (lambda: UnitConfig(span_geometric_p=0.0), "span_geometric_p"),
        (lambda: UnitConfig(span_max_words=0), "span_max_words"),
        (lambda: UnitConfig(ngram_max_n=0), "ngram_max_n"),
        (lambda: VocabTables.from_ids(5, mask_token_id=9, protected_ids=[]), "outside the vocabulary"),
        (lambda: VocabTables.from_ids(2, mask_token_id=1, protected_ids=[0]).draw(np.array([0.5])), "no replaceable"),
    ],
)
def test_bad_configuration_names_the_problem(build, message):
    with pytest.raises(ValueError, match=message):
        build()


# The two backends: torch (on the tensors' device) gives the numpy pass's numbers bit for bit.

COUNTED_VOCAB = VocabTables.from_ids(
    V, mask_token_id=MASK, protected_ids=[PAD, CLS, SEP, 4], replace_counts=np.arange(V, dtype=np.float64) % 7
)  # frequency-weighted replacements: the cdf path of the draw


def both_backends(ids, device="cpu", **kwargs):
    """``mask_tokens`` by numpy and by torch on ``device``; asserts every output is the same."""
    by_numpy = mask_tokens(ids, backend="numpy", **kwargs)
    moved = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
    by_torch = mask_tokens(ids.to(device), backend="torch", **moved)
    for name in ("input_ids", "labels", "target_index", "target_outcome", "eligible", "units", "outcome"):
        got = getattr(by_torch, name)
        assert got.device.type == torch.device(device).type, f"{name} left the device"
        assert torch.equal(got.cpu(), getattr(by_numpy, name)), f"{name} differs between the backends"
    return by_numpy


@pytest.mark.parametrize("strategy", STRATEGIES)
@common
@given(
    batch=batches(),
    mode=st.sampled_from(["bernoulli", "exact"]),
    floor=st.sampled_from([0, 1, 3]),
    cap=st.sampled_from([None, 2, 5]),
    per_unit=st.booleans(),
    terms=st.booleans(),
    counted=st.booleans(),
    rate=st.sampled_from([0.15, 0.5, 1.0]),
)
def test_the_torch_backend_gives_the_numpy_numbers(strategy, batch, mode, floor, cap, per_unit, terms, counted, rate):
    rows, example_ids, width = batch
    ids, words, attention, spans = pad(rows, width)
    both_backends(
        ids,
        vocab=COUNTED_VOCAB if counted else VOCAB,
        example_ids=torch.tensor(example_ids),
        seed=5,
        epoch=2,
        unit_config=UnitConfig(strategy=strategy, span_geometric_p=0.3, span_max_words=4, ngram_max_n=4),
        selection=SelectionConfig(mlm_probability=rate, mode=mode, min_masks_per_sequence=floor, max_predictions=cap),
        corruption=CorruptionConfig(per_unit=per_unit),
        attention_mask=attention,
        word_ids=words,
        given_spans=spans,
        term_mask=term_mask_of(ids, words) if terms and strategy != "given" else None,
    )


def test_the_torch_modules_take_only_public_names_from_the_numpy_ones():
    # What a torch twin shares with its numpy sibling (constants, tables, the Outcome codes) is public there.
    package = Path(tokenmask.masking.__file__).parent
    twins = sorted(package.glob("torch_*.py"))
    siblings = ("keys", "vocab", "units", "select", "corrupt", "mask")
    assert {path.stem for path in twins} >= {f"torch_{name}" for name in siblings}
    for path in twins:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tokenmask.masking"):
                private = [alias.name for alias in node.names if alias.name.startswith("_")]
                assert not private, f"{path.name} imports {private} from {node.module}"


def long_batch(seed: int, batch: int = 16, width: int = 256):
    """Rows of 1-4 piece words between [CLS] and [SEP], right-padded to ``width``: ids, word ids, mask."""
    rng = np.random.default_rng(seed)
    ids = np.full((batch, width), PAD)
    words = np.full((batch, width), -1)
    for row in range(batch):
        length = int(rng.integers(width // 2, width + 1))
        pieces = np.repeat(np.arange(length), rng.integers(1, 5, length))[: length - 2]
        ids[row, 1 : len(pieces) + 1] = rng.integers(5, V, len(pieces))
        words[row, 1 : len(pieces) + 1] = pieces
        ids[row, 0], ids[row, len(pieces) + 1] = CLS, SEP
    return torch.from_numpy(ids), torch.from_numpy(words), torch.from_numpy((ids != PAD).astype(np.int64))


@pytest.mark.parametrize("strategy", [s for s in STRATEGIES if s != "given"])
@pytest.mark.parametrize("rate", [0.15, 0.4])
def test_the_backends_agree_on_long_rows(strategy, rate):
    # Long rows reach span and n-gram lengths and key ties that the small hypothesis rows rarely do.
    ids, words, attention = long_batch(seed=int(rate * 100))
    for epoch in range(3):
        out = both_backends(
            ids, vocab=VOCAB, example_ids=torch.arange(16) * 7919, seed=1, epoch=epoch, unit_config=UnitConfig(strategy=strategy),
            selection=SelectionConfig(mlm_probability=rate), attention_mask=attention, word_ids=words,
        )  # fmt: skip
        assert out.target_index.numel() > 0.5 * rate * int(attention.sum())  # a real share was masked


def test_the_torch_backend_never_goes_through_numpy(monkeypatch):
    ids, words, attention = long_batch(seed=3, batch=4, width=64)
    expected = {s: mask_tokens(ids, vocab=VOCAB, example_ids=torch.arange(4), seed=0, unit_config=UnitConfig(strategy=s),
                               attention_mask=attention, word_ids=words, backend="numpy") for s in ("token", "span")}  # fmt: skip

    def refuse(*_args, **_kwargs):
        raise AssertionError("the torch backend converted a tensor to numpy")

    monkeypatch.setattr(torch.Tensor, "numpy", refuse)
    monkeypatch.setattr(torch.Tensor, "__array__", refuse)
    for strategy, numpy_result in expected.items():
        by_torch = mask_tokens(ids, vocab=VOCAB, example_ids=torch.arange(4), seed=0, unit_config=UnitConfig(strategy=strategy),
                               attention_mask=attention, word_ids=words, backend="torch")  # fmt: skip
        assert torch.equal(by_torch.input_ids, numpy_result.input_ids)
    with pytest.raises(AssertionError, match="converted a tensor to numpy"):  # the trap works
        mask_tokens(ids, vocab=VOCAB, example_ids=torch.arange(4), seed=0, backend="numpy")


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_strided_int32_and_edge_settings_give_the_same_masks(backend):
    ids, words, attention = long_batch(seed=6, batch=6, width=40)
    strided = ids.t().contiguous().t()  # the same values, column-major: a view no .view(-1) takes
    kwargs = dict(vocab=VOCAB, example_ids=torch.arange(6), seed=0, attention_mask=attention, word_ids=words)
    plain = mask_tokens(ids, backend="numpy", **kwargs)
    for form in (strided, ids.to(torch.int32)):
        assert torch.equal(mask_tokens(form, backend=backend, **kwargs).input_ids, plain.input_ids)
    for units in (
        UnitConfig("span", span_geometric_p=1.0),
        UnitConfig("span", span_max_words=1),
        UnitConfig("ngram", ngram_max_n=1),
    ):
        both_backends(ids, unit_config=units, **kwargs)  # degenerate length tables: every unit one word


def test_numpy_arrays_go_in_and_tensors_come_out():
    ids, words, attention = long_batch(seed=4, batch=3, width=32)
    kwargs = dict(vocab=VOCAB, example_ids=np.arange(3), seed=2, attention_mask=attention.numpy(), word_ids=words.numpy())
    from_arrays = mask_tokens(ids.numpy(), unit_config=UnitConfig(strategy="whole_word"), **kwargs)
    from_tensors = mask_tokens(ids, unit_config=UnitConfig(strategy="whole_word"), **kwargs, backend="torch")
    assert isinstance(from_arrays.input_ids, torch.Tensor)
    assert torch.equal(from_arrays.input_ids, from_tensors.input_ids) and torch.equal(from_arrays.labels, from_tensors.labels)
    with pytest.raises(ValueError, match="backend must be one of"):
        mask_tokens(ids, vocab=VOCAB, example_ids=torch.arange(3), seed=0, backend="gpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
@pytest.mark.parametrize("strategy", [s for s in STRATEGIES if s != "given"])
def test_the_backends_agree_on_cuda(strategy):
    ids, words, attention = long_batch(seed=5)
    kwargs = dict(vocab=COUNTED_VOCAB, example_ids=torch.arange(16), seed=9, unit_config=UnitConfig(strategy=strategy),
                  attention_mask=attention, word_ids=words, term_mask=term_mask_of(ids, words))  # fmt: skip
    both_backends(ids, device="cuda", **kwargs)
    assert mask_tokens(
        ids.cuda(), **{k: v.cuda() if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
    ).input_ids.is_cuda
