"""Micro-batches sharded by rank and DataLoader worker: every example once per epoch, none twice, whatever the split."""

from collections import Counter
from itertools import islice

import pytest
import torch

from tokenmask import MaskingCollator
from tokenmask.blocks.encode import encode_texts
from tokenmask.collate.rate import BatchRamp, RateSchedule
from tokenmask.collate.stream import MicroBatches, Shard, epoch_order, micro_batches


class IdCollator:
    """Collates examples into their ids (and the epoch and rate it was given), to count them."""

    def collate(self, examples, *, epoch, mlm_probability=None):
        batch = {"id": torch.tensor([e["id"] for e in examples]), "epoch": torch.tensor(epoch)}
        return batch if mlm_probability is None else {**batch, "rate": torch.tensor(mlm_probability, dtype=torch.float64)}


EXAMPLES = [{"id": i} for i in range(103)]


def stream(shard, *, workers=0, skip=0, batch_size=4):
    batches = MicroBatches(EXAMPLES, IdCollator(), batch_size=batch_size, seed=7, skip=skip, shard=shard)
    return batches, micro_batches(batches, workers=workers)


def take(iterator, count):
    return [next(iterator) for _ in range(count)]


def test_the_worked_example_of_the_docstring():
    batches = MicroBatches([{"id": i} for i in range(8)], IdCollator(), batch_size=2, seed=0, shard=Shard(1, 2))
    order = epoch_order(8, seed=0, epoch=0).tolist()
    assert list(islice(batches.indices(), 3)) == [
        (0, 0, order[2:4]),
        (1, 0, order[6:8]),
        (2, 1, epoch_order(8, seed=0, epoch=1)[2:4].tolist()),
    ]


@pytest.mark.parametrize("world", [1, 2, 3])
@pytest.mark.parametrize("workers", [0, 1, 3])
@pytest.mark.filterwarnings("ignore:This DataLoader will create")
def test_ranks_and_workers_together_see_each_example_once_per_epoch(world, workers):
    per_epoch = len(EXAMPLES) // (4 * world)  # micro-batches per rank per epoch
    seen = Counter()
    ranks = []
    for rank in range(world):
        _, iterator = stream(Shard(rank, world), workers=workers)
        batches = take(iterator, 2 * per_epoch)  # two epochs
        assert [int(b["epoch"]) for b in batches] == [0] * per_epoch + [1] * per_epoch
        ranks.append(batches)
        for batch in batches[:per_epoch]:
            seen.update(batch["id"].tolist())
    assert max(seen.values()) == 1  # no duplicates
    # no gaps: exactly the examples of the epoch's full global batches; only the tail left over by the cut is unused
    order = epoch_order(len(EXAMPLES), seed=7, epoch=0).tolist()
    assert sorted(seen) == sorted(order[: per_epoch * 4 * world])
    # global batch i is rank 0's i-th micro-batch, then rank 1's, …: the order one process would see
    single_batch = MicroBatches(EXAMPLES, IdCollator(), batch_size=4 * world, seed=7)
    for index, (_, _, chosen) in zip(range(per_epoch), single_batch.indices()):
        assert [i for batches in ranks for i in batches[index]["id"].tolist()] == chosen


@pytest.mark.filterwarnings("ignore:This DataLoader will create")
def test_workers_do_not_change_the_sequence_and_skip_resumes_it():
    _, alone = stream(Shard(1, 2))
    expected = take(alone, 30)
    _, with_workers = stream(Shard(1, 2), workers=3)
    assert [b["id"].tolist() for b in take(with_workers, 30)] == [b["id"].tolist() for b in expected]
    _, resumed = stream(Shard(1, 2), workers=2, skip=17)  # skip crosses an epoch boundary (12 per epoch)
    assert [b["id"].tolist() for b in take(resumed, 13)] == [b["id"].tolist() for b in expected[17:]]


def test_too_few_examples_for_one_global_batch():
    with pytest.raises(ValueError, match="do not fill one batch of 40 on each of 3 processes"):
        MicroBatches(EXAMPLES, IdCollator(), batch_size=40, seed=0, shard=Shard(0, 3))
    with pytest.raises(ValueError, match="rank must be in"):
        Shard(2, 2)


def test_the_stream_gives_the_collator_the_epoch_and_leaves_it_unchanged(bert_tokenizer, lines):
    # 12 examples, batches of 4: 3 per epoch; dupe factor 2 masks epochs 0, 1, 0, 1, ...
    examples = encode_texts(lines[:12], bert_tokenizer)
    collator = MaskingCollator(bert_tokenizer, strategy="whole_word", seed=5)
    stream = MicroBatches(examples, collator, batch_size=4, seed=3, dupe_factor=2)
    batches = list(islice(iter(stream), 12))  # four epochs
    assert collator.epoch == 0  # never set by the stream
    for batch, (_, epoch, chosen) in zip(batches, stream.indices()):
        expected = collator.collate([examples[i] for i in chosen], epoch=epoch % 2)
        assert torch.equal(batch["labels"], expected["labels"]) and torch.equal(batch["input_ids"], expected["input_ids"])
    _, epoch, chosen = next(islice(stream.indices(), 3, None))  # the first batch of epoch 1: new masks
    assert epoch == 1 and not torch.equal(
        batches[3]["labels"], collator.collate([examples[i] for i in chosen], epoch=0)["labels"]
    )


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.filterwarnings("ignore:This DataLoader will create")
def test_each_micro_batch_gets_the_rate_of_its_step_in_the_run(workers):
    # 0.3 -> 0.1 over 4 steps of 2 micro-batches; skip 3: micro-batches 3, 4, 5, ... are steps 1, 2, 2, 3, 3, 4, 4
    rate = RateSchedule(0.3, 0.1, horizon=4, ramp=BatchRamp(2))
    batches = MicroBatches(EXAMPLES, IdCollator(), batch_size=4, seed=7, skip=3, rate=rate)
    rates = [float(b["rate"]) for b in take(micro_batches(batches, workers=workers), 7)]
    assert rates == [rate.at(step) for step in (1, 2, 2, 3, 3, 4, 4)]
    assert rates == pytest.approx([0.25, 0.2, 0.2, 0.15, 0.15, 0.1, 0.1])
    assert [float(b["rate"]) for b in take(stream(Shard())[1], 1) if "rate" in b] == []  # no schedule: no rate given


def test_the_rate_schedule_of_the_docstring():
    assert RateSchedule(0.3, 0.1, horizon=8).at(2) == pytest.approx(0.25)
    assert RateSchedule(0.3, 0.1, horizon=8, ramp=BatchRamp(2)).rate_of(4) == RateSchedule(0.3, 0.1, horizon=8).at(2)
    assert RateSchedule(0.3, 0.1).at(50) == 0.3  # the horizon not fitted yet: the start rate
    assert RateSchedule(0.3, 0.1, horizon=8).at(20) == pytest.approx(0.1)  # past the horizon: the end rate
    with pytest.raises(ValueError, match="grad_accum and micro_tokens must be >= 1"):
        BatchRamp(0)


def test_the_batch_ramp_of_the_docstring():
    # 3 micro-batches of 100 tokens at most, over 400 tokens: one more every 200 tokens (2 micro-batches)
    ramp = BatchRamp(3, tokens=400, micro_tokens=100)
    assert [ramp.size(step) for step in range(6)] == [1, 1, 2, 3, 3, 3]
    assert [ramp.before(step) for step in range(6)] == [0, 1, 2, 4, 7, 10]
    assert [ramp.step_of(m) for m in range(10)] == [0, 1, 2, 2, 3, 3, 3, 4, 4, 4]
    assert [ramp.steps_to(m) for m in (0, 1, 3, 4, 5, 10)] == [0, 1, 3, 3, 4, 5]
    plain = BatchRamp(4)  # no warm-up: grad_accum every step
    assert plain.size(0) == 4 and plain.before(5) == 20 and plain.step_of(9) == 2 and plain.steps_to(9) == 3
    # a warm-up shorter than one micro-batch per stage still ends at grad_accum
    assert [BatchRamp(4, tokens=10, micro_tokens=100).size(step) for step in range(3)] == [1, 4, 4]
