"""The two noise laws a secure sum's devices can share out (``secure_sum.py``).

Each of n devices adds a share of noise to every coordinate of its integer
vector; only the total of all shares is ever seen (split-and-mix), so the
total's law is what must be differentially private.

- ``laplace``: shares are differences of Polya draws NB(1/n_min, 1 - alpha);
  n_min of them add up to exactly the discrete Laplace law alpha^|z|
  (Goryczka & Xiong; Balle, Bell, Gascon, Nissim CCS'20), pure eps-DP for
  the integer L1 sensitivity (geometric mechanism). Best in low dimension,
  where a vector's L1 and L2 norms are close. alpha = exp(-s / t) is an
  exact rational exponent (``SecureSumParams.laplace_scale``) and each Polya
  draw is exact (``polya``, below): integers in, integers out.
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
lives with it (``deploy/simulation/simulate.py``).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from shoal.common.errors import ConfigError
from shoal.common.mechanisms.exact_sampling import (
    MAX_GAUSSIAN_SIGMA_SQ,
    MAX_SCALE_NUMERATOR,
    bernoulli_exp_neg_mixed,
    discrete_gaussian,
    discrete_gaussian_tail,
    poisson_rational,
)
from shoal.common.privacy.zcdp import rho_for, rho_for_tight, zcdp_delta, zcdp_delta_tight  # noqa: F401 (re-exported)

NOISES: tuple[str, ...] = ("laplace", "gaussian")
# Per-device variance parameter floor: keeps KLS's tau term negligible.
MIN_GAUSSIAN_SIGMA_SQ = 16


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


def polya(r_den: int, s: int, t: int, clip: int, size: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """Exact Polya / NB(1/r_den, 1 - alpha) draws, alpha = exp(-s / t), built from
    the points j <= T (``clip``) of their Poisson process.

    Why this is the law: NB(r, 1 - alpha) is compound Poisson (its pgf is
    exp(sum_j r alpha^j / j (z^j - 1))), i.e. the sum of the points of a
    Poisson process on {1, 2, ...} with intensity nu(j) = r alpha^j / j.
    Sampled exactly by thinning a dominating process: with B = bit_length(T)
    blocks [2^m, 2^(m+1)), m < B, draw C ~ Poisson(B r) candidates
    (``poisson_rational``), give each a uniform block m and a uniform j in
    it (intensity r / 2^m per j), and keep it iff j <= T, Bernoulli(2^m / j)
    (``integers(0, j) < 2^m``) and Bernoulli(exp(-j s / t))
    (``bernoulli_exp_neg_mixed``): the kept points have intensity exactly
    nu(j) on j <= T. Every decision is an integer comparison.

    What the truncation costs: the draw equals the untruncated NB unless
    the process has a point j > T, an event inside {NB > T}, of probability
    at most alpha^(T+1) (NB(r) with r <= 1 lies stochastically below
    NB(1) = Geometric) -- the event ``secure_sum`` already charges to delta
    for its clip, so the clipped share differs from the exact Polya
    difference only there. Cost: about B / r_den candidates per draw and a
    few whole-array passes, never a loop per draw."""
    if r_den < 1 or s < 1 or clip < 0 or not 1 <= t <= MAX_SCALE_NUMERATOR or s > (1 << 10):
        raise ConfigError(f"polya needs r_den >= 1, 1 <= s <= 2^10, 1 <= t <= 2^50, clip >= 0; got {r_den}, {s}, {t}, {clip}")
    blocks = int(clip).bit_length()
    counts = poisson_rational(blocks, r_den, size, rng)
    owner = np.repeat(np.arange(size), counts)
    low = np.left_shift(np.int64(1), rng.integers(0, max(blocks, 1), size=owner.size, dtype=np.int64))
    j = low + rng.integers(0, low, dtype=np.int64) if owner.size else low
    keep = j <= clip
    idx = np.flatnonzero(keep)
    keep[idx] = rng.integers(0, j[idx], dtype=np.int64) < low[idx] if idx.size else keep[idx]
    idx = np.flatnonzero(keep)
    # floor(j s / t) and its remainder without forming j s: j = a t + b, b s < 2^61.
    a, b = np.divmod(j[idx], t)
    keep[idx] = bernoulli_exp_neg_mixed(a * s + (b * s) // t, (b * s) % t, t, rng)
    out = np.zeros(size, dtype=np.int64)
    np.add.at(out, owner[keep], j[keep])
    return out


def laplace_shares(shape: tuple[int, int], min_devices: int, scale: tuple[int, int], clip: int,
                   rng: np.random.Generator) -> NDArray[np.int64]:
    """Polya differences NB(1/n_min, 1 - alpha) per coordinate, alpha = exp(-s / t)
    for ``scale`` = (t, s), clipped to [-T, T]; exact (``polya``)."""
    t, s = scale
    n = shape[0] * shape[1]
    z = polya(min_devices, s, t, clip, n, rng) - polya(min_devices, s, t, clip, n, rng)
    return np.clip(z, -clip, clip).astype(np.int64).reshape(shape)


def gaussian_shares(shape: tuple[int, int], sigma_sq: int, clip: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """Exact N_Z(0, S) per coordinate, truncated to [-T, T] (``discrete_gaussian``)."""
    return discrete_gaussian(sigma_sq, clip, shape[0] * shape[1], rng).reshape(shape)

