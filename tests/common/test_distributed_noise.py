"""zCDP to (eps, delta): the Canonne-Kamath-Steinke conversion is a valid bound
(never below the Gaussian mechanism's exact curve) and tighter than Bun-Steinke's."""

import math

import pytest
from scipy import stats

from shoal.common.distributed_noise import rho_for, rho_for_tight, zcdp_delta, zcdp_delta_tight


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
