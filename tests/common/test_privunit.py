"""PrivUnit: calibration, unbiasedness, and an empirical eps-LDP audit."""

import math
from dataclasses import replace

import numpy as np
import pytest
from dp_audit import max_log_ratio_lower_bound
from scipy import special

from shoal.common.errors import ConfigError
from shoal.common.privunit import PrivUnitParams, privatise


@pytest.mark.parametrize("dim,eps", [(2, 1.0), (16, 4.0), (100, 3.0), (100, 8.0)])
def test_calibration_meets_epsilon_exactly(dim, eps):
    p = PrivUnitParams.calibrate(dim, eps)
    sigma = p.cap_share
    ratio = math.log(p.cap_probability / (1 - p.cap_probability)) + math.log((1 - sigma) / sigma)
    assert ratio <= eps + 1e-9
    assert ratio >= eps - 1e-6


def test_variance_beats_duchi_at_eps_4_d_100():
    p = PrivUnitParams.calibrate(100, 4.0)
    duchi = math.pi * 100 / 2 * ((math.e**4 + 1) / (math.e**4 - 1)) ** 2
    assert p.expected_sq_norm < duchi / 3


@pytest.mark.parametrize("dim,eps", [(3, 1.0), (20, 4.0)])
def test_privunit_estimator_is_unbiased(dim, eps):
    rng = np.random.default_rng(1)
    p = PrivUnitParams.calibrate(dim, eps)
    x = np.zeros(dim)
    x[0], x[1] = 0.6, -0.3
    n = 200_000
    z = privatise(np.repeat(x[None, :], n, axis=0), p, rng)
    se = math.sqrt(p.expected_sq_norm / dim / n)
    assert np.all(np.abs(z.mean(axis=0) - x) < 5 * se)
    assert np.allclose((z * z).sum(1), p.expected_sq_norm)


def _audit(params, n=200_000, seed=2):
    rng = np.random.default_rng(seed)
    d = params.dim
    u1 = np.zeros(d)
    u1[0] = 1.0
    out = []
    for u in (u1, -u1):
        z = privatise(np.repeat(u[None, :], n, axis=0), params, rng)
        t = z[:, 0] * params.scale  # <V, e1>
        edges = np.array([-1.0, -params.gamma, 0.0, params.gamma, 1.0 + 1e-9])
        out.append(np.histogram(t, bins=np.unique(edges))[0])
    return max_log_ratio_lower_bound(out[0], out[1])


@pytest.mark.parametrize("dim,eps", [(5, 1.0), (16, 3.0)])
def test_privunit_is_eps_ldp(dim, eps):
    params = PrivUnitParams.calibrate(dim, eps)
    assert _audit(params) <= eps


def test_audit_catches_a_miscalibrated_privunit():
    good = PrivUnitParams.calibrate(5, 2.0)
    # Claim eps = 1.2 for a mechanism whose true ratio is e^2 (bypassing validation).
    bad = object.__new__(PrivUnitParams)
    for k, v in vars(replace(good)).items():
        object.__setattr__(bad, k, v)
    object.__setattr__(bad, "epsilon", 1.2)
    assert _audit(bad) > 1.2


def test_rejects_dim_below_two():
    with pytest.raises(ConfigError, match="dim >= 2"):
        PrivUnitParams(dim=1, epsilon=1.0, gamma=0.1, cap_probability=0.6)


def test_rejects_nonpositive_epsilon():
    with pytest.raises(ConfigError, match="epsilon"):
        PrivUnitParams(dim=3, epsilon=0.0, gamma=0.1, cap_probability=0.6)


def test_rejects_gamma_outside_open_interval():
    with pytest.raises(ConfigError, match="gamma"):
        PrivUnitParams(dim=3, epsilon=1.0, gamma=1.0, cap_probability=0.6)


def test_rejects_cap_probability_outside_open_interval():
    with pytest.raises(ConfigError, match="p must be"):
        PrivUnitParams(dim=3, epsilon=1.0, gamma=0.1, cap_probability=1.0)


def test_rejects_parameters_whose_ratio_exceeds_epsilon():
    a = 1.0
    sigma = float(special.betaincc(a, a, 0.55))
    assert sigma > 0
    with pytest.raises(ConfigError, match="likelihood ratio"):
        PrivUnitParams(dim=3, epsilon=0.1, gamma=0.1, cap_probability=0.9)


def test_rejects_points_of_the_wrong_dimension():
    p = PrivUnitParams.calibrate(4, 1.0)
    with pytest.raises(ConfigError, match="dim 4"):
        privatise(np.zeros((2, 3)), p, np.random.default_rng(0))
