"""The two noise laws a secure sum's devices can share out (``secure_sum.py``).

Each of n devices adds a share of noise to every coordinate of its integer
vector; only the total of all shares is ever seen (split-and-mix), so the
total's law is what must be differentially private.

- ``laplace``: shares are differences of Polya draws NB(1/n_min, 1 - alpha);
  n_min of them add up to exactly the discrete Laplace law alpha^|z|
  (Goryczka & Xiong; Balle, Bell, Gascon, Nissim CCS'20), pure eps-DP for
  the integer L1 sensitivity (geometric mechanism). Best in low dimension,
  where a vector's L1 and L2 norms are close.
- ``gaussian``: every share is an exact discrete Gaussian N_Z(0, S)
  (Canonne, Kamath, Steinke NeurIPS'20, Alg. 3; ``exact_sampling``). The
  sum of m such shares is not exactly a discrete Gaussian; Kairouz, Liu,
  Steinke (ICML'21, "The distributed discrete Gaussian mechanism", Thm. 1)
  show that adding it to an integer vector is (1/2) e^2-concentrated DP for
  shifts of L2 norm D2, with
  e^2 = D2^2 / (m S) + (1/2) tau L,  tau = 10 sum_{k=1}^{m-1} exp(-2 pi^2 S k / (k+1)).
  ``gaussian_rho`` bounds tau above by 10 (m_max - 1) exp(-pi^2 S) (k/(k+1)
  >= 1/2), uses m = m_min in the first term (more devices only add noise),
  and requires S >= 16, where that term is below 1e-60 per device.
  Concentrated DP to (eps, delta): delta = exp(-(eps - rho)^2 / (4 rho))
  (Bun & Steinke TCC'16, Prop. 1.3). The noise is calibrated to the L2
  sensitivity, so in high dimension (refine rounds with d = 100: L1 = 11,
  L2 = 1.4 per bucket) its variance is an order of magnitude below the
  Laplace law's at the same (eps, delta).

Pure math, no I/O. Shares drawn here leave a device (wire values); the
in-process shortcut that draws a whole total at once is simulation, and
lives with it (``deploy/simulate.py``).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from shoal.common.errors import ConfigError
from shoal.common.exact_sampling import (
    MAX_GAUSSIAN_SIGMA_SQ,
    discrete_gaussian,
    discrete_gaussian_tail,
)

NOISES: tuple[str, ...] = ("laplace", "gaussian")
# Per-device variance parameter floor: keeps KLS's tau term negligible.
MIN_GAUSSIAN_SIGMA_SQ = 16


def rho_for(epsilon: float, delta: float) -> float:
    """The largest rho whose rho-zCDP gives (epsilon, delta)-DP by Bun-Steinke:
    eps = rho + 2 sqrt(rho ln(1/delta)), so sqrt(rho) = sqrt(L + eps) - sqrt(L)."""
    if not (math.isfinite(epsilon) and epsilon > 0) or not 0 < delta < 1:
        raise ConfigError(f"zCDP conversion needs eps > 0 and delta in (0, 1), got {epsilon}, {delta}")
    big_l = -math.log(delta)
    return (epsilon / (math.sqrt(big_l + epsilon) + math.sqrt(big_l))) ** 2


def zcdp_delta(rho: float, epsilon: float) -> float:
    """delta of rho-zCDP at epsilon (Bun-Steinke Prop. 1.3); 1 if eps <= rho."""
    if rho <= 0:
        return 0.0
    if epsilon <= rho:
        return 1.0
    return math.exp(-((epsilon - rho) ** 2) / (4 * rho))


def zcdp_delta_tight(rho: float, epsilon: float) -> float:
    """delta of rho-zCDP at epsilon by Canonne, Kamath, Steinke (NeurIPS'20,
    Cor. 13): inf over alpha > 1 of exp((alpha - 1)(alpha rho - eps)) / (alpha - 1)
    (1 - 1/alpha)^alpha. Every alpha gives a valid bound, so the infimum is
    taken over a log-spaced grid of alpha in (1, 10^6] (a grid point can only
    overstate delta); never above Bun-Steinke's ``zcdp_delta``."""
    if rho <= 0:
        return 0.0
    alpha = 1.0 + np.geomspace(1e-4, 1e6, 4000)
    log_d = (alpha - 1) * (alpha * rho - epsilon) - np.log(alpha - 1) + alpha * np.log1p(-1 / alpha)
    return float(min(zcdp_delta(rho, epsilon), math.exp(min(0.0, float(log_d.min())))))


def rho_for_tight(epsilon: float, delta: float) -> float:
    """The largest rho (to 1e-9 relative) with ``zcdp_delta_tight(rho, eps) <= delta``;
    at least ``rho_for``'s (about 1.4x it at eps ~ 1, delta = 1e-6)."""
    lo = rho_for(epsilon, delta)
    hi = 4 * lo
    while zcdp_delta_tight(hi, epsilon) <= delta:
        lo, hi = hi, 2 * hi
    while hi - lo > 1e-9 * lo:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if zcdp_delta_tight(mid, epsilon) <= delta else (lo, mid)
    return lo


def gaussian_rho(l2_sensitivity: float, sigma_sq: int, length: int, min_devices: int, max_devices: int) -> float:
    """rho of the total of m in [min, max] devices' N_Z(0, S) shares (module docstring)."""
    tau = 10.0 * (max_devices - 1) * math.exp(-math.pi**2 * sigma_sq)
    return (l2_sensitivity**2 / (min_devices * sigma_sq) + 0.5 * tau * length) / 2


def gaussian_sigma_sq(l2_sensitivity: float, rho: float, length: int, min_devices: int, max_devices: int) -> int:
    """The smallest integer S >= 16 with gaussian_rho(...) <= rho; raises above 2^20."""
    s = max(MIN_GAUSSIAN_SIGMA_SQ, math.ceil(l2_sensitivity**2 / (2 * rho * min_devices)))
    while gaussian_rho(l2_sensitivity, s, length, min_devices, max_devices) > rho:
        s += max(1, s // 1000)
        if s > MAX_GAUSSIAN_SIGMA_SQ:
            break
    if s > MAX_GAUSSIAN_SIGMA_SQ:
        raise ConfigError(f"discrete Gaussian shares would need S = {s} > 2^20: lower the fixed-point scale")
    return s


def gaussian_clip(sigma_sq: int, budget: float) -> int:
    """The smallest T (searched upward from the Gaussian tail's estimate) with
    P(N_Z(0, S) > T) <= budget, by ``discrete_gaussian_tail``."""
    t = max(1, math.ceil(math.sqrt(2 * sigma_sq * max(math.log(1 / budget), 1.0))))
    while discrete_gaussian_tail(sigma_sq, t) > budget:
        t = math.ceil(t * 1.02) + 1
    return t


def laplace_shares(shape: tuple[int, int], min_devices: int, alpha: float, clip: int,
                   rng: np.random.Generator) -> NDArray[np.int64]:
    """Polya differences NB(1/n_min, 1 - alpha) per coordinate, clipped to [-T, T]."""
    r, p = 1.0 / min_devices, 1.0 - alpha
    z = rng.negative_binomial(r, p, size=shape) - rng.negative_binomial(r, p, size=shape)
    return np.clip(z, -clip, clip).astype(np.int64)


def gaussian_shares(shape: tuple[int, int], sigma_sq: int, clip: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """Exact N_Z(0, S) per coordinate, truncated to [-T, T] (``discrete_gaussian``)."""
    return discrete_gaussian(sigma_sq, clip, shape[0] * shape[1], rng).reshape(shape)

