"""OLH / GRR: unbiasedness and an empirical eps-LDP audit."""

import numpy as np
import pytest
from dp_audit import max_log_ratio_lower_bound

from shoal.common.errors import ConfigError
from shoal.common.mechanisms.local_hashing import (
    LocalHashingParams,
    estimate_counts,
    optimal_buckets,
    randomise_buckets,
)
from shoal.common.randomness.hashing import bucket_hash, mix64


def test_optimal_buckets_follows_wang_et_al():
    assert optimal_buckets(1.0) == 4
    assert optimal_buckets(4.0) == 56
    assert optimal_buckets(20.0) == 2048


@pytest.mark.parametrize("eps", [0.5, 2.0, 6.0])
def test_hist_report_is_eps_ldp(eps):
    g = optimal_buckets(eps)
    params = LocalHashingParams(eps, g, 1)
    rng = np.random.default_rng(3)
    n = 300_000
    a = randomise_buckets(np.zeros(n, dtype=np.int64), params, rng)
    b = randomise_buckets(np.ones(n, dtype=np.int64), params, rng)
    ca = np.bincount(a, minlength=g)[:2]
    cb = np.bincount(b, minlength=g)[:2]
    # Bin "everything else" too, so the partition is complete.
    ca = np.r_[ca, n - ca.sum()]
    cb = np.r_[cb, n - cb.sum()]
    assert max_log_ratio_lower_bound(ca, cb) <= eps


def test_audit_catches_grr_claiming_too_little_epsilon():
    true = LocalHashingParams(3.0, 4, 1)
    rng = np.random.default_rng(4)
    n = 200_000
    a = np.bincount(randomise_buckets(np.zeros(n, dtype=np.int64), true, rng), minlength=4)
    b = np.bincount(randomise_buckets(np.ones(n, dtype=np.int64), true, rng), minlength=4)
    assert max_log_ratio_lower_bound(a, b) > 2.5


def test_olh_count_estimator_is_unbiased():
    """E[estimate] = truth over devices' randomness and the public hash pool."""
    params = LocalHashingParams(1.0, 4, 256)
    rng = np.random.default_rng(5)
    truth = np.array([50_000, 30_000, 15_000, 5_000])
    items = np.repeat(np.arange(4), truth)
    keys = mix64(np.arange(4, dtype=np.uint64))
    reps = 40
    est = np.zeros(4)
    for _ in range(reps):
        pool = rng.integers(0, 2**63, size=params.pool).astype(np.uint64)
        s = rng.integers(0, params.pool, size=items.size)
        y = randomise_buckets(bucket_hash(pool[s], keys[items], params.buckets), params, rng)
        table = np.bincount(s * params.buckets + y, minlength=params.pool * params.buckets)
        table = table.reshape(params.pool, params.buckets)
        b = bucket_hash(pool[None, :], keys[:, None], params.buckets)
        support = table[np.arange(params.pool)[None, :], b].sum(1).astype(float)
        est += estimate_counts(support, items.size, params)
    est /= reps
    sd = np.sqrt(items.size * params.per_report_variance() * 2 / reps)
    assert np.all(np.abs(est - truth) < 5 * sd)


def test_rejects_nonpositive_epsilon():
    with pytest.raises(ConfigError, match="epsilon"):
        LocalHashingParams(0.0, 4, 8)


def test_rejects_one_bucket():
    with pytest.raises(ConfigError, match="buckets"):
        LocalHashingParams(1.0, 1, 8)


def test_rejects_empty_pool():
    with pytest.raises(ConfigError, match="pool"):
        LocalHashingParams(1.0, 4, 0)
