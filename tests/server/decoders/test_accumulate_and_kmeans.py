import numpy as np

from shoal.client.encoder import encode_arrays
from shoal.common.kinds.tree import derive_config
from shoal.server.decoders.kmeans import weighted_kmeans
from shoal.server.decoders.tree.accumulate import LevelAccumulator, scatter_add_rows


def test_scatter_add_rows_matches_add_at():
    rng = np.random.default_rng(0)
    idx = rng.integers(0, 7, size=200)
    rows = rng.standard_normal((200, 3))
    a = np.zeros((7, 3))
    b = np.zeros((7, 3))
    scatter_add_rows(a, idx, rows)
    np.add.at(b, idx, rows)
    assert np.allclose(a, b)


def _sorted_reduceat(table, index, rows):
    # The definition the fast path keeps bit for bit: every row sorted by index, summed per index.
    order = np.argsort(index, kind="stable")
    idx = index[order]
    starts = np.flatnonzero(np.r_[True, idx[1:] != idx[:-1]])
    table[idx[starts]] += np.add.reduceat(rows[order], starts, axis=0)


def test_scatter_add_rows_gives_the_bits_of_sorted_sums_with_shared_and_distinct_indices():
    rng = np.random.default_rng(3)
    for size, rows_n in ((1000, 300), (50, 300), (10**6, 5000), (10**6, 1)):
        idx = rng.integers(0, size, size=rows_n)
        rows = rng.standard_normal((rows_n, 4)) * 10.0 ** rng.integers(-8, 8, size=(rows_n, 1))
        start = rng.standard_normal((size, 4))
        a, b = start.copy(), start.copy()
        scatter_add_rows(a, idx, rows)
        _sorted_reduceat(b, idx, rows)
        assert a.tobytes() == b.tobytes()


def test_partitions_merge_to_the_single_pass_sums():
    cfg = derive_config(10_000, 5, 3, 4.0, seed=1)
    x = np.random.default_rng(1).uniform(-0.4, 0.4, (3000, 5))
    batch = encode_arrays(x, cfg, np.random.default_rng(2))
    one = LevelAccumulator(cfg)
    one.add(batch)
    parts = [LevelAccumulator(cfg), LevelAccumulator(cfg)]
    for p, sl in zip(parts, (slice(0, 1000), slice(1000, 3000)), strict=True):
        p.add(batch.select(sl))
    parts[0].merge(parts[1])
    assert parts[0].n_devices == one.n_devices
    assert np.array_equal(parts[0].hist, one.hist)
    assert np.allclose(parts[0].vec, one.vec)


def test_weighted_kmeans_separates_clear_clusters():
    rng = np.random.default_rng(0)
    centers = np.array([[0.0, 0.0], [5.0, 5.0], [-5.0, 5.0]])
    x = np.concatenate([c + 0.1 * rng.standard_normal((50, 2)) for c in centers])
    found = weighted_kmeans(x, np.ones(150), 3, rng)
    d = ((found[:, None] - centers[None]) ** 2).sum(-1)
    assert d.min(axis=0).max() < 0.1


def test_weights_pull_the_center():
    x = np.array([[0.0], [1.0]])
    c = weighted_kmeans(x, np.array([3.0, 1.0]), 1, np.random.default_rng(0))
    assert np.isclose(c[0, 0], 0.25)
