"""Counter-based randomness: pinned values, purity, independence from batch layout."""

import numpy as np

from tokenmask.masking.keys import RowKeys, Stream, content_ids, mix32, mix64, threshold32, unit_float


def test_mix64_matches_splitmix64_reference_values():
    # SplitMix64 finaliser of 0 and 1 (values of the published algorithm).
    out = mix64(np.array([0, 1], dtype=np.uint64))
    assert out.tolist() == [0, 0x5692161D100B05E5]


def test_mix32_matches_lowbias32_reference_value():
    assert mix32(np.array([1], dtype=np.uint32)).tolist() == [0x688990C0]


def test_row_keys_are_a_pure_function_of_seed_epoch_and_id():
    ids = np.array([7, 3, 7, -1], dtype=np.int64)
    a = RowKeys.derive(ids, seed=5, epoch=2).keys
    assert np.array_equal(a, RowKeys.derive(ids, seed=5, epoch=2).keys)
    assert a[0] == a[2]  # same id, same key
    assert len(set(a.tolist())) == 3
    assert not np.array_equal(a, RowKeys.derive(ids, seed=6, epoch=2).keys)
    assert not np.array_equal(a, RowKeys.derive(ids, seed=5, epoch=3).keys)


def test_bits_depend_on_row_key_not_on_batch_neighbours():
    keys = RowKeys.derive(np.array([1, 2, 3]), seed=0)
    alone = RowKeys.derive(np.array([2]), seed=0)
    assert np.array_equal(keys.bits32(Stream.SELECT, 50)[1], alone.bits32(Stream.SELECT, 50)[0])
    # A wider batch only appends positions: the first ones are unchanged.
    assert np.array_equal(keys.bits32(Stream.SELECT, 80)[:, :50], keys.bits32(Stream.SELECT, 50))


def test_bits_at_equals_dense_bits():
    keys = RowKeys.derive(np.arange(4), seed=9)
    dense = keys.bits(Stream.CHOICE, np.arange(30))
    rows, cols = np.array([0, 3, 2, 2]), np.array([0, 29, 5, 6])
    assert np.array_equal(keys.bits_at(Stream.CHOICE, rows, cols), dense[rows, cols])


def test_streams_are_distinct():
    keys = RowKeys.derive(np.arange(2), seed=0)
    assert not np.array_equal(keys.bits(Stream.CHOICE, np.arange(8)), keys.bits(Stream.REPLACE, np.arange(8)))


def test_uniforms_are_uniform():
    # 10^5 draws; the mean of U(0,1) has sd 1/sqrt(12 n) = 0.00091; band = 5 sd.
    keys = RowKeys.derive(np.arange(100), seed=1)
    u = unit_float(keys.bits(Stream.REPLACE, np.arange(1000)))
    assert abs(u.mean() - 0.5) < 5 * 0.00091
    x = keys.bits32(Stream.SELECT, 1000).astype(np.float64) / 2**32
    assert abs(x.mean() - 0.5) < 5 * 0.00091
    # Each decile holds 10% of the draws: binomial sd sqrt(.1*.9/1e5) = 0.00095; band = 5 sd.
    for values in (u, x):
        counts = np.histogram(values, bins=10, range=(0, 1))[0] / values.size
        assert np.all(np.abs(counts - 0.1) < 5 * 0.00095)


def test_adjacent_positions_and_rows_are_uncorrelated():
    # Pearson correlation of 10^5 pairs has sd ~ 1/sqrt(n) = 0.0032; band = 5 sd.
    keys = RowKeys.derive(np.arange(200), seed=2)
    x = keys.bits32(Stream.SELECT, 501).astype(np.float64)
    assert abs(np.corrcoef(x[:, :-1].ravel(), x[:, 1:].ravel())[0, 1]) < 0.016
    assert abs(np.corrcoef(x[:-1].ravel(), x[1:].ravel())[0, 1]) < 0.016


def test_threshold32():
    assert threshold32(0.0) == 0
    assert threshold32(1.0) == 2**32
    assert threshold32(0.5) == 2**31


def test_content_ids_ignore_padding_and_see_every_token():
    a = np.array([[5, 6, 7, 0, 0], [5, 6, 7, 9, 9]], dtype=np.int64)
    ids = content_ids(a, np.array([3, 3]))
    assert ids[0] == ids[1]  # only padding differs
    assert content_ids(a, np.array([3, 4]))[1] != ids[1]  # one more real token
    b = a.copy()
    b[0, 1] = 8
    assert content_ids(b, np.array([3, 3]))[0] != ids[0]
    swapped = np.array([[6, 5, 7, 0, 0]])
    assert content_ids(swapped, np.array([3]))[0] != ids[0]  # order matters
