"""CL-OMPR with Gaussian atoms (server/decoders/sketch/clompr.py): recovers k-means centers
from a sketch alone, keeps the best restart by residual, refuses bad input."""

import numpy as np
import pytest

from shoal.common.errors import ConfigError, DecodeError
from shoal.common.mechanisms.sketch import (
    SketchParams,
    default_scales,
    exact_sketch,
    frequencies,
    mean_sketch,
    scramble,
)
from shoal.server.decoders.kmeans import kmeans_cost, weighted_kmeans
from shoal.server.decoders.sketch.clompr import clompr, frequency_gains


def _mixture(n=20000, k=4, d=3, seed=0):
    rng = np.random.default_rng(seed)
    mu = rng.uniform(-0.6, 0.6, (k, d))
    x = mu[rng.integers(0, k, n)] + 0.05 * rng.standard_normal((n, d))
    return x / np.maximum(1, np.linalg.norm(x, axis=1))[:, None]


def _setup(k=4, d=3, eps=1.0):
    lo, hi = default_scales(d, k)
    p = SketchParams(dim=d, size=10 * k * d, measurements=10 * k * d, epsilon=eps, seed=1, scale_low=lo, scale_high=hi)
    return p, frequencies(p)


def test_clompr_recovers_kmeans_centers_from_the_exact_sketch():
    x = _mixture()
    p, om = _setup()
    res = clompr(exact_sketch(x, om), om, 4, restarts=2)
    lloyd = kmeans_cost(x, weighted_kmeans(x, np.ones(len(x)), 4, np.random.default_rng(0)))
    assert kmeans_cost(x, res.centroids) <= 1.05 * lloyd
    assert res.weights.sum() == pytest.approx(1.0, abs=0.05)
    assert np.allclose(res.spreads, 0.05 * np.sqrt(1), atol=0.02)  # per-coordinate spread of the clusters


def test_clompr_decodes_a_private_sketch_of_devices():
    x = _mixture(n=40000)
    p, om = _setup(eps=1.0)
    n0 = np.full(4, 10000)
    s = mean_sketch(scramble(x, n0, p, om, np.random.default_rng(3)), n0)
    res = clompr(s, om, 4)
    lloyd = kmeans_cost(x, weighted_kmeans(x, np.ones(len(x)), 4, np.random.default_rng(0)))
    assert kmeans_cost(x, res.centroids) <= 1.2 * lloyd


def test_the_best_restart_by_residual_is_returned():
    p, om = _setup()
    res = clompr(exact_sketch(_mixture(), om), om, 4, restarts=3, seed=7)
    assert len(res.restart_residuals) == 3 and res.residual == min(res.restart_residuals)


def test_sketch_shape_must_match_the_frequencies():
    p, om = _setup()
    with pytest.raises(ConfigError, match="does not match"):
        clompr(np.ones(7, dtype=complex), om, 2)


def test_k_must_be_positive():
    p, om = _setup()
    with pytest.raises(ConfigError, match="k >= 1"):
        clompr(np.ones(om.shape[1], dtype=complex), om, 0)


def test_non_finite_sketch_is_refused():
    p, om = _setup()
    z = np.ones(om.shape[1], dtype=complex)
    z[3] = np.nan
    with pytest.raises(DecodeError, match="NaN"):
        clompr(z, om, 2)


def test_zero_sketch_is_refused():
    p, om = _setup()
    with pytest.raises(DecodeError, match="zero"):
        clompr(np.zeros(om.shape[1], dtype=complex), om, 2)


def test_gains_are_one_without_noise():
    p, omega = _setup()
    z = exact_sketch(_mixture(2000), omega)
    assert np.array_equal(frequency_gains(z, omega, 0.0), np.ones(p.size))


def test_gains_vanish_where_the_sketch_is_pure_noise():
    """White noise of known variance on a sketch whose high frequencies carry
    no signal: the gains of the highest-|omega| bin are near zero, the lowest near one."""
    p, omega = _setup()
    rng = np.random.default_rng(5)
    z = exact_sketch(_mixture(20000), omega)
    noise_var = 0.05
    e = rng.normal(0, np.sqrt(noise_var / p.size / 2), (2, p.size))
    g = frequency_gains(z + e[0] + 1j * e[1], omega, noise_var)
    order = np.argsort((omega**2).sum(axis=0))
    assert g[order[: p.size // 20]].mean() > 0.8
    assert g[order[-p.size // 20 :]].mean() < 0.3
    assert np.all((g >= 0) & (g <= 1))


def test_negative_noise_variance_is_refused():
    p, omega = _setup()
    with pytest.raises(ConfigError, match="noise_variance"):
        clompr(exact_sketch(_mixture(500), omega), omega, 4, noise_variance=-1.0)


def test_tight_clusters_in_a_small_part_of_the_ball_are_found():
    """A loose public bound: three clusters of spread ~6e-4 within radius 1/8
    of the unit ball (pycle's failure mode: starts far from the data). The
    graduated ascent from candidates drawn where the sketch puts the data
    finds them, for most rounds' public frequencies: over public seeds 1-12,
    at least 9 within 1.2 x Lloyd's cost. Measured: 12 of 12 with the
    numpy-derived frequencies of protocol 0, 9 of 12 with the SHAKE-derived
    ones of protocol 1 (the same law: radii, bandwidths and directions
    checked; an open question of issue 45, in the session notes)."""
    rng = np.random.default_rng(3)
    mu = np.array([[0.08, 0.0, 0.0, 0.0], [-0.04, 0.07, 0.0, 0.0], [0.0, -0.07, 0.05, 0.0]])
    x = mu[rng.integers(0, 3, 20000)] + 6e-4 * rng.standard_normal((20000, 4))
    lloyd = kmeans_cost(x, weighted_kmeans(x, np.ones(len(x)), 3, np.random.default_rng(0), restarts=2))
    lo, hi = default_scales(4, 3)
    found = 0
    for seed in range(1, 13):
        p = SketchParams(dim=4, size=120, measurements=120, epsilon=1.0, seed=seed, scale_low=lo, scale_high=hi)
        omega = frequencies(p)
        res = clompr(exact_sketch(x, omega), omega, 3, restarts=2, seed=0)
        found += kmeans_cost(x, res.centroids) / lloyd < 1.2
    assert found >= 9
