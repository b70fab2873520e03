import numpy as np
import pytest
from dp_audit import max_log_ratio_lower_bound

from shoal.common.errors import ConfigError
from shoal.common.mechanisms.hadamard_response import (
    HadamardResponseParams,
    estimate_all_counts,
    randomise_signs,
)


def test_hadamard_response_is_unbiased():
    params = HadamardResponseParams(1.0, 4)
    rng = np.random.default_rng(0)
    truth = np.array([20_000, 10_000, 0, 5_000] + [0] * 12)
    cols = np.repeat(np.arange(16), truth)
    reps, acc = 30, np.zeros(16)
    for _ in range(reps):
        rows = rng.integers(0, 16, size=cols.size)
        acc += estimate_all_counts(rows, randomise_signs(rows, cols, params, rng), params)
    sd = np.sqrt(cols.size * 16 * ((np.e + 1) / (np.e - 1)) ** 2 / 16 / reps)
    assert np.all(np.abs(acc / reps - truth) < 5 * sd)


def test_hadamard_response_is_eps_ldp():
    params = HadamardResponseParams(2.0, 3)
    rng = np.random.default_rng(1)
    n = 200_000
    rows = np.zeros(n, dtype=np.int64) + 5
    a = randomise_signs(rows, np.zeros(n, dtype=np.int64) + 1, params, rng)
    b = randomise_signs(rows, np.zeros(n, dtype=np.int64) + 2, params, rng)
    ca = np.array([(a > 0).sum(), (a < 0).sum()])
    cb = np.array([(b > 0).sum(), (b < 0).sum()])
    assert max_log_ratio_lower_bound(ca, cb) <= 2.0
    assert max_log_ratio_lower_bound(ca, cb) > 1.5  # the audit sees the real ratio


def test_rejects_nonpositive_epsilon():
    with pytest.raises(ConfigError, match="epsilon"):
        HadamardResponseParams(0.0, 4)


def test_rejects_too_many_columns():
    with pytest.raises(ConfigError, match="log2_columns"):
        HadamardResponseParams(1.0, 30)
