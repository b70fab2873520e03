"""The local refine round's math (``common/kinds/local_refine.py``): the block
vector, unbiased sums and counts from its decoded reports, the count weight,
the published config, and one refusal per invalid parameter."""

import dataclasses
import math

import numpy as np
import pytest

from shoal.client.kinds.local_refine import codebook_messages
from shoal.common.bounds import PublicBound
from shoal.common.errors import ConfigError
from shoal.common.kinds.local_refine import (
    MAX_BLOCK_DIM,
    block_vectors,
    count_noise_sd,
    count_weight,
    decoded_sum,
    derive_local_refine,
    local_refine_from_dict,
    local_refine_to_dict,
    refined_centers,
)
from shoal.common.mechanisms.privunit import PrivUnitParams, sample_decoded

CENTERS = np.array([[0.5, 0.0], [-0.5, 0.0]])


def _config(eps=2.0, centers=CENTERS, **kw):
    return derive_local_refine("parent", centers, PublicBound(radius=1.0), eps, seed=7, **kw)


def test_block_vector_holds_the_scaled_point_and_count_weight_in_its_nearest_centers_block():
    cfg = _config()
    x = np.array([[0.4, 0.3], [-0.2, -0.1]])
    v = block_vectors(x, cfg).reshape(2, 2, 3)
    a, b = math.sqrt(1 - cfg.count_weight), math.sqrt(cfg.count_weight)
    assert np.allclose(v[0, 0], [a * 0.4, a * 0.3, b]) and np.allclose(v[0, 1], 0)
    assert np.allclose(v[1, 1], [-a * 0.2, -a * 0.1, b]) and np.allclose(v[1, 0], 0)
    assert np.all(np.linalg.norm(block_vectors(np.array([[1.0, 0.0], [0.0, -1.0]]), cfg), axis=1) <= 1 + 1e-12)


def test_count_weight_minimises_the_sum_and_count_error():
    for d in (2, 16, 100):
        b2 = count_weight(d)
        grid = np.linspace(0.01, 0.99, 9801)
        loss = d / (1 - grid) + 1 / grid
        assert abs(grid[np.argmin(loss)] - b2) < 2e-4


def test_decoded_reports_give_unbiased_sums_and_counts_on_the_wire():
    cfg = _config(eps=4.0)
    rng = np.random.default_rng(3)
    x = np.concatenate([np.tile([[0.6, 0.2]], (9000, 1)), np.tile([[-0.3, -0.4]], (3000, 1))])
    msgs = codebook_messages(x, cfg, rng)
    nonces = np.array([int(m.nonce, 16) for m in msgs], dtype=np.uint64)
    index = np.array([m.index for m in msgs], dtype=np.int64)
    t = decoded_sum(nonces, index, cfg).reshape(2, 3)
    a, b = math.sqrt(1 - cfg.count_weight), math.sqrt(cfg.count_weight)
    per = math.sqrt(len(x) * cfg.privunit.expected_sq_norm / cfg.privunit.dim)  # sd of one summed coordinate
    want = np.array([[a * 0.6 * 9000, a * 0.2 * 9000, b * 9000], [-a * 0.3 * 3000, -a * 0.4 * 3000, b * 3000]])
    assert np.all(np.abs(t - want) < 4.5 * per), (t, want, per)


def test_simulated_refine_moves_each_center_to_its_cells_mean():
    cfg = _config(eps=8.0)
    rng = np.random.default_rng(4)
    x = np.concatenate([rng.normal([0.6, 0.3], 0.05, (40000, 2)), rng.normal([-0.4, -0.2], 0.05, (40000, 2))])
    total = sample_decoded(block_vectors(x, cfg), cfg.privunit, rng).sum(0)
    centers, sizes, _ = refined_centers(total, len(x), cfg)
    assert np.allclose(centers, [x[:40000].mean(0), x[40000:].mean(0)], atol=0.03)
    assert np.allclose(sizes, 40000, rtol=0.05)


def test_a_block_whose_count_is_within_noise_keeps_its_parent_center():
    cfg = _config(eps=1.0)
    rng = np.random.default_rng(5)
    x = rng.normal([0.6, 0.3], 0.05, (2000, 2))  # nobody near the second center
    total = sample_decoded(block_vectors(x, cfg), cfg.privunit, rng).sum(0)
    centers, _, _ = refined_centers(total, len(x), cfg)
    assert count_noise_sd(len(x), cfg) > 50
    assert np.allclose(centers[1], CENTERS[1])


def test_split_round_has_split_k_candidates_and_keeps_k():
    cfg = _config(split=2)
    assert cfg.k == 4 and cfg.keep == 2 and cfg.privunit.dim == 4 * 3


def test_published_config_round_trips_and_is_validated_again():
    cfg = _config()
    data = local_refine_to_dict(cfg)
    assert data["kind"] == "local_refine"
    assert local_refine_from_dict(data) == cfg
    data["privunit"]["cap_numerator"] += 1 << 20  # a ratio above e^eps
    with pytest.raises(ConfigError, match="likelihood ratio"):
        local_refine_from_dict(data)


def test_rejects_a_config_that_is_not_one():
    with pytest.raises(ConfigError, match="not a local refine config"):
        local_refine_from_dict({"kind": "local_refine", "bound": {"radius": 1.0}})


def _replace(**kw):
    return dataclasses.replace(_config(), **kw)


def test_rejects_nonpositive_epsilon():
    with pytest.raises(ConfigError, match="epsilon"):
        _config(eps=0.0)


def test_rejects_k_below_one():
    with pytest.raises(ConfigError, match="k >= 1"):
        _replace(k=0)


def test_rejects_centers_of_the_wrong_shape():
    with pytest.raises(ConfigError, match="shape"):
        _replace(centers=((0.1, 0.2, 0.3), (0.0, 0.0, 0.0)))


def test_rejects_centers_outside_the_unit_ball():
    with pytest.raises(ConfigError, match="unit ball"):
        _replace(centers=((2.0, 0.0), (0.0, 0.0)))


def test_rejects_a_privunit_of_another_dimension():
    with pytest.raises(ConfigError, match="PrivUnit has dim"):
        _replace(privunit=PrivUnitParams.calibrate(5, 1.0))


def test_rejects_a_count_weight_outside_the_open_interval():
    for w in (0.0, 1.0, 1):
        with pytest.raises(ConfigError, match="count_weight"):
            _replace(count_weight=w)


def test_rejects_a_negative_or_huge_seed():
    for s in (-1, 1 << 63, True):
        with pytest.raises(ConfigError, match="seed"):
            _replace(seed=s)


def test_rejects_keep_above_k():
    with pytest.raises(ConfigError, match="keep"):
        _replace(keep=3)


def test_rejects_reports_of_too_many_dimensions():
    d = 400
    centers = np.zeros((MAX_BLOCK_DIM // (d + 1) + 1, d))
    with pytest.raises(ConfigError, match="dimensions"):
        derive_local_refine("parent", centers, PublicBound(radius=1.0), 1.0, seed=1)


def test_rejects_points_of_another_dimension():
    with pytest.raises(ConfigError, match="points have shape"):
        block_vectors(np.zeros((3, 5)), _config())
