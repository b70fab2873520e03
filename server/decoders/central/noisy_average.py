"""Private cluster means: a noisy size and a noisy sum per part, drawn exactly.

The lift of seed 000 (Step 4, Alg. 3: NoisyAVG of Nissim, Stemmer and
Vadhan 2016, Alg. 5). NSV add Gaussian noise of sd ~ Delta / (eps m_hat)
to a part's average, Delta the domain's diameter and m_hat a noisy size
lowered by a tail bound. Here the same role is played by a noisy sum over
a noisy size, with NSV's error order and five differences, each on purpose:

- the sum's L2 sensitivity is the ball's radius (adding or removing one
  point of norm <= 1 moves it by <= 1), half NSV's diameter;
- the size is not lowered, so the mean is not pushed outward by m / m_hat;
- the size is one more coordinate of the same Gaussian sum: every point
  adds w = round(2^bits d^(-1/4)) grid units to it (``size_weight``), so
  the released vector's sensitivity is sqrt(S^2 + w^2) and the size's noise
  sd that of a sum coordinate over w. A part's size error moves its mean by
  (error / m) |mean|; with |mean| <= 1 the mean's variance is (1 + c^2)
  (d + 1 / c^2) sd^2 / m^2 for c = w / 2^bits, least at c = d^(-1/4). Until
  2026-11-28 the size was a discrete Laplace at 1/10 of eps (NSV give it
  1/5), pure eps, which composes linearly over a spec's releases where the
  Gaussian composes in zCDP: split over the partition stage's 40 units, its
  variance was 3.7x the whole vector's at d = 6, eps 0.5 (5,689 against
  1,525 per 15 units), and a Lloyd step of fewer units paid it squared
  (tests/bench/results/central_partition.md);
- the vector's (eps, delta) comes from its zCDP bound by Canonne, Kamath and
  Steinke's conversion (``zcdp_delta_tight``), about 18% less noise than
  Bun-Steinke's at eps ~ 1, delta = 1e-6;
- every draw is exact: points are rounded to a public fixed-point grid of
  2^bits per unit, stochastically (floor + Bernoulli(fraction): unbiased;
  nearest rounding moved every point of a tight cluster the same way, a
  bias that no number of releases averages out: the paper generator at
  n = 1e5, d = 100, eps 0.5, whose grid the noise coarsens to 2^-6, lost
  6.6x to it in the central partition stage), and a point whose rounding
  came out longer than 2^bits + sqrt(d) / 2 is rounded to nearest instead
  (at most that long, by the triangle inequality), so the sensitivity, the
  rounded points' norm, stays 2^bits + sqrt(d) / 2 (stochastic rounding's
  own bound, 2^bits + sqrt(d), cost the histogram pipeline up to a quarter
  more noise on coarse grids, and 2% of its draws at n = 1e4, d = 100, eps
  0.5 lost a cluster), the sum and the size get ``shares`` independent
  discrete Gaussians N_Z(0, S) per coordinate (CKS'20 Alg. 3; several
  because one draw's variance is capped at 2^20). A sum of discrete
  Gaussians is not one, so the vector's privacy is Kairouz-Liu-Steinke's
  (ICML'21, Thm. 4) rho-zCDP bound (``distributed_noise.gaussian_rho``,
  over d + 1 coordinates); truncating each draw at T costs (1 + e^eps)
  times the draws' total tail mass in delta.

The parts are disjoint (a public partition), so every part's size and sum
together are one mechanism with one point's sensitivity (parallel
composition). A spec may cover several releases (``releases``, the lift's
Lloyd steps, issue 41): the zCDP rho is split evenly over them, composed
(Bun-Steinke Lemma 2.3, adaptive) and converted to (eps, delta) once, so T
releases of the same partition average back to one release's noise where
T separate (eps/T, delta/T) conversions would lose about 2x for T = 2.

A release may take several of the spec's releases at once (``units``, the
central partition stage's unequal shares, ``kinds/central.py``): its sum and
size are ``units`` unit releases of the same parts added up (units x the
fixed-point vector plus units x shares discrete Gaussians per coordinate:
post-processing of those releases, so their zCDP composition covers it). So a
spec of R releases covers any set of releases whose units add up to at most
R. Pure numpy, no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import sparse

from shoal.common.errors import ConfigError
from shoal.common.mechanisms.distributed_noise import (
    gaussian_clip,
    gaussian_rho,
    gaussian_sigma_sq,
    rho_for_tight,
    zcdp_delta_tight,
)
from shoal.common.mechanisms.exact_sampling import (
    MAX_GAUSSIAN_SIGMA_SQ,
    discrete_gaussian,
    discrete_gaussian_tail,
)

TAIL_SHARE = 1e-3  # of the vector's delta, spent on truncating the Gaussian draws
MIN_SIZE = 1.0  # a part whose noisy size is below this has no mean
MAX_SHARES = 64  # discrete Gaussian draws summed per coordinate at most (``calibrate`` coarsens the grid beyond)
CHUNK = 65536  # rows per fixed-point pass: memory O(CHUNK d), not O(n d)


@dataclass(frozen=True)
class NoisyAverageSpec:
    """Exact noise for the sizes and sums of parts of points in the unit ball of R^dim: each
    point adds its fixed-point coordinates and ``size_weight`` to a part's d + 1 integers."""

    dim: int
    bits: int  # fixed point: 2^bits per unit
    size_weight: int  # what a point adds to its part's size coordinate, in grid units
    sigma_sq: int  # one discrete Gaussian draw's variance parameter
    shares: int  # draws summed per coordinate
    clip: int  # each draw truncated to |z| <= clip
    epsilon: float  # sizes and sums together, over all releases
    delta: float
    releases: int = 1  # releases this budget covers, each drawing the noise above (the lift's steps)

    def __post_init__(self) -> None:
        if (self.dim < 1 or self.bits < 1 or self.shares < 1 or self.size_weight < 1
                or not 1 <= self.sigma_sq <= MAX_GAUSSIAN_SIGMA_SQ):
            raise ConfigError(f"noisy average: dim {self.dim}, bits {self.bits}, size_weight {self.size_weight}, "
                              f"shares {self.shares} must be >= 1 and sigma_sq {self.sigma_sq} in [1, 2^20]")
        if self.releases < 1:
            raise ConfigError(f"noisy average: releases must be >= 1, got {self.releases}")

    @property
    def sensitivity(self) -> float:
        """L2 norm of what one point adds at most, in grid units (``point_sensitivity``)."""
        return point_sensitivity(self.bits, self.dim, self.size_weight)

    @property
    def size_var(self) -> float:
        """Variance of a noisy size of one release (``size_var_at``)."""
        return self.size_var_at(1)

    def size_var_at(self, units: int) -> float:
        """Variance of a noisy size of a release of ``units``: its coordinate's units x shares
        draws over (units x size_weight)^2."""
        return self.shares * self.sigma_sq / (units * self.size_weight**2)

    def sizes_of(self, column: NDArray[np.int64], units: int = 1) -> NDArray[np.float64]:
        """Noisy sizes from a release's size coordinate (``release``): post-processing."""
        return np.asarray(column, dtype=np.float64) / (units * self.size_weight)

    @property
    def sum_sd(self) -> float:
        """Standard deviation of one coordinate of a noisy sum of one release, in the ball's units
        (a release of ``units`` divides it by sqrt(units))."""
        return math.sqrt(self.shares * self.sigma_sq) / 2.0**self.bits

    def mean_variance(self, sizes: NDArray[np.float64], draws: NDArray[np.float64] | float = 1.0,
                      units: int = 1) -> NDArray[np.float64]:
        """The noise variance (summed over coordinates) of a noisy mean of one release's parts of these
        noisy sizes, each adding up ``draws`` released parts: draws (d sd^2 / units + var(size)) / size^2
        (the sum's noise, and the size's, which scales a mean of norm <= 1)."""
        return draws * (self.dim * self.sum_sd**2 / units + self.size_var_at(units)) / np.maximum(sizes, 1.0) ** 2


def point_sensitivity(bits: int, dim: int, weight: int) -> float:
    """L2 norm of what one point adds to its part's d + 1 integers at most, in grid units: its
    rounded coordinates (``fixed_point``: at most 2^bits + sqrt(d) / 2) and its size weight."""
    return math.hypot(2.0**bits + math.sqrt(dim) / 2, weight)


def size_weight(bits: int, dim: int) -> int:
    """The size coordinate's weight, round(2^bits d^(-1/4)) >= 1 (module docstring: the weight that
    makes a mean of norm 1 least noisy)."""
    return max(1, round(2.0**bits * dim**-0.25))


def calibrate(dim: int, epsilon: float, delta: float, releases: int = 1) -> NoisyAverageSpec:
    """The noise for ``releases`` sizes and sums of partitions of points in the unit ball
    (each partition public, or chosen from earlier releases), (epsilon, delta)-DP together."""
    if dim < 1 or not (math.isfinite(epsilon) and epsilon > 0) or not 0 < delta < 1:
        raise ConfigError(f"noisy average needs dim >= 1, eps > 0, delta in (0, 1); got {dim}, {epsilon}, {delta}")
    if not isinstance(releases, int) or releases < 1:
        raise ConfigError(f"noisy average: releases must be an integer >= 1, got {releases!r}")
    # Rounding adds at most sqrt(d)/2 grid units to a point's norm (``fixed_point``): keep it below 1% of 2^bits.
    bits = max(8, math.ceil(math.log2(50 * math.sqrt(dim))))
    vec_delta = delta * (1 - TAIL_SHARE)
    rho = rho_for_tight(epsilon, vec_delta) / releases  # one release's share of the zCDP budget

    def sensitivity(bits: int) -> float:
        return point_sensitivity(bits, dim, size_weight(bits, dim))

    # At a tiny eps the noise dwarfs any grid: a coarser one keeps the draws few (at most MAX_SHARES
    # per coordinate; rounding's sqrt(d) / 2 is in the sensitivity, so privacy holds at every bits).
    while bits > 1 and sensitivity(bits) ** 2 / (2 * rho) > MAX_SHARES * MAX_GAUSSIAN_SIGMA_SQ * 0.9:
        bits -= 1
    sens = sensitivity(bits)
    shares = max(1, math.ceil(sens**2 / (2 * rho) / (MAX_GAUSSIAN_SIGMA_SQ * 0.9)))
    sigma_sq = gaussian_sigma_sq(sens, rho, dim + 1, shares, shares)
    draws = shares * (dim + 1) * releases
    clip = gaussian_clip(sigma_sq, delta * TAIL_SHARE / (2 * draws * (1 + math.exp(epsilon))))
    spec = NoisyAverageSpec(dim, bits, size_weight(bits, dim), sigma_sq, shares, clip, epsilon, delta, releases)
    spent = spent_delta(spec)
    if spent > delta:  # exactly: a spend never exceeds the request
        raise ConfigError(f"noisy average calibration overspent delta: {spent} > {delta}")
    return spec


def spent_delta(spec: NoisyAverageSpec) -> float:
    """The delta the spec actually achieves at its epsilon over all its releases (for the audit of
    ``calibrate``): the rho of the d + 1 coordinates composed over the releases, converted once,
    plus every draw's tail."""
    rho = spec.releases * gaussian_rho(spec.sensitivity, spec.sigma_sq, spec.dim + 1, spec.shares, spec.shares)
    tail = 2 * spec.shares * (spec.dim + 1) * spec.releases * discrete_gaussian_tail(spec.sigma_sq, spec.clip)
    return zcdp_delta_tight(rho, spec.epsilon) + (1 + math.exp(spec.epsilon)) * tail


def stochastic_round(y: NDArray[np.float64], rng: np.random.Generator) -> NDArray[np.int64]:
    """floor(y) + Bernoulli(frac(y)): unbiased, and within one unit of y in every coordinate."""
    low = np.floor(y)
    return (low + (rng.random(y.shape) < y - low)).astype(np.int64)


def fixed_point(x: NDArray[np.float64], bits: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """Points of the unit ball on the public grid of 2^-bits, rounded stochastically (unbiased; the
    curator's own randomness: which way a point rounds is never released on its own), except that
    a point whose rounding is longer than 2^bits + sqrt(d) / 2 grid units is rounded to nearest,
    which is never longer (|rint(y)| <= |y| + sqrt(d) / 2): the sensitivity (``sensitivity``)."""
    y = np.asarray(x, dtype=np.float64) * 2.0**bits
    r = stochastic_round(y, rng)
    # Integers: the squared norm is exact; the limit is rounded down, so a point kept is within the bound.
    limit = math.floor((2.0**bits + math.sqrt(y.shape[-1]) / 2) ** 2 * (1 - 1e-12))
    long = (r * r).sum(axis=-1) > limit
    if long.any():
        r[long] = np.rint(y[long]).astype(np.int64)
    return r


def exact_parts(x: NDArray[np.float64], labels: NDArray[np.int64], parts: int,
                bits: int, rng: np.random.Generator) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Each part's size and fixed-point sum (integers), one sparse product per chunk of rows."""
    sizes = np.bincount(labels, minlength=parts).astype(np.int64)
    sums = np.zeros((parts, x.shape[1]), dtype=np.int64)
    for lo in range(0, x.shape[0], CHUNK):
        lab = labels[lo:lo + CHUNK]
        onehot = sparse.csr_matrix((np.ones(lab.size, dtype=np.int64), (lab, np.arange(lab.size))),
                                   shape=(parts, lab.size))
        sums += np.asarray(onehot @ fixed_point(x[lo:lo + CHUNK], bits, rng), dtype=np.int64)
    return sizes, sums


def release(sizes: NDArray[np.int64], sums: NDArray[np.int64], spec: NoisyAverageSpec,
            rng: np.random.Generator, units: int = 1) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The noisy size coordinates and fixed-point sums (integers: what leaves the curator) of a
    release of ``units`` of the spec's releases: each part's d + 1 integers (its sum, and its size
    times ``size_weight``) ``units`` times over with units x shares discrete Gaussians per
    coordinate. ``spec.sizes_of(column, units)`` reads the sizes."""
    parts = sizes.shape[0]
    if sums.shape != (parts, spec.dim):
        raise ConfigError(f"noisy average: sums have shape {sums.shape}, expected ({parts}, {spec.dim})")
    if isinstance(units, bool) or not isinstance(units, int) or not 1 <= units <= spec.releases:
        raise ConfigError(f"noisy average: a release takes 1 to {spec.releases} units, got {units!r}")
    width = spec.dim + 1
    noise = np.zeros(parts * width, dtype=np.int64)
    for _ in range(spec.shares * units):  # a handful of whole-array draws (shares ~ n_sd^2 / 2^20)
        noise += discrete_gaussian(spec.sigma_sq, spec.clip, parts * width, rng)
    noise = noise.reshape(parts, width)
    column = np.asarray(sizes, dtype=np.int64) * (spec.size_weight * units) + noise[:, spec.dim]
    return column, sums * units + noise[:, :spec.dim]


def noisy_means(x: NDArray[np.float64], labels: NDArray[np.int64], parts: int, spec: NoisyAverageSpec,
                rng: np.random.Generator, units: int = 1) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Each part's private mean (NaN rows where the noisy size is below ``MIN_SIZE``) and noisy size,
    from a release of ``units`` (``release``)."""
    sizes, sums = exact_parts(x, labels, parts, spec.bits, rng)
    column, noisy_sums = release(sizes, sums, spec, rng, units)
    m = spec.sizes_of(column, units)
    ok = m >= MIN_SIZE
    means = np.full((parts, spec.dim), np.nan)
    means[ok] = noisy_sums[ok] / (2.0**spec.bits * units) / m[ok, None]
    return means, np.maximum(m, 0.0)
