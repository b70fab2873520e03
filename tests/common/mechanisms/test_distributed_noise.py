"""zCDP to (eps, delta): the Canonne-Kamath-Steinke conversion is a valid bound
(never below the Gaussian mechanism's exact curve) and tighter than Bun-Steinke's.
The laplace law's exact Polya shares: their pmf is the exact one, and the
pmf test fails on deliberately broken samplers."""

import math

import numpy as np
import pytest
from scipy import stats

from shoal.common.errors import ConfigError
from shoal.common.mechanisms import distributed_noise
from shoal.common.mechanisms.distributed_noise import (
    laplace_shares,
    polya,
    rho_for,
    rho_for_tight,
    zcdp_delta,
    zcdp_delta_tight,
)


def _gaussian_delta(sigma: float, eps: float) -> float:
    """The exact delta(eps) of the Gaussian mechanism with sensitivity 1 (Balle-Wang 2018, Thm. 8)."""
    return stats.norm.cdf(1 / (2 * sigma) - eps * sigma) - math.exp(eps) * stats.norm.cdf(-1 / (2 * sigma) - eps * sigma)


@pytest.mark.parametrize("sigma", [0.8, 2.0, 5.0, 20.0])
@pytest.mark.parametrize("eps", [0.1, 0.5, 1.0, 4.0])
def test_the_tight_conversion_never_claims_less_than_the_gaussian_mechanism_spends(sigma, eps):
    # The Gaussian mechanism is exactly 1/(2 sigma^2)-zCDP, so any valid zCDP conversion bounds its curve.
    rho = 1 / (2 * sigma**2)
    assert zcdp_delta_tight(rho, eps) >= _gaussian_delta(sigma, eps)


@pytest.mark.parametrize("eps", [0.3, 1.0, 3.0])
def test_the_tight_conversion_is_below_bun_steinkes(eps):
    rho = rho_for(eps, 1e-6)
    assert zcdp_delta_tight(rho, eps) <= zcdp_delta(rho, eps)


def test_rho_for_tight_is_the_largest_rho_meeting_the_target():
    rho = rho_for_tight(1.0, 1e-6)
    assert zcdp_delta_tight(rho, 1.0) <= 1e-6 < zcdp_delta_tight(rho * 1.001, 1.0)
    assert 1.3 < rho / rho_for(1.0, 1e-6) < 1.5


def _truncated_polya_pmf(r: float, s: int, t: int, clip: int, top: int) -> np.ndarray:
    """P(X' = x), x < top, for X' the sum of the points j <= T of a Poisson
    process with intensity r exp(-j s / t) / j (Panjer's recursion for a
    compound Poisson law): what ``polya`` claims to draw, computed exactly."""
    j = np.arange(1, clip + 1)
    nu = r * np.exp(-j * s / t) / j
    pmf = np.zeros(top)
    pmf[0] = math.exp(-nu.sum())
    for x in range(1, top):
        m = min(x, clip)
        pmf[x] = (j[:m] * nu[:m] * pmf[x - j[:m]]).sum() / x
    return pmf


def _chi2_pvalue(draws: np.ndarray, pmf: np.ndarray) -> float:
    top = pmf.size
    counts = np.bincount(np.minimum(draws, top), minlength=top + 1).astype(float)
    probs = np.append(pmf, max(0.0, 1 - pmf.sum()))
    keep = probs * draws.size >= 5
    obs = np.r_[counts[keep], counts[~keep].sum()]
    exp = np.r_[probs[keep], probs[~keep].sum()] * draws.size
    return float(stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue)


@pytest.mark.parametrize("r_den,s,t,clip", [(16, 1, 8, 400), (16, 1, 8, 40), (1, 3, 7, 200), (40, 1024, 5000, 60_000)])
def test_polya_matches_the_exact_pmf_of_its_truncated_compound_poisson_law(r_den, s, t, clip):
    draws = polya(r_den, s, t, clip, 400_000, np.random.default_rng(31))
    top = 200 if clip < 1000 else 40
    assert _chi2_pvalue(draws, _truncated_polya_pmf(1 / r_den, s, t, clip, top)) > 1e-4


@pytest.mark.parametrize("r_den,s,t", [(16, 1, 8), (1, 3, 7), (5, 2, 9)])
def test_polya_is_the_negative_binomial_when_the_clip_is_far_in_the_tail(r_den, s, t):
    # alpha^(T+1) < 1e-20: the truncated law is NB(1/r_den, 1 - alpha) itself (scipy's pmf).
    alpha = math.exp(-s / t)
    clip = math.ceil(50 * t / s)
    draws = polya(r_den, s, t, clip, 400_000, np.random.default_rng(32))
    assert _chi2_pvalue(draws, stats.nbinom.pmf(np.arange(300), 1 / r_den, 1 - alpha)) > 1e-4
    assert draws.mean() == pytest.approx(alpha / (1 - alpha) / r_den, rel=0.03)


def test_the_pmf_test_fails_on_a_polya_sampler_with_the_wrong_shape():
    # Shares drawn for 15 devices compared with the law for 16: 7% more noise per share, caught.
    draws = polya(15, 1, 8, 400, 400_000, np.random.default_rng(33))
    assert _chi2_pvalue(draws, stats.nbinom.pmf(np.arange(300), 1 / 16, 1 - math.exp(-1 / 8))) < 1e-6


def test_the_pmf_test_fails_on_a_polya_sampler_that_skips_the_exp_thinning(monkeypatch):
    # Keeping every candidate whatever exp(-j s / t) says (a broken thinning coin) is caught.
    monkeypatch.setattr(distributed_noise, "bernoulli_exp_neg_mixed",
                        lambda whole, num, den, rng: np.ones(np.shape(whole), dtype=bool))
    draws = polya(16, 1, 8, 400, 400_000, np.random.default_rng(34))
    assert _chi2_pvalue(draws, _truncated_polya_pmf(1 / 16, 1, 8, 400, 200)) < 1e-6


def test_n_min_laplace_shares_add_up_to_the_discrete_laplace_law():
    # Twenty devices' clipped Polya differences, added: P(z) ~ alpha^|z| (the total the server decodes).
    n, t, s = 20, 12, 1
    z = laplace_shares((n, 200_000), n, (t, s), 2000, np.random.default_rng(35)).sum(axis=0)
    alpha = math.exp(-s / t)
    ks = np.arange(-60, 61)
    pmf = (1 - alpha) / (1 + alpha) * alpha ** np.abs(ks)
    counts = np.array([(z == k).sum() for k in ks])
    obs, exp = np.append(counts, z.size - counts.sum()), np.append(pmf, 1 - pmf.sum()) * z.size
    assert stats.chisquare(obs, exp).pvalue > 1e-4


def test_polya_rejects_a_scale_numerator_beyond_its_integer_range():
    with pytest.raises(ConfigError, match="polya"):
        polya(16, 1, 1 << 51, 10, 5, np.random.default_rng(0))
