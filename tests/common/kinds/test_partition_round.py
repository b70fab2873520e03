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
    mean_of,
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


def test_hyperplanes_through_a_center_bucket_each_point_as_the_origins_bucket_its_shift():
    x = np.random.default_rng(2).uniform(-0.5, 0.5, size=(300, 16))
    at = np.full(16, 0.05)
    centred = _cfg(center=at)
    assert centred.center == (0.05,) * 16 and centred.center_array.tolist() == [0.05] * 16
    assert (codes(x, centred) == codes(x - at, _cfg())).all()
    assert (codes(x, centred) != codes(x, _cfg())).any()  # the center moves points to other buckets
    assert _cfg().center == () and (_cfg().center_array == 0).all()


def test_a_centred_partition_config_parses_back_to_itself_and_publishes_its_center():
    cfg = _cfg(center=np.linspace(-0.1, 0.1, 16))
    data = partition_to_dict(cfg)
    assert data["center"] == list(cfg.center)
    assert partition_from_dict(data) == cfg


def test_a_config_at_the_balls_centre_publishes_no_center_as_before_the_field_existed():
    assert "center" not in partition_to_dict(_cfg())


def test_a_published_empty_center_is_refused():
    data = partition_to_dict(_cfg())
    data["center"] = []
    with pytest.raises(ConfigError, match="one coordinate per feature"):
        partition_from_dict(data)


def test_a_published_center_that_is_not_numbers_is_refused():
    data = partition_to_dict(_cfg(center=np.zeros(16) + 0.1))
    data["center"] = ["a"] * 16
    with pytest.raises(ConfigError, match="not a partition config"):
        partition_from_dict(data)


def test_a_one_bit_rounds_mean_is_every_devices_mean_and_none_when_the_count_is_noise():
    cfg = _cfg(bits=1)
    x = np.random.default_rng(3).uniform(-0.1, 0.1, size=(500, 16)) + 0.1  # inside the ball: no clipping
    mean = mean_of(contributions(x, cfg).sum(0), cfg)
    assert mean is not None and np.allclose(mean, x.mean(0))
    assert mean_of(contributions(x[:3], cfg).sum(0), cfg) is None  # 3 devices: below 3 noise sds of the count
    far = mean_of(contributions(np.full((500, 16), 0.25), cfg).sum(0) * np.r_[[1.0] * 16 + [0.5], [1.0] * 17], cfg)
    assert far is not None and np.linalg.norm(far) <= 1.0  # a noisy mean outside the ball is clipped into it


@pytest.mark.parametrize("field,value,match", [
    ("k", 0, "k >= 1"),
    ("bits", 0, "bits must be in"),
    ("bits", 11, "bits must be in"),
    ("center", (0.1,) * 15, "15 coordinates, the round has 16"),
    ("center", (float("nan"),) * 16, "finite point of the unit ball"),
    ("center", (0.3,) * 16, "finite point of the unit ball"),
    ("center", (1,) * 16, "tuple of floats"),
    ("center", [0.1] * 16, "tuple of floats"),
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
