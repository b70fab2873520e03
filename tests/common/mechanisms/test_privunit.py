"""Codebook PrivUnit: exact calibration, variance close to continuous PrivUnit,
unbiased on the wire and in simulation, the simulation path equal in law to
the wire path, and one test per invalid parameter. (Its bit-level audits are
in test_bit_level_audits.py.)"""

import math
from fractions import Fraction

import numpy as np
import pytest
from legacy_samplers import LegacyPrivUnit
from scipy import stats

from shoal.common.errors import ConfigError
from shoal.common.mechanisms.exact_sampling import DYADIC_ONE
from shoal.common.mechanisms.privunit import (
    PrivUnitParams,
    cap_mask,
    cap_members,
    decode,
    sample_decoded,
    select,
)
from shoal.common.randomness.public_stream import box_muller

KEY = 77


@pytest.mark.parametrize("dim,eps", [(2, 1.0), (16, 4.0), (100, 3.0), (100, 7.5)])
def test_calibration_meets_epsilon_with_its_exact_ratio(dim, eps):
    p = PrivUnitParams.calibrate(dim, eps)
    num, den = p.ratio
    assert math.log(Fraction(num, den)) <= eps
    assert math.log(Fraction(num, den)) > eps - 1e-6  # and spends it: A is the largest that fits
    assert p.event.cap_numerator * (p.candidates - p.cap) == num


@pytest.mark.parametrize("dim,eps", [(2, 1.0), (10, 3.0), (16, 6.0), (100, 0.5), (100, 1.0), (100, 4.5), (100, 7.5)])
def test_variance_is_within_1_percent_of_continuous_privunit(dim, eps):
    codebook = PrivUnitParams.calibrate(dim, eps).expected_sq_norm
    continuous = 1 / LegacyPrivUnit.calibrate(dim, eps).scale ** 2
    assert codebook <= 1.01 * continuous


def test_variance_beats_duchi_at_eps_4_d_100():
    p = PrivUnitParams.calibrate(100, 4.0)
    duchi = math.pi * 100 / 2 * ((math.e**4 + 1) / (math.e**4 - 1)) ** 2
    assert p.expected_sq_norm < duchi / 3


@pytest.mark.parametrize("dim,eps,n", [(3, 1.0, 64), (8, 6.0, 128), (20, 4.0, 1024), (100, 3.0, 1024)])
def test_wire_estimator_is_unbiased(dim, eps, n):
    rng = np.random.default_rng(1)
    p = PrivUnitParams.calibrate(dim, eps, candidates=n)
    x = np.zeros(dim)
    x[0], x[1] = 0.6, -0.3
    trials = 60_000
    nonce, index = select(np.repeat(x[None, :], trials, axis=0), p, KEY, rng)
    z = decode(nonce, index, p, KEY)
    se = math.sqrt(p.expected_sq_norm / dim / trials)
    assert np.all(np.abs(z.mean(axis=0) - x) < 4.5 * se)
    assert np.allclose((z * z).sum(1), p.expected_sq_norm)


@pytest.mark.parametrize("dim,eps", [(3, 1.0), (20, 4.0), (100, 7.5)])
def test_simulation_estimator_is_unbiased(dim, eps):
    rng = np.random.default_rng(2)
    p = PrivUnitParams.calibrate(dim, eps)
    x = np.zeros(dim)
    x[0], x[1] = 0.6, -0.3
    trials = 400_000
    z = sample_decoded(np.repeat(x[None, :], trials, axis=0), p, rng)
    se = math.sqrt(p.expected_sq_norm / dim / trials)
    assert np.all(np.abs(z.mean(axis=0) - x) < 5 * se)


@pytest.mark.parametrize("dim,eps,n", [(4, 2.0, 64), (12, 6.0, 256)])
def test_simulation_path_has_the_wire_paths_distribution(dim, eps, n):
    """<z, e1> and the norm of the orthogonal part: wire vs order-statistics sampler."""
    p = PrivUnitParams.calibrate(dim, eps, candidates=n)
    x = np.zeros((30_000, dim))
    x[:, 0] = 1.0
    wire = decode(*select(x, p, KEY, np.random.default_rng(3)), p, KEY)
    sim = sample_decoded(x, p, np.random.default_rng(4))
    assert stats.ks_2samp(wire[:, 0], sim[:, 0]).pvalue > 1e-3
    assert stats.ks_2samp(wire[:, 1], sim[:, 1]).pvalue > 1e-3


def test_cap_holds_exactly_k_indices_and_breaks_ties_by_index():
    scores = np.array([[0.5, 0.9, 0.5, 0.5, 0.1]])
    assert cap_mask(scores, 3).tolist() == [[True, True, True, False, False]]
    assert cap_mask(np.random.default_rng(0).normal(size=(50, 40)), 7).sum(axis=1).tolist() == [7] * 50


def test_the_cap_holds_exactly_k_indices_even_with_nan_scores():
    scores = np.array([[0.3, np.nan, 0.1, 0.9], [np.nan, np.nan, np.nan, np.nan]])
    assert cap_mask(scores, 1).sum(axis=1).tolist() == [1, 1]
    assert cap_mask(scores, 3).sum(axis=1).tolist() == [3, 3]


def test_candidate_gaussians_stay_finite_and_nonzero_at_the_extreme_hashes():
    # u1 = (hi + 1/2) 2^-32 never reaches 0 (log finite) nor 1 (radius 0: a zero candidate)
    h = np.array([0, 1, 2**32 - 1, 2**64 - 2**31, 2**64 - 1], dtype=np.uint64)
    g = box_muller(h).reshape(-1, 2)
    radius = np.hypot(g[:, 0], g[:, 1])
    assert np.all(np.isfinite(g)) and np.all(radius > 1e-5) and np.all(radius <= 6.77)


def test_a_device_picks_its_cap_with_the_exact_cap_probability():
    p = PrivUnitParams.calibrate(5, 2.0, candidates=32)
    x = np.zeros((100_000, 5))
    x[:, 2] = 1.0
    nonce, index = select(x, p, KEY, np.random.default_rng(5))
    share = cap_members(nonce, index, x, p, KEY).mean()
    q = p.cap_numerator / DYADIC_ONE
    assert abs(share - q) < 5 * math.sqrt(q * (1 - q) / x.shape[0])


def test_a_nonce_regenerates_the_same_candidates_on_the_server():
    p = PrivUnitParams.calibrate(6, 3.0, candidates=64)
    nonce, index = select(np.full((5, 6), 0.1), p, KEY, np.random.default_rng(6))
    assert np.array_equal(decode(nonce, index, p, KEY), decode(nonce.copy(), index.copy(), p, KEY))
    assert not np.allclose(decode(nonce, index, p, KEY), decode(nonce, index, p, KEY + 1))


def _valid(**change):
    base = dict(dim=3, epsilon=1.0, candidates=64, cap=8, cap_numerator=DYADIC_ONE // 4)
    return PrivUnitParams(**{**base, **change})


def test_rejects_dim_below_two():
    with pytest.raises(ConfigError, match="dim >= 2"):
        _valid(dim=1)


def test_rejects_nonpositive_epsilon():
    with pytest.raises(ConfigError, match="epsilon"):
        _valid(epsilon=0.0)


def test_rejects_too_few_candidates():
    with pytest.raises(ConfigError, match="candidates N"):
        _valid(candidates=1, cap=1)


def test_rejects_a_cap_as_large_as_the_codebook():
    with pytest.raises(ConfigError, match="cap K"):
        _valid(cap=64)


def test_rejects_a_cap_numerator_outside_the_open_interval():
    with pytest.raises(ConfigError, match="cap numerator"):
        _valid(cap_numerator=DYADIC_ONE)


def test_rejects_a_cap_less_likely_than_its_complement():
    with pytest.raises(ConfigError, match="less likely"):
        _valid(cap_numerator=DYADIC_ONE // 100)


def test_rejects_parameters_whose_exact_ratio_exceeds_epsilon():
    with pytest.raises(ConfigError, match="likelihood ratio"):
        _valid(cap_numerator=DYADIC_ONE // 2)


def test_rejects_points_of_the_wrong_dimension():
    p = PrivUnitParams.calibrate(4, 1.0, candidates=16)
    with pytest.raises(ConfigError, match="dim 4"):
        select(np.zeros((2, 3)), p, KEY, np.random.default_rng(0))


@pytest.mark.parametrize("dim,eps", [(2, 1.0), (20, 4.0), (100, 4.0)])
def test_simulation_with_row_signs_samples_the_signed_rows(dim, eps):
    """``row_sign`` folds the encoder's +-1 row signs into the sampler: the
    same draws, in the same order, as sampling the signed rows (zero rows
    included), to rounding."""
    p = PrivUnitParams.calibrate(dim, eps)
    x = np.random.default_rng(1).uniform(-0.5, 0.5, (5_000, dim)) / math.sqrt(dim)
    x[:5] = 0.0
    signs = np.where(np.random.default_rng(2).random(5_000) < 0.5, -1.0, 1.0)
    folded = sample_decoded(x, p, np.random.default_rng(7), row_sign=signs)
    signed = sample_decoded(x * signs[:, None], p, np.random.default_rng(7))
    assert np.abs(folded - signed).max() < 1e-12
    assert np.allclose((folded * folded).sum(1), p.expected_sq_norm)  # |V_J / c| = 1 / c on every row
