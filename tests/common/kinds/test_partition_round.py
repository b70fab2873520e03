"""The partition round (common/kinds/partition.py): a device adds one (point, 1)
block at its public bucket, within the secure sum's bounds; buckets come from
the round's seed alone; the bucket count follows the documented rule; one test
per invalid parameter."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from shoal.common.bounds import PublicBound
from shoal.common.errors import ConfigError
from shoal.common.kinds.partition import (
    BUCKET_SDS,
    MAX_LENGTH,
    bucket_bits,
    bucket_means,
    codes,
    contributions,
    derive_partition,
    partition_from_dict,
    partition_to_dict,
)


def _cfg(**kw):
    args = dict(n_expected=20_000, dim=16, k=26, epsilon=0.5, delta=1e-6, bound=PublicBound(radius=1.0),
                min_devices=20_000, seed=5)
    args.update(kw)
    return derive_partition(**args)


def test_a_device_adds_its_point_and_a_one_at_its_bucket_within_the_secure_sums_bounds():
    cfg = _cfg()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(500, 16))
    x /= np.linalg.norm(x, axis=1, keepdims=True)  # worst case: on the sphere
    c = contributions(x, cfg).reshape(500, cfg.buckets, 17)
    nonzero_blocks = (np.abs(c).sum(axis=2) > 0).sum(axis=1)
    assert (nonzero_blocks == 1).all()
    lab = codes(x, cfg)
    assert np.allclose(c[np.arange(500), lab, :16], x) and (c[np.arange(500), lab, 16] == 1).all()
    flat = c.reshape(500, -1)
    s = cfg.secure_sum
    assert (np.abs(flat).sum(1) <= s.l1_norm).all() and (np.linalg.norm(flat, axis=1) <= s.l2_norm).all()
    assert ((flat != 0).sum(1) <= s.max_nonzero).all() and np.abs(flat).max() <= s.max_abs


def test_buckets_come_from_the_rounds_seed_alone():
    x = np.random.default_rng(1).uniform(-0.5, 0.5, size=(200, 16))
    assert (codes(x, _cfg(seed=5)) == codes(x, _cfg(seed=5))).all()
    assert (codes(x, _cfg(seed=5)) != codes(x, _cfg(seed=6))).any()


def test_the_bucket_count_keeps_an_average_bucket_many_noise_sds_deep_within_the_length_cap():
    # Enough devices: the most bits with n / 2^bits >= BUCKET_SDS noise sds.
    assert bucket_bits(200_000, 16, 4, 20.0) == math.floor(math.log2(200_000 / (BUCKET_SDS * 20.0)))
    # The length cap: 2^bits (d + 1) <= MAX_LENGTH.
    assert bucket_bits(10**9, 100, 8, 1.0) == math.floor(math.log2(MAX_LENGTH / 101))
    # Too few devices for that: still two buckets per cluster, log2 k + 1 (letter: 2^6 for k = 26).
    assert bucket_bits(100, 16, 26, 20.0) == 6
    assert _cfg().bits == 6


def test_bucket_means_are_the_exact_means_without_noise_and_noisy_buckets_are_left_out():
    cfg = _cfg(bits=2)
    x = np.array([[0.5, 0.1] + [0.0] * 14] * 400 + [[-0.5, 0.2] + [0.0] * 14] * 3)
    total = contributions(x, cfg).sum(0)
    means, counts = bucket_means(total, cfg)
    assert means.shape[0] == 1 and counts.tolist() == [400.0]  # the 3-point bucket is below 3 noise sds
    assert np.allclose(means[0], x[0])


def test_a_partition_config_parses_back_to_itself():
    cfg = _cfg()
    assert partition_from_dict(partition_to_dict(cfg)) == cfg


@pytest.mark.parametrize("field,value,match", [
    ("k", 0, "k >= 1"),
    ("bits", 0, "bits must be in"),
    ("bits", 11, "bits must be in"),
])
def test_a_partition_config_rejects_invalid_parameter(field, value, match):
    with pytest.raises(ConfigError, match=match):
        replace(_cfg(), **{field: value})


def test_a_partition_config_rejects_a_secure_sum_of_another_length():
    cfg = _cfg()
    with pytest.raises(ConfigError, match="length"):
        replace(cfg, secure_sum=_cfg(bits=cfg.bits - 1).secure_sum)


def test_derive_rejects_no_devices():
    with pytest.raises(ConfigError, match="n_expected, dim, k >= 1"):
        _cfg(n_expected=0)


def test_contributions_reject_points_of_another_dimension():
    with pytest.raises(ConfigError, match="features"):
        contributions(np.zeros((3, 5)), _cfg())
