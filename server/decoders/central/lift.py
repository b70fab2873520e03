"""The lift's private Lloyd steps (seed 000, Step 4), apart from the cover that feeds them.

Parts of the points in the unit ball release their noisy sizes and sums
(``noisy_average.py``); what is built from those here is post-processing:
parts merged into k clusters where the data live (``reduce_parts``), the
test of the clusters against the private mean (``clusters_beat_the_mean``),
and the Lloyd steps after them, which move each center only as far as its
noisy mean is worth and average repeated measurements of a converged one
(``shrunk_lloyd_step``, issue 41), and, where the centers still creep the
same way step after step, carry each step on along that way
(``contraction``, ``lloyd_steps(accelerate=True)``). Pure numpy.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray
from scipy.stats import chi2

from shoal.server.decoders.central.noisy_average import NoisyAverageSpec, noisy_means
from shoal.server.decoders.combined_steps import combine_factor
from shoal.server.decoders.kmeans import assign, weighted_kmeans

STEP_GATE = 1e-3  # a shrunk Lloyd step moves a center whose true gap is 0 with this probability (``shrunk_lloyd_step``)
# The largest contraction ratio an accelerated step extrapolates by (``contraction``): a step carried on
# by 1 / (1 - rho) <= 4 times its move; and the test it must pass first. Measured with the partition
# stage (``partition_stage.py``, tests/bench/central_partition.py's harness; cost / n, eps 0.5 / 1 / 2 /
# 4): the overlapping generator (10 data seeds x 3 draws, non-private 0.07473) without 0.07728 / 0.07629
# / 0.07574 / 0.07563, with 0.07728 / 0.07604 / 0.07548 / 0.07542 (eps 0.5 takes 2 steps: none to carry
# on); at 2 sds 0.07595 / 0.07547 / 0.07539 at eps 1 / 2 / 4, but the paper generator's tight clusters
# paid for it where they take 4-7 steps (n = 1e4, d = 6, eps 4, 3 x 4: 2.256e-4 -> 2.312e-4; n = 1e5,
# d = 5, eps 1, 2 x 3: 1.283e-4 -> 1.322e-4), at 3 sds they are as without (2.256e-4, 1.283e-4), at 4
# the overlapping set keeps a tenth of its gain at eps 1 and two fifths at eps 4 (0.07625, 0.07553). Letter takes 2 steps (unchanged); a cap of 0.9 was
# worse at eps 1 than 0.75 (3 seeds: 0.07669 against 0.07651).
CONTRACTION_CAP = 0.75
CONTRACTION_SDS = 3.0  # ... and only one that clears this many sds of its value were the moves unrelated


@dataclass(frozen=True)
class Merged:
    """Released parts merged into clusters: each cluster's noisy sum and size,
    and how many parts (independent noise draws) its sum adds up."""

    sums: NDArray[np.float64]
    sizes: NDArray[np.float64]
    draws: NDArray[np.float64]

    @property
    def centers(self) -> NDArray[np.float64]:
        return self.sums / np.maximum(self.sizes, 1.0)[:, None]


def parts_of(means: NDArray[np.float64], sizes: NDArray[np.float64]) -> Merged:
    """The parts that have a mean, each its own cluster."""
    ok = ~np.isnan(means).any(axis=1) & (sizes >= 1)
    return Merged(means[ok] * sizes[ok, None], sizes[ok], np.ones(int(ok.sum())))


def reduce_parts(parts: Merged, k: int, rng: np.random.Generator) -> Merged:
    """k clusters of the lifted parts, in the original space (weighted k-means on
    their noisy means, then each cluster's parts merged): post-processing. Seed
    001's "k' > k, then reduce": the proxy's cells are clustered where the data
    live, so two clusters the projection brought together are told apart, and a
    cell holding part of a cluster joins its cluster."""
    if parts.sizes.size <= k:
        return parts
    c = weighted_kmeans(parts.centers, parts.sizes, k, rng)
    lab = assign(parts.centers, c)
    m = c.shape[0]
    sums = np.zeros((m, parts.sums.shape[1]))
    np.add.at(sums, lab, parts.sums)
    return Merged(sums, np.bincount(lab, weights=parts.sizes, minlength=m).astype(np.float64),
                  np.bincount(lab, weights=parts.draws, minlength=m).astype(np.float64))


@dataclass(frozen=True)
class LloydStep:
    """A private Lloyd step's centers, the noisy sizes of the parts it averaged, each center's
    factor lam (the fraction of the way it moved toward its part's noisy mean), the noise
    variance left in each center (NaN: still the start's center, which is no noisy mean),
    each noisy mean's variance and, from ``lloyd_steps``, the factor each step after the first
    was carried on by, in order (1: not at all)."""

    centers: NDArray[np.float64]
    sizes: NDArray[np.float64]
    lam: NDArray[np.float64]
    var: NDArray[np.float64]
    noise: NDArray[np.float64]
    carried: tuple[float, ...] = ()


def shrunk_lloyd_step(x: NDArray[np.float64], start: NDArray[np.float64], spec: NoisyAverageSpec,
                      rng: np.random.Generator, start_var: NDArray[np.float64] | None = None,
                      units: int = 1) -> LloydStep:
    """One private Lloyd step from ``start`` (released, or public): the points are split by their
    nearest start center, each part's size and sum released (``noisy_means``, one of the spec's
    releases), and each center moves toward its part's noisy mean m by a factor lam. With v = (d sd^2 +
    var(size)) / size^2 the noisy mean's variance (the sum's noise, and the size's, which scales a mean
    of norm <= 1) and gap = |m - start|^2:

    - a start center that is no noisy mean (``start_var`` NaN, or no ``start_var``: the proxy's) takes
      the positive-part James-Stein factor lam = 1 - v / gap, and moves at all only when gap passes a
      noise gate, the chi-square(d) quantile at 1 - ``STEP_GATE`` times v / d: with no true gap a noisy
      mean far away passes it with probability ``STEP_GATE``, where the factor alone would move a third
      of such centers part of the way toward noise (a cluster of 17 rows at eps 0.3 keeps the proxy's);
    - a start center that is an earlier step's noisy mean, with noise variance w, combines the two
      measurements (``combined_steps.combine_factor``): lam = A / (A + v) with A = max(gap - v, w) the estimated |drift|^2 + w (E gap =
      |drift|^2 + w + v), the estimator c + lam (m - c) of the part's mean with the least squared
      error under that estimate. Where Lloyd has converged (drift 0) it is the inverse-variance
      average of the two releases (with the releases' zCDP composition, ``calibrate(releases=T)``, as
      precise as one release at the whole budget); where the center still travels, lam -> 1. Its
      variance afterwards: lam v.

    Post-processing of the release (issue 41: broad, overlapping clusters converge over several
    steps, tight ones after one, and this step costs the tight ones no precision). The release takes
    ``units`` of the spec's releases (``noisy_average.release``)."""
    means, sizes = noisy_means(x, assign(x, start), start.shape[0], spec, rng, units)
    d = start.shape[1]
    prior = np.full(start.shape[0], np.nan) if start_var is None else np.asarray(start_var, dtype=np.float64)
    found = ~np.asarray(np.isnan(means).any(axis=1))  # an array: means is (k, d)
    moved = np.where(found[:, None], np.nan_to_num(means), start)
    gap = ((moved - start) ** 2).sum(axis=1)
    noise = spec.mean_variance(sizes, units=units)
    fresh = np.isnan(prior)
    passes = found & (gap > float(chi2.isf(STEP_GATE, d)) / d * noise)
    with np.errstate(divide="ignore", invalid="ignore"):
        shrink = np.where(passes, np.clip(1.0 - noise / gap, 0.0, 1.0), 0.0)
    combine = np.where(found, combine_factor(gap, noise, np.nan_to_num(prior)), 0.0)
    lam = np.where(fresh, shrink, combine)
    var = np.where(lam > 0, lam * noise, prior)
    return LloydStep(start + lam[:, None] * (moved - start), sizes, lam, var, noise)


def contraction(last_move: NDArray[np.float64], move: NDArray[np.float64], cap: float = CONTRACTION_CAP) -> float:
    """The ratio rho by which a step's moves (k, d) shrink from the last step's, pooled over the
    centers: sum_j <move_j, last_j> / sum_j |last_j|^2, at most ``cap``; 0 unless it exceeds
    ``CONTRACTION_SDS`` times its sd were the two moves unrelated (and 0 without a last move).

    Near a fixed point Lloyd's map shrinks each center's error by about the same ratio each step,
    and on broad, overlapping clusters that ratio is close to 1: the centers creep the same way for
    tens of steps (from the partition stage's answer on the overlapping generator at eps 4, 10 exact
    steps remove a third of its excess cost, 100 nearly all). Where the moves shrink by rho a step,
    the rest of the way is rho / (1 - rho) times the last move (Aitken's delta-squared extrapolation
    of a linearly convergent sequence), pooled over the centers so that no one center's noise sets
    it. A converged center's moves are noise, and a chain of combined steps (each averaging its
    release with the last, ``combined_steps``) moves the same way by chance about half the time:
    without the test, 2 tight clusters started at their means plus a release's noise and taken 4
    steps were carried on in 62% of the steps and ended with 1.9x the squared error (0.155 v
    against 0.083 v); with it, in none (900 steps), while the overlapping generator keeps most of
    its gain (``CONTRACTION_SDS``). Post-processing of released values."""
    den = float((last_move**2).sum())
    if not den > 0:
        return 0.0
    rho = float((move * last_move).sum()) / den
    # The ratio's sd were the moves independent, isotropic: Var <a, b> = |a|^2 |b|^2 / d per center.
    null_sd = float(np.sqrt(((move**2).sum(1) * (last_move**2).sum(1)).sum() / last_move.shape[1])) / den
    return min(rho, cap) if rho > CONTRACTION_SDS * null_sd else 0.0


def lloyd_steps(x: NDArray[np.float64], start: NDArray[np.float64], spec: NoisyAverageSpec,
                rng: np.random.Generator, steps: int, start_var: NDArray[np.float64] | None = None,
                units: int = 1, accelerate: bool = False) -> LloydStep:
    """``steps`` >= 1 private Lloyd steps (``shrunk_lloyd_step``, each a release of ``units``), each
    from the last one's centers and their noise variance: the last step's result.

    With ``accelerate`` every step after the first is carried on by 1 / (1 - rho), rho the pooled
    ``contraction`` of its move against the last step's (as carried): each center c + g (m - c) with
    g = lam / (1 - rho), its noise variance then (1 - g)^2 w + g^2 v (w the start's, v the noisy
    mean's). Only the partition stage takes it (``partition_stage.py``, where it was measured:
    ``CONTRACTION_CAP``); the other lifts take at most Su et al.'s count from cells or a projection,
    not measured with it."""
    step = shrunk_lloyd_step(x, start, spec, rng, start_var, units)
    last_move = step.centers - start
    carried: list[float] = []
    for _ in range(steps - 1):
        here, here_var = step.centers, step.var
        step = shrunk_lloyd_step(x, here, spec, rng, here_var, units)
        move = step.centers - here
        factor = 1.0 / (1.0 - contraction(last_move, move)) if accelerate else 1.0
        if factor > 1:
            go = factor * step.lam
            var = np.where(step.lam > 0, (1 - go) ** 2 * np.nan_to_num(here_var) + go**2 * step.noise, step.var)
            move = factor * move
            step = LloydStep(here + move, step.sizes, go, var, step.noise)
        carried.append(factor)
        last_move = move
    return replace(step, carried=tuple(carried))


def clusters_beat_the_mean(merged: Merged, dim: int, sd: float) -> tuple[bool, float]:
    """Whether the clusters' means are estimated to cost less than one center at
    the mean, from released values only (the parts' noisy sums and sizes).

    With S_j, m_j a cluster's sum and size (adding up q_j noisy parts) and S, m
    the totals (Q parts), the cost saved by the clusters' means over the mean is
    sum_j |S_j|^2 / m_j - |S|^2 / m; the noise inflates the first term by
    sum_j q_j d sd^2 / m_j and the second by Q d sd^2 / m, and the noisy means
    cost that much again against exact ones. Keep the clusters only when the
    corrected saving exceeds that extra noise: the structural form of "never
    worse than the private one-center answer" (a missed cluster merged into a
    neighbour, or n too small for eps)."""
    if merged.sizes.size == 0:
        return False, 0.0
    m, total = merged.sizes, float(merged.sizes.sum())
    noise_parts = float(np.sum(merged.draws * dim * sd**2 / m))
    noise_mean = float(merged.draws.sum()) * dim * sd**2 / total
    saving = float(np.sum((merged.sums**2).sum(1) / m)) - float((merged.sums.sum(0) ** 2).sum()) / total
    gain = saving - 2 * (noise_parts - noise_mean)
    return gain > 0, gain / total
