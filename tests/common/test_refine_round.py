"""Refine rounds: config round trip and validation, contributions, the Lloyd step."""

import math

import numpy as np
import pytest

from shoal.common.bounds import PublicBound
from shoal.common.errors import ConfigError
from shoal.common.refine_round import (
    contributions,
    derive_refine,
    refine_from_dict,
    refine_to_dict,
    refined_centers,
)
from shoal.common.secure_sum import add_shares, decode_total, encode_devices


def _cfg(**kw):
    c = np.array([[0.5, 0.0], [-0.5, 0.0]])
    return derive_refine("parent", c, PublicBound(radius=1.0), kw.get("eps", 1.0), 1e-7, kw.get("n", 100))


def test_refine_config_survives_the_wire():
    cfg = _cfg()
    assert refine_from_dict(refine_to_dict(cfg)) == cfg


def test_contributions_put_point_and_count_in_the_nearest_bucket():
    cfg = _cfg()
    v = contributions(np.array([[0.4, 0.1], [-0.9, 0.0]]), cfg).reshape(2, 2, 3)
    assert np.allclose(v[0], [[0.4, 0.1, 1.0], [0, 0, 0]])
    assert np.allclose(v[1], [[0, 0, 0], [-0.9, 0.0, 1.0]])


def test_refined_centers_are_the_cell_means_up_to_noise():
    rng = np.random.default_rng(0)
    cfg = _cfg(n=2000, eps=2.0)
    x = np.concatenate([rng.normal([0.6, 0.2], 0.05, (1000, 2)), rng.normal([-0.3, -0.4], 0.05, (1000, 2))])
    shares = encode_devices(contributions(x, cfg), cfg.secure_sum, rng)
    sums, devices = decode_total(add_shares(shares, cfg.secure_sum), shares.shape[0] * shares.shape[1], cfg.secure_sum)
    centers, sizes = refined_centers(sums, cfg)
    assert devices == 2000
    assert np.allclose(centers, [x[:1000].mean(0), x[1000:].mean(0)], atol=0.02)
    assert np.allclose(sizes, [1000, 1000], atol=6 * cfg.secure_sum.noise_std)


def test_an_empty_bucket_keeps_the_parent_center():
    cfg = _cfg()
    total = np.zeros(6)
    total[:3] = [50.0, 10.0, 100.0]
    centers, _ = refined_centers(total, cfg)
    assert np.allclose(centers[0], [0.5, 0.1]) and np.allclose(centers[1], [-0.5, 0.0])


def test_rejects_centers_outside_the_ball():
    d = refine_to_dict(_cfg())
    d["centers"] = [[2.0, 0.0], [0.0, 0.0]]
    with pytest.raises(ConfigError, match="unit ball"):
        refine_from_dict(d)


def test_rejects_a_sum_too_short_for_k_buckets():
    d = refine_to_dict(_cfg())
    d["k"] = 3
    d["centers"] = [[0, 0], [0, 0], [0, 0]]
    with pytest.raises(ConfigError, match="length"):
        refine_from_dict(d)


def test_rejects_bounds_that_do_not_cover_a_point_and_a_count():
    d = refine_to_dict(_cfg())
    d["secure_sum"] = dict(d["secure_sum"], l1_norm=1.0)
    with pytest.raises(ConfigError, match="do not cover"):
        refine_from_dict(d)
    assert math.isclose(_cfg().secure_sum.l1_norm, math.sqrt(2) * (1 + 1e-9) + 1)


def test_rejects_something_that_is_not_a_refine_config():
    with pytest.raises(ConfigError, match="not a refine config"):
        refine_from_dict({"kind": "refine"})
