"""Refine rounds: config round trip and validation, contributions, the Lloyd step."""

import math

import numpy as np
import pytest

from shoal.common.bounds import PublicBound
from shoal.common.errors import ConfigError
from shoal.common.kinds.refine import (
    contributions,
    derive_refine,
    refine_from_dict,
    refine_to_dict,
    refined_centers,
)
from shoal.common.mechanisms.secure_sum import add_shares, decode_total, encode_devices


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


def test_a_high_dimensional_refine_round_sums_with_discrete_gaussian_noise_end_to_end():
    # d = 20: the bucket's L2 norm sqrt(2) against its L1 norm sqrt(20) + 1 makes the Gaussian law cheaper.
    rng = np.random.default_rng(5)
    d = 20
    centers = np.zeros((2, d))
    centers[0, 0], centers[1, 0] = 0.5, -0.5
    cfg = derive_refine("parent", centers, PublicBound(radius=1.0), 2.0, 1e-7, 3000)
    assert cfg.secure_sum.noise == "gaussian" and cfg.secure_sum.aligned
    assert refine_from_dict(refine_to_dict(cfg)) == cfg
    assert cfg.event.noise == "gaussian"
    truth = np.zeros((2, d))
    truth[0, :2], truth[1, :2] = [0.6, 0.2], [-0.3, -0.4]
    x = np.concatenate([rng.normal(truth[0], 0.02, (1500, d)), rng.normal(truth[1], 0.02, (1500, d))])
    shares = encode_devices(contributions(x, cfg), cfg.secure_sum, rng)
    sums, devices = decode_total(add_shares(shares, cfg.secure_sum), shares.shape[0] * shares.shape[1], cfg.secure_sum)
    got, sizes = refined_centers(sums, cfg)
    assert devices == 3000
    tol = 6 * cfg.secure_sum.noise_std / 1500 + 0.005
    assert np.abs(got - np.stack([x[:1500].mean(0), x[1500:].mean(0)])).max() < tol
    assert np.allclose(sizes, 1500, atol=6 * cfg.secure_sum.noise_std)


def test_refine_config_refuses_gaussian_bounds_that_are_not_aligned():
    from dataclasses import replace

    from shoal.common.mechanisms.secure_sum import SecureSumParams

    cfg = derive_refine("parent", np.eye(20)[:2] * 0.5, PublicBound(radius=1.0), 2.0, 1e-7, 3000)
    s = cfg.secure_sum
    unaligned = SecureSumParams.derive(s.length, l1_norm=s.l1_norm, max_abs=s.max_abs, max_nonzero=s.max_nonzero,
                                       epsilon=s.epsilon, delta=s.delta, min_devices=s.min_devices,
                                       max_devices=s.max_devices, noise="gaussian", l2_norm=s.l2_norm)
    with pytest.raises(ConfigError, match="aligned"):
        replace(cfg, secure_sum=unaligned)


def test_refine_share_gives_the_refine_round_more_where_the_tree_locates_clusters_cheaply():
    from shoal.common.kinds.refine import (
        PARTITION_REFINE_SHARE,
        REFINE_SHARES,
        first_round,
        refine_share,
    )

    # n = 1e6, d = 100, k = 8: the tree's predicted center error is ~0.003 at every share.
    assert refine_share(1_000_000, 100, 8, 1.0, 1e-6) == max(REFINE_SHARES)
    # n = 2e4, d = 16, k = 26 (letter's shape): no share's tree locates the clusters.
    assert first_round(20_000, 16, 26, 1e-6) == "partition"
    assert first_round(1_000_000, 100, 8, 1e-6) == "tree" == first_round(100_000, 2, 10, 1e-6)
    assert refine_share(20_000, 16, 26, 1.0, 1e-6) == PARTITION_REFINE_SHARE  # letter: a partition round first
    # d = 2: nettree's lattice positions give no prediction, so the smallest share.
    assert refine_share(100_000, 2, 10, 1.0, 1e-6) == min(REFINE_SHARES)


def test_refine_share_refuses_a_non_positive_epsilon():
    from shoal.common.kinds.refine import refine_share

    with pytest.raises(ConfigError, match="epsilon"):
        refine_share(1000, 5, 2, 0.0, 1e-6)


def test_split_candidates_are_public_and_antipodal_for_two():
    from shoal.common.kinds.refine import SPLIT_STEP, split_candidates

    c = np.array([[0.5, 0.0, 0.1], [-0.2, 0.3, 0.0]])
    two = split_candidates(c, 2, seed=9)
    assert two.shape == (4, 3) and np.array_equal(two, split_candidates(c, 2, seed=9))
    assert not np.array_equal(two, split_candidates(c, 2, seed=10))
    assert np.allclose(two[:2] + two[2:], 2 * c)  # c + eta u and c - eta u
    assert np.allclose(np.linalg.norm(two[:2] - c, axis=1), SPLIT_STEP)
    assert split_candidates(c, 3, seed=9).shape == (6, 3)
    assert np.array_equal(split_candidates(c, 1, seed=9), c)


def test_a_split_refine_round_has_split_k_candidates_and_keeps_k():
    c = np.array([[0.5, 0.0], [-0.5, 0.0]])
    cfg = derive_refine("parent", c, PublicBound(radius=1.0), 1.0, 1e-7, 100, split=2, seed=4)
    assert cfg.k == 4 and cfg.keep == 2 and cfg.secure_sum.length == 4 * 3
    assert refine_from_dict(refine_to_dict(cfg)) == cfg
    assert _cfg().keep == 0


@pytest.mark.parametrize("split", [0, 5, 1.5, True])
def test_a_refine_split_outside_one_to_four_is_refused(split):
    with pytest.raises(ConfigError, match="split must be an integer"):
        derive_refine("parent", np.array([[0.5, 0.0]]), PublicBound(radius=1.0), 1.0, 1e-7, 100, split=split)


@pytest.mark.parametrize("keep", [-1, 3, 1.0])
def test_a_refine_keep_outside_zero_to_k_is_refused(keep):
    data = refine_to_dict(_cfg()) | {"keep": keep}
    with pytest.raises(ConfigError, match="keep must be in"):
        refine_from_dict(data)


def test_the_first_round_is_chosen_at_one_reference_eps_whatever_the_rounds():
    """Issue 41, Build 3: the protocol must not switch with eps. The overlapping
    generator's shape (n = 23,000, d = 6, k = 5) took a partition round at eps
    0.5 and the tree above (0.090 -> 0.101 at eps 1, shuffle + refine); now it
    takes the partition round at every eps, and so does the refine share."""
    from shoal.common.kinds.refine import PARTITION_REFINE_SHARE, first_round, refine_share

    assert first_round(23_000, 6, 5, 1e-6) == "partition"
    assert {refine_share(23_000, 6, 5, eps, 1e-6) for eps in (0.5, 1.0, 2.0, 4.0, 8.0)} == {PARTITION_REFINE_SHARE}

