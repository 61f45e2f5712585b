"""Streamed micro-batches: the same whatever the number of workers, and a resumed stream continues exactly."""

from __future__ import annotations

from itertools import islice

import pytest
import torch

from tokenmask.collate.chunked import ChunkBatches, RatedStream, StreamPosition, positioned_batches
from tokenmask.collate.collator import MaskingCollator
from tokenmask.collate.rate import BatchRamp, RateSchedule
from tokenmask.text.config import ReadingConfig
from tokenmask.text.streaming import DocumentStream


@pytest.fixture(scope="module")
def corpus(plays_file):
    return plays_file(750, per=5)


def chunk_batches(corpus, tokenizer, *, start=None, rank=0, world=1, rate=None, mlm_probability=0.15):
    """150 paragraphs in chunks of ~3,000 characters (9 chunks an epoch, 4-5 micro-batches of 3 blocks of 64 each)."""
    return ChunkBatches(
        DocumentStream((str(corpus),), ReadingConfig(), rank=rank, world=world), tokenizer,
        MaskingCollator(tokenizer, seed=3, mlm_probability=mlm_probability), block_length=64, batch_size=3, seed=5,
        characters=3000, validation_share=0.1, start=start or StreamPosition(), rate=rate,
    )  # fmt: skip


def taken(batches, count):
    return list(islice(batches, count))


def same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[key], b[key]) for key in ("input_ids", "labels", "attention_mask"))


@pytest.mark.filterwarnings("ignore:This DataLoader will create")
def test_workers_hand_out_the_same_micro_batches_in_the_same_order(corpus, bert_tokenizer):
    alone = taken(positioned_batches(chunk_batches(corpus, bert_tokenizer)), 60)
    for workers in (2, 3):
        pooled = taken(positioned_batches(chunk_batches(corpus, bert_tokenizer), workers=workers), 60)
        assert [p for _, p in pooled] == [p for _, p in alone]
        assert all(same(a, b) for (a, _), (b, _) in zip(alone, pooled))


def test_a_stream_started_at_a_saved_position_continues_exactly(corpus, bert_tokenizer):
    whole = taken(positioned_batches(chunk_batches(corpus, bert_tokenizer)), 70)  # past the end of the first epoch
    assert whole[-1][1].epoch == 1 and whole[0][1].epoch == 0
    for cut in (0, 1, 7, 33, 50):
        start = whole[cut][1]  # the position after micro-batch `cut`
        resumed = taken(positioned_batches(chunk_batches(corpus, bert_tokenizer, start=start)), 70 - cut - 1)
        assert [p for _, p in resumed] == [p for _, p in whole[cut + 1 :]]
        assert all(same(a, b) for (a, _), (b, _) in zip(resumed, whole[cut + 1 :]))


def test_epochs_bring_new_masks_and_orders_of_the_same_blocks(corpus, bert_tokenizer):
    batches = taken(positioned_batches(chunk_batches(corpus, bert_tokenizer)), 120)
    first = [b for b, p in batches if p.epoch == 0 and p.chunk == 0]
    second = [b for b, p in batches if p.epoch == 1 and p.chunk == 0]
    assert first and len(first) == len(second)
    original = lambda b: torch.where(b["labels"] >= 0, b["labels"], b["input_ids"])  # noqa: E731
    rows = lambda bs: sorted(tuple(r.tolist()) for b in bs for r in original(b))  # noqa: E731
    assert rows(first) == rows(second)  # the same blocks...
    assert not all(same(a, b) for a, b in zip(first, second))  # ...in another order, with other masks


def test_ranks_train_on_different_blocks(corpus, bert_tokenizer):
    seen = {}
    for rank in range(2):
        for batch, _ in taken(positioned_batches(chunk_batches(corpus, bert_tokenizer, rank=rank, world=2)), 20):
            for row in batch["input_ids"]:
                seen.setdefault(tuple(row.tolist()), set()).add(rank)
    assert all(len(ranks) == 1 for ranks in seen.values())


# 4 micro-batches a step, the rate from 0.3 to 0.1 over 2 steps: micro-batches 0-3 at 0.3, 4-7 at 0.2, 8 on at 0.1
RATE = RateSchedule(0.3, 0.1, horizon=2, ramp=BatchRamp(4))


@pytest.mark.filterwarnings("ignore:This DataLoader will create")
def test_a_rate_schedule_masks_each_micro_batch_at_its_steps_rate_whatever_the_workers_and_the_start(corpus, bert_tokenizer):
    scheduled = taken(positioned_batches(chunk_batches(corpus, bert_tokenizer, rate=RATE)), 12)
    at = {
        rate: taken(positioned_batches(chunk_batches(corpus, bert_tokenizer, mlm_probability=rate)), 12)
        for rate in (0.3, 0.2, 0.1)
    }
    for number, (batch, position) in enumerate(
        scheduled
    ):  # the same blocks, masked at the step's rate (one chunk spans several steps)
        expected, at_position = at[RATE.rate_of(number)][number]
        assert position == at_position and same(batch, expected), number
    pooled = taken(positioned_batches(chunk_batches(corpus, bert_tokenizer, rate=RATE), workers=2), 12)
    assert all(same(a, b) and p == q for (a, p), (b, q) in zip(scheduled, pooled))
    for cut in (2, 6):  # resumed after micro-batch `cut`: the run took cut + 1 micro-batches before
        start = scheduled[cut][1]
        resumed = taken(
            positioned_batches(chunk_batches(corpus, bert_tokenizer, start=start, rate=RATE), first=cut + 1), 12 - cut - 1
        )
        assert all(same(a, b) and p == q for (a, p), (b, q) in zip(resumed, scheduled[cut + 1 :]))


def test_a_new_horizon_reads_on_from_where_the_stream_stands(corpus, bert_tokenizer, monkeypatch):
    """The rates change at micro-batch 5 (a new horizon): the same stream reads on, once, and each
    micro-batch is masked at its rate under the schedule in force when it is taken."""
    reads = []
    documents = DocumentStream.documents
    monkeypatch.setattr(DocumentStream, "documents", lambda self, *a, **k: reads.append(k) or documents(self, *a, **k))
    rated = RatedStream(chunk_batches(corpus, bert_tokenizer, rate=RATE))
    before = taken(rated.batches(RATE), 5)
    later = RateSchedule(0.3, 0.1, horizon=4, ramp=BatchRamp(4))
    after = taken(rated.batches(later), 7)
    assert len(reads) == 1 and rated.taken == 12
    rates = [(RATE if number < 5 else later).rate_of(number) for number in range(12)]  # 0.3 x4, 0.2, 0.25 x3, 0.2 x4
    at = {rate: taken(positioned_batches(chunk_batches(corpus, bert_tokenizer, mlm_probability=rate)), 12) for rate in set(rates)}
    for number, (batch, position) in enumerate(before + after):
        expected, at_position = at[rates[number]][number]
        assert position == at_position and same(batch, expected), number
