"""Seed 001's greedy in the curator model: private ball values, an ordering
of centers that answers every k' <= k, and a private elbow curve (issue 18).

La Tour, Henzinger, Saulpic ("Making old things new", seed 001), Sec. 3
and Alg. 1: Mettu and Plaxton's incremental greedy on balls from public
nets, with the values released privately. shoal's instance (the seed's
copy lost its formulas; every constant below is shoal's and named):

- Nets (Modification 1): level l = 0..L-1 has radius r_l = 2^(1-l) and one
  public randomly shifted grid of side 2 r_l / sqrt(d'); a net point is a
  cell's center, and its cube lies inside the ball B(c, r_l).
- Values (Def. 3.1, generalized summation, Sec. 4): a point p adds
  (1 - |p - c| / r_l)^z in [0, 1] to the ball of the cell that holds it,
  z = 2 for k-means, 1 for k-median; the ball's value is r_l^z times the
  sum. A point counts for the one ball of its own cell per level (the
  seed counts it for every ball within r_l): frequency M = L, so one point
  moves L values by at most 1 each.
- Release: the sums in fixed point (each term stochastically rounded to
  1/Q, unbiased) through the thresholded Gaussian histogram of
  ``common/mechanisms/threshold_histogram.py`` with weight Q and one grid per level:
  only non-empty cells are considered, only cells whose noisy sum passes
  the threshold are released, with their noisy sums. Everything after
  is post-processing.
- Greedy (Alg. 1, Modification 2: noisy values instead of exact ones):
  k times, the available released ball of largest noisy value; then, while
  a released available descendant exists (a ball of a finer level whose
  center is within CHILD r_l), the one of largest value on the nearest
  such level (``greedy_order.py`` says why a level may be skipped); the
  last ball's center
  is the next center, and every ball B(c, r) with |c - s| <= FORBID r is
  forbidden from then on. The centers come out in order: the first k'
  are the answer for k' (Thm. 3.4).
- Lift (projected runs, seed 000 Step 4): the points' parts by nearest of
  the k projected centers, each part's mean by NoisyAVG
  (``noisy_average.py``); the first k' lifted centers answer k'.
- Elbow (Sec. 2, Lemma 2.5's costs from released sums): each point's costs
  to the first k' centers, c_1 >= ... >= c_k >= 0, are released as the
  successive drops (c_1 - c_2, ..., c_{k-1} - c_k, c_k), non-negative and
  summing to c_1 <= D^z (D = 2, the unit ball's diameter): an L1
  sensitivity of D^z for all k costs at once, in fixed point with
  discrete Laplace noise. cost(k') is the sum of the released drops from
  k' on; its band is two standard deviations of that sum's noise.
  The suggested k' is the largest whose drop (cost(k'-1) - cost(k')) is
  at least ELBOW_RATIO of cost(k') and GAIN_SDS noise deviations
  (``server/decoders/elbow.suggest_k``, shared with the shuffle model's
  elbow rounds, whose band is simultaneous over k').
Pure numpy; private draws from ``rng``, public ones from the spec's seed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shoal.common.cost_drops import DIAMETER, Z_OF, point_drops
from shoal.common.errors import ConfigError
from shoal.common.kinds.central import GREEDY_SIDE, CentralSpec, greedy_radii
from shoal.common.mechanisms.exact_sampling import (
    discrete_laplace,
    discrete_laplace_variance,
    laplace_scale_fraction,
)
from shoal.server.decoders.central.grids import Grid, cells, shifted_grids
from shoal.server.decoders.central.histogram import noisy_sums
from shoal.server.decoders.central.noisy_average import calibrate, noisy_means, stochastic_round
from shoal.server.decoders.elbow import suggest_k
from shoal.server.decoders.greedy_order import Balls, greedy_order
from shoal.server.decoders.kmeans import assign

SIDE = GREEDY_SIDE  # a level's cube side is SIDE r / sqrt(d') (common/kinds/central.py)
ELBOW_BITS = 10  # the elbow's fixed point: costs in units of 2^-ELBOW_BITS


@dataclass(frozen=True)
class GreedyFit:
    centers: NDArray[np.float64]  # (k, d) in the unit ball, in the greedy's order
    sizes: NDArray[np.float64]
    elbow: list[dict[str, float]]
    suggested_k: int
    diagnostics: dict[str, Any] = field(default_factory=dict)


def level_grids(spec: CentralSpec) -> list[Grid]:
    """One public shifted grid per level, coarse to fine (cube side SIDE r / sqrt(d'))."""
    public = np.random.default_rng([spec.seed, 3])
    return [shifted_grids(SIDE * r / math.sqrt(spec.proj_dim), spec.proj_dim, 1, public)[0]
            for r in greedy_radii(len(spec.cover.sides))]


def fixed_point_weights(y: NDArray[np.float64], centers: NDArray[np.float64], radius: float, z: int, q: int,
                        rng: np.random.Generator) -> NDArray[np.int64]:
    """Each point's (1 - |p - c| / r)^z clipped to [0, 1], stochastically rounded to
    integers in [0, q]: unbiased (E = q w) and never above q (the cell's sensitivity)."""
    w = np.clip(1.0 - np.linalg.norm(y - centers, axis=1) / radius, 0.0, 1.0) ** z
    return np.minimum(stochastic_round(q * w, rng), q)


def ball_values(y: NDArray[np.float64], spec: CentralSpec, rng: np.random.Generator) -> Balls:
    """Every level's released balls (module docstring, Values and Release)."""
    noise = spec.cover.histogram
    if noise is None or noise.shifts != 1:
        raise ConfigError(f"seed 001's values need a one-grid histogram, got {noise!r}")
    z = Z_OF[spec.objective]
    levels, centers, values = [], [], []
    for level, (grid, r) in enumerate(zip(level_grids(spec), greedy_radii(noise.levels), strict=True)):
        rows, inverse = cells(grid.index(y))
        middle = grid.centers(rows)
        weights = fixed_point_weights(y, middle[inverse], r, z, noise.weight, rng)
        noisy = noisy_sums(np.bincount(inverse, weights=weights, minlength=rows.shape[0]).astype(np.int64), noise, rng)
        ok = noisy >= noise.threshold
        levels.append(np.full(int(ok.sum()), level, dtype=np.int64))
        centers.append(middle[ok])
        values.append(r**z * noisy[ok] / noise.weight)
    return Balls(np.concatenate(levels), np.concatenate(centers), np.concatenate(values))


def elbow_sensitivity(k: int, z: int) -> int:
    """The L1 sensitivity of the fixed-point drop sums: D^z 2^b for the drops plus k,
    since each of a point's k terms rounds up by less than one unit."""
    return math.ceil(DIAMETER**z * (1 << ELBOW_BITS)) + k


def noisy_drops(drops: NDArray[np.float64], z: int, epsilon: float, rng: np.random.Generator) -> NDArray[np.int64]:
    """The private release of the elbow, in units of 2^-ELBOW_BITS: drops (..., n, k) ->
    (..., k) sums of the stochastically rounded drops plus discrete Laplace noise at
    scale sensitivity / epsilon. Leading axes are independent releases (the audit's)."""
    k = drops.shape[-1]
    fixed = stochastic_round(drops * (1 << ELBOW_BITS), rng).sum(axis=-2)
    t, s = laplace_scale_fraction(elbow_sensitivity(k, z), epsilon)
    return fixed + discrete_laplace(t, s, fixed.size, rng).reshape(fixed.shape)


def released_costs(noisy: NDArray[np.int64]) -> NDArray[np.float64]:
    """What the result carries: cost(k') = the sum of the released drops from k' on, as
    doubles. Every value is an integer times 2^-ELBOW_BITS below 2^53 units, so the doubles
    are exact and carry nothing beyond the noisy integers (post-processing)."""
    return np.cumsum(noisy[..., ::-1], axis=-1)[..., ::-1] / float(1 << ELBOW_BITS)


def elbow_curve(x: NDArray[np.float64], centers: NDArray[np.float64], z: int, epsilon: float,
                rng: np.random.Generator) -> tuple[list[dict[str, float]], int]:
    """The private costs of the first k' centers, k' = 1..k, with their bands,
    and the suggested k' (module docstring, Elbow)."""
    k = centers.shape[0]
    noisy = noisy_drops(point_drops(x, centers, z), z, epsilon, rng)
    scale = 1 << ELBOW_BITS
    t, s = laplace_scale_fraction(elbow_sensitivity(k, z), epsilon)
    var = discrete_laplace_variance(t, s) / scale**2
    tail = released_costs(noisy)
    curve = [{"k": j + 1, "cost": float(tail[j]), "band": float(2 * math.sqrt(var * (k - j)))} for j in range(k)]
    return curve, suggest_k(noisy.astype(np.float64) / scale, tail, math.sqrt(var))


def greedy_fit(x: NDArray[np.float64], y: NDArray[np.float64], spec: CentralSpec, rng: np.random.Generator) -> GreedyFit:
    """Seed 001's greedy end to end on ``x`` (unit ball) and its projection ``y``."""
    radii = greedy_radii(len(spec.cover.sides))
    balls = ball_values(y, spec, rng)
    order, depth = greedy_order(balls, spec.k, radii)
    diagnostics: dict[str, Any] = {"released_balls": int(balls.level.size), "proj_dim": spec.proj_dim,
                                   "levels": len(radii), "center_levels": depth,
                                   "value_threshold_points": spec.cover.histogram.threshold / spec.cover.histogram.weight
                                   if spec.cover.histogram else None}
    if spec.lift_steps:
        avg = calibrate(spec.dim, spec.lift_epsilon, spec.lift_delta, releases=spec.lift_steps)  # one release is drawn
        means, sizes = noisy_means(x, assign(y, order), spec.k, avg, rng)
        ok = ~np.asarray(np.isnan(means).any(axis=1))  # an array: means is (k, d)
        # A part too small to average takes the mean of the others (post-processing of released sums).
        fill = (means[ok] * sizes[ok, None]).sum(0) / max(float(sizes[ok].sum()), 1.0) if ok.any() \
            else np.zeros(spec.dim)
        centers = np.where(ok[:, None], np.nan_to_num(means), fill)
        diagnostics["lift_sum_sd"] = avg.sum_sd
    else:  # the greedy's centers live in the data's space; no sizes are released
        centers, sizes = order, np.zeros(spec.k)
    norms = np.linalg.norm(centers, axis=1, keepdims=True)
    centers = centers / np.maximum(norms, 1.0)
    curve, suggested = elbow_curve(x, centers, Z_OF[spec.objective], spec.count_epsilon, rng)
    return GreedyFit(centers, sizes, curve, suggested, diagnostics)
