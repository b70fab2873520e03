"""A thresholded Gaussian histogram over grid cells: the noise and its privacy.

The cover of the central ``gridhist`` algorithm (``server/decoders/central/
histogram.py``). At each of ``levels`` grid sides, every non-empty cell of
each of ``shifts`` shifted grids gets its count of the points no finer level
covered plus exact discrete Gaussian noise (the sum of ``shares`` draws of
N_Z(0, sigma_sq), each truncated at ``clip``); the cells whose noisy count
reaches ``threshold`` are released (their identity only, never the count).
Empty cells are never considered, so no cell appears out of nothing: this
is the stability-based histogram (Korolova et al., WWW'09; Bun, Nissim,
Stemmer, PODS'16) with Gaussian noise, level after level.

Why it replaces the exponential-mechanism greedy where the data are
projected (issue 17): the greedy sees a cluster once its gain passes about
ln(U) 2 ln(e / delta) / eps_g, U the grid's universe of cells (ln U ~ 13 in
d' = 5); the histogram once its count passes about
z sqrt(2 levels shifts ln(1 / delta)) / eps_g with z ~ 5: 2-3x fewer points
at the same budget, and every cluster above it is found in one release.

Privacy for adding or removing one point x, at one level and any history
(the points covered by finer levels are a function of earlier releases):
x is in at most ``shifts`` cells. Cells that are non-empty on both sides
differ by one count each, an L2 sensitivity of sqrt(shifts): the summed
discrete Gaussians are rho-zCDP by Kairouz, Liu and Steinke (ICML'21, Thm.
4; one draw: Canonne, Kamath, Steinke'20), and releasing only which cells
pass is post-processing. The at most ``shifts`` cells that hold x alone
exist on one side only; they are released with probability at most
P(1 + Z >= threshold) each. So each level is delta_t-approximately
rho-zCDP (Bun and Steinke, TCC'16, Def. 8.1, with the event "none of x's
own cells passes"), ``levels`` levels compose adaptively to (levels delta_t,
levels rho), and the conversion gives (eps + ln(1 / (1 - D)), delta_conv +
D)-DP with D = levels delta_t (conditioning on the event costs the
factor 1 / (1 - D)). Truncating the draws moves any output probability by
at most the chance that one of them was truncated, bounded for any data set
of fewer than 2^36 points (``MAX_DRAWS``), which costs (1 + e^eps) times
that in delta. Pure arithmetic, no data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from shoal.common.errors import ConfigError, PrivacyError
from shoal.common.mechanisms.distributed_noise import gaussian_rho, rho_for_tight, zcdp_delta_tight
from shoal.common.mechanisms.exact_sampling import MAX_GAUSSIAN_SIGMA_SQ, discrete_gaussian_tail

MAX_DRAWS = 2**44  # levels x shifts x shares x cells for any data set of < 2^36 points (truncation's delta)
THRESHOLD_SHARE = 0.5  # of the cover's delta, for x's own cells passing; the rest for the zCDP conversion


@dataclass(frozen=True)
class HistogramNoise:
    """The public parameters of one thresholded histogram cover."""

    levels: int
    shifts: int
    sigma_sq: int  # one draw's variance parameter (<= 2^20, ``discrete_gaussian``)
    shares: int  # draws summed per cell
    threshold: int  # a cell is released when count + noise >= threshold
    clip: int  # each draw truncated to |z| <= clip
    # The most one point adds to one cell: 1 for counts; Q for the fixed-point
    # weighted values of seed 001's greedy (``server/decoders/central/greedy.py``), where a
    # point adds an integer in [0, Q] to its cell at each level.
    weight: int = 1

    def __post_init__(self) -> None:
        if self.levels < 1 or self.shifts < 1 or self.shares < 1 or self.weight < 1:
            raise ConfigError(f"histogram cover: levels {self.levels}, shifts {self.shifts}, shares {self.shares}, "
                              f"weight {self.weight} must be >= 1")
        if not 1 <= self.sigma_sq <= MAX_GAUSSIAN_SIGMA_SQ or self.clip < 1 or self.threshold < 1 + self.weight:
            raise ConfigError(f"histogram cover: sigma_sq {self.sigma_sq} in [1, 2^20], clip {self.clip} >= 1 and "
                              f"threshold {self.threshold} >= {1 + self.weight} (1 + weight) required")

    @property
    def sd(self) -> float:
        """The noise's standard deviation per cell (in points, or in units of 1 / Q of a point's weight)."""
        return math.sqrt(self.shares * self.sigma_sq)

    @property
    def rho(self) -> float:
        """zCDP of all levels' noisy values (KLS: sensitivity weight sqrt(shifts), ``shifts`` affected cells)."""
        return self.levels * gaussian_rho(self.weight * math.sqrt(self.shifts), self.sigma_sq, self.shifts,
                                          self.shares, self.shares)

    def alone_delta(self) -> float:
        """D: the chance, summed over levels, that one of x's own cells passes
        (x adds at most ``weight``, so its cell passes only if the noise is at
        least threshold - weight, i.e. exceeds threshold - weight - 1; a sum of
        draws does so only if one of them exceeds (threshold - weight - 1) / shares)."""
        per_draw = discrete_gaussian_tail(self.sigma_sq, max(0, (self.threshold - self.weight - 1) // self.shares))
        return min(1.0, self.levels * self.shifts * self.shares * per_draw)


def histogram_guarantee(noise: HistogramNoise, epsilon: float) -> float:
    """The delta at which the whole cover is epsilon-DP (module docstring); 1 when it is not."""
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise PrivacyError(f"histogram cover: epsilon must be finite and > 0, got {epsilon}")
    alone = noise.alone_delta()
    slack = -math.log1p(-alone) if alone < 1 else math.inf
    if slack >= epsilon:
        return 1.0
    truncation = (1 + math.exp(epsilon)) * MAX_DRAWS * 2 * discrete_gaussian_tail(noise.sigma_sq, noise.clip)
    return min(1.0, zcdp_delta_tight(noise.rho, epsilon - slack) + alone + truncation)


def calibrate_histogram(epsilon: float, delta: float, levels: int, shifts: int, weight: int = 1) -> HistogramNoise:
    """The least noise and threshold whose cover is (epsilon, delta)-DP when a
    point adds at most ``weight`` to each of its cells."""
    if not (math.isfinite(epsilon) and epsilon > 0) or not 0 < delta < 1:
        raise ConfigError(f"histogram cover needs eps > 0 and delta in (0, 1), got {epsilon}, {delta}")
    # The conditioning's slack is at most -ln(1 - delta): keep it out of the conversion's eps.
    rho = rho_for_tight(epsilon + math.log1p(-delta), delta * (1 - THRESHOLD_SHARE) * 0.999) / levels
    if weight < 1:
        raise ConfigError(f"histogram cover: weight must be >= 1, got {weight}")
    sens_sq = float(shifts) * weight**2
    shares = max(1, math.ceil(sens_sq / (2 * rho) / (MAX_GAUSSIAN_SIGMA_SQ * 0.9)))
    sigma_sq = max(1, math.ceil(sens_sq / (2 * rho * shares)))
    while gaussian_rho(weight * math.sqrt(shifts), sigma_sq, shifts, shares, shares) > rho:
        sigma_sq += max(1, sigma_sq // 1000)
    if sigma_sq > MAX_GAUSSIAN_SIGMA_SQ:
        raise ConfigError(f"histogram cover: a draw would need sigma_sq {sigma_sq} > 2^20")
    t = math.isqrt(sigma_sq) + 1
    clip = min(40 * t, (1 << 31) // t - 1)  # far in the tail: the truncation's delta underflows
    budget = delta * THRESHOLD_SHARE / (levels * shifts * shares)
    z = max(0, math.floor(math.sqrt(2 * sigma_sq * math.log(1 / budget)) * 0.9))
    while discrete_gaussian_tail(sigma_sq, z) > budget:
        z += max(1, z // 200)
    noise = HistogramNoise(levels, shifts, sigma_sq, shares, shares * z + 1 + weight, clip, weight)
    spent = histogram_guarantee(noise, epsilon)
    if spent > delta:
        raise ConfigError(f"histogram cover calibration overspent delta: {spent} > {delta}")
    return noise
