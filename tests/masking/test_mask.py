"""Properties of the whole masking pass, over every strategy, with hypothesis."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
    eligible = eligible_positions(ids.numpy(), VOCAB, attention_mask=attention.numpy().astype(bool))
    keys = RowKeys.derive(np.array(example_ids), seed=11, epoch=1)  # run()'s seed and epoch
    units = build_units(UnitConfig(strategy=strategy), eligible, keys, word_ids=words.numpy(), given_spans=spans.numpy())
    assert np.array_equal(out.eligible, eligible)
    assert np.array_equal(out.units, units) and out.units.shape == tuple(ids.shape)
    # targets are whole units: a unit is either all targets or none
    targets = (out.outcome != Outcome.NONE).numpy()
    assert not (targets & (out.units < 0)).any()
    flat = (np.arange(len(rows))[:, None] * width + out.units)[out.units >= 0]
    hit = np.bincount(flat, weights=targets[out.units >= 0], minlength=len(rows) * width)
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
    terms = term_mask_of(ids, words).numpy() & out.eligible
    assert not (targets & ~out.eligible).any(), "a special token or padding was selected"
    for row in range(len(rows)):
        # a term is a word; a protected id inside a word cuts it into two units, as for every word
        pieces = set(zip(words.numpy()[row][terms[row]], out.units[row][terms[row]]))
        for word, unit in pieces:
            chosen = targets[row][(words.numpy()[row] == word) & (out.units[row] == unit)]
            assert chosen.all() or not chosen.any(), f"term word {word} split in row {row}"
    first = priority_units(out.units, terms)  # the units holding a term, whole
    budget = np.floor(0.3 * out.eligible.sum(axis=1) + 0.5)
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
    assert np.array_equal(by_token.units, token_units(by_token.eligible))
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
    with pytest.raises(ValueError, match="vocabulary"):
        mask_tokens(torch.tensor([[1, V]]), vocab=VOCAB, example_ids=torch.tensor([0]), seed=0)
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
        (lambda: VocabTables.from_ids(2, mask_token_id=1, protected_ids=[0]), "no replaceable"),
    ],
)
def test_bad_configuration_names_the_problem(build, message):
    with pytest.raises(ValueError, match=message):
        build()
