"""The lift's private Lloyd steps (seed 000, Step 4), apart from the cover that feeds them.

Parts of the points in the unit ball release their noisy sizes and sums
(``noisy_average.py``); what is built from those here is post-processing:
parts merged into k clusters where the data live (``reduce_parts``), the
test of the clusters against the private mean (``clusters_beat_the_mean``),
and seed 003's unprojected step, which moves each center only as far as its
noisy mean is worth (``shrunk_lloyd_step``, issue 41). Pure numpy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.stats import chi2

from shoal.server.decoders.central.noisy_average import NoisyAverageSpec, noisy_means
from shoal.server.decoders.kmeans import assign, weighted_kmeans

STEP_GATE = 1e-3  # a shrunk Lloyd step moves a center whose true gap is 0 with this probability (``shrunk_lloyd_step``)


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


def shrunk_lloyd_step(x: NDArray[np.float64], start: NDArray[np.float64], spec: NoisyAverageSpec,
                      rng: np.random.Generator) -> tuple[NDArray[np.float64], NDArray[np.float64],
                                                         NDArray[np.float64]]:
    """One private Lloyd step from ``start`` (released, or public): the points are split by their
    nearest start center, each part's size and sum released (``noisy_means``), and each center moves
    toward its part's noisy mean by the positive-part James-Stein factor lam = 1 - v / gap, where
    gap = |noisy mean - start|^2 and v = (d sd^2 + var(size)) / m^2 the noisy mean's variance given
    the noisy size m (the sum's noise, and the size's, which scales a mean of norm <= 1; E gap = true
    gap + v): the whole step where it is worth much more than its noise. A center moves at all only when gap passes
    a noise gate, the chi-square(d) quantile at 1 - ``STEP_GATE`` times v / d: with no true gap a
    noisy mean far away passes it with probability ``STEP_GATE``, where the factor alone would move
    a third of such centers part of the way toward noise (a cluster of 17 rows at eps 0.3 keeps the
    proxy's center). Post-processing of the release. Returns centers, noisy sizes and each center's lam."""
    means, sizes = noisy_means(x, assign(x, start), start.shape[0], spec, rng)
    d = start.shape[1]
    found = ~np.isnan(means).any(axis=1)
    moved = np.where(found[:, None], np.nan_to_num(means), start)
    gap = ((moved - start) ** 2).sum(axis=1)
    noise = (d * spec.sum_sd**2 + spec.size_var) / np.maximum(sizes, 1.0) ** 2
    passes = found & (gap > float(chi2.isf(STEP_GATE, d)) / d * noise)
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = np.where(passes, np.clip(1.0 - noise / gap, 0.0, 1.0), 0.0)
    return start + lam[:, None] * (moved - start), sizes, lam


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
