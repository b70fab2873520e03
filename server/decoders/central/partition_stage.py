"""The central ``lsh-partition`` algorithm (issue 41): the shuffle model's partition stage, run by the curator.

The shuffle model's first round, where its tree would locate nothing, is a
partition stage (``kinds/partition.py``, ``kinds/refine.py``): a private
mean, each device's bucket under public hyperplanes through that mean, every
bucket's noisy count and sum, k centers of the kept buckets' means, then a
Lloyd step against two candidates per center. Here the curator runs the
same stage on the raw points with one central draw per release (the
shuffle adds a distributed noise per device and pays for the secure sum's
failures), every release a noisy average (``noisy_average.py``) of
``spec.partition``'s units of one zCDP budget:

1. the mean of every point (one part), ``mean_units``;
2. each point's bucket: its sign pattern against ``bits`` hyperplanes from
   the run's seed (``kinds.partition.hyperplanes``) through that mean; every
   bucket's noisy size and sum, ``partition_units``; the buckets whose noisy
   size clears ``NOISE_GATE`` size sds keep their means;
3. k centers of those means (weighted k-means++ and Lloyd, ``START_RESTARTS``
   restarts: post-processing);
4. Lloyd steps in the original space, ``step_units`` each: the first against
   ``split_candidates`` (each center moved both ways along a public
   direction, so a center between two clusters splits them), its 2k parts
   merged back into k clusters (``lift.reduce_parts``) and tested against
   the private mean from the same release (``lift.clusters_beat_the_mean``:
   the answer is the private mean unless the clusters are shown to cost
   less); with 3 steps or more the second splits again
   (``PartitionStage.split_steps``: a bucket may hold three clusters); the
   rest shrunk (``lift.shrunk_lloyd_step``), each weighing the
   last release's noise and carried on along the way the centers still
   creep (``lift.contraction``: Lloyd converges slowly on broad,
   overlapping clusters).

Measured in ``kinds/central.py`` (``STAGE_UNITS``, ``PARTITION_MIN_BITS``).
Pure numpy, no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shoal.common.errors import ConfigError
from shoal.common.kinds.central import CentralSpec, PartitionStage, reference_size_sd
from shoal.common.kinds.partition import NOISE_GATE, hyperplanes, sign_codes
from shoal.common.kinds.refine import SPLIT_LABEL, split_candidates
from shoal.server.decoders.central.lift import (
    Merged,
    clusters_beat_the_mean,
    lloyd_steps,
    parts_of,
    reduce_parts,
)
from shoal.server.decoders.central.noisy_average import NoisyAverageSpec, calibrate, noisy_means
from shoal.server.decoders.kmeans import assign, weighted_kmeans

START_RESTARTS = 30  # k-means++ restarts on the kept buckets' means (a few dozen points: cheap)


@dataclass(frozen=True)
class StageFit:
    """The stage's centers and their noisy sizes, its proxy (the kept buckets' means and
    noisy sizes) and diagnostics."""

    centers: NDArray[np.float64]
    sizes: NDArray[np.float64]
    proxy_points: NDArray[np.float64]
    proxy_weights: NDArray[np.float64]
    diagnostics: dict[str, Any] = field(default_factory=dict)


def _kept(means: NDArray[np.float64], sizes: NDArray[np.float64], avg: NoisyAverageSpec,
          units: int) -> NDArray[np.bool_]:
    """Parts with a mean whose noisy size clears ``NOISE_GATE`` sds of a release of ``units``, the
    size's own or, where larger, the stage's reference sd (``kinds.central.reference_size_sd``)."""
    sd = max(float(np.sqrt(avg.size_var_at(units))), reference_size_sd(avg.epsilon, units, avg.releases))
    gate = max(NOISE_GATE * sd, 1.0)
    return ~np.isnan(means).any(axis=1) & (sizes > gate)


def _in_ball(c: NDArray[np.float64]) -> NDArray[np.float64]:
    return c / np.maximum(np.linalg.norm(c, axis=-1, keepdims=True), 1.0)


def partition_fit(x: NDArray[np.float64], spec: CentralSpec, rng: np.random.Generator) -> StageFit:
    """k centers of ``x`` (n, d) in the unit ball by the partition stage of ``spec`` (its
    ``lift_epsilon``, ``lift_delta`` the whole stage's budget: ``spec.event()`` states it)."""
    stage = spec.partition
    if stage is None:
        raise ConfigError(f"the {spec.algorithm} algorithm has no partition stage")
    avg = calibrate(spec.dim, spec.lift_epsilon, spec.lift_delta, releases=stage.units)
    n = x.shape[0]
    mean, mean_size = noisy_means(x, np.zeros(n, dtype=np.int64), 1, avg, rng, stage.mean_units)
    center = _in_ball(mean[0]) if not np.isnan(mean[0]).any() else np.zeros(spec.dim)
    codes = sign_codes(x, hyperplanes(spec.seed, stage.bits, spec.dim), center)
    means, sizes = noisy_means(x, codes, 1 << stage.bits, avg, rng, stage.partition_units)
    kept = _kept(means, sizes, avg, stage.partition_units)
    pts, w = _in_ball(means[kept]), sizes[kept]
    diagnostics: dict[str, Any] = {"bits": stage.bits, "buckets_kept": int(kept.sum()), "units": stage.units,
                                   "mean": center.tolist(), "mean_size": float(mean_size[0]),
                                   "lift_sum_sd": avg.sum_sd, "lift_steps": stage.steps}
    if pts.shape[0] == 0:  # no bucket cleared the noise: the private mean is the answer
        return StageFit(np.repeat(center[None], spec.k, axis=0), np.zeros(spec.k), pts, w,
                        {**diagnostics, "answer": "private mean", "estimated_gain_over_mean": 0.0})
    start = pts if pts.shape[0] <= spec.k else weighted_kmeans(pts, w, spec.k, rng, restarts=START_RESTARTS)
    # The split step: 2 candidates per center, their parts' noisy sizes and sums merged into k clusters
    # where the data live (``lift.reduce_parts``), kept only where they are shown to beat the private mean
    # from the same release (``lift.clusters_beat_the_mean``; post-processing), then shrunk Lloyd steps
    # that weigh each center's noise (``lift.lloyd_steps`` from the merged clusters' variance).
    merged = _split_step(x, start, spec, stage, avg, rng, 0)
    pays, gain = clusters_beat_the_mean(merged, spec.dim, avg.sum_sd / math.sqrt(stage.step_units))
    diagnostics.update(answer="clusters" if pays else "private mean", estimated_gain_over_mean=gain)
    if merged.sizes.size == 0:
        return StageFit(np.repeat(center[None], spec.k, axis=0), np.zeros(spec.k), pts, w, diagnostics)
    if not pays:  # the private mean, from the same released sums
        mean = merged.sums.sum(0) / max(float(merged.sizes.sum()), 1.0)
        return StageFit(_in_ball(np.repeat(mean[None], spec.k, axis=0)), np.full(spec.k, merged.sizes.sum() / spec.k),
                        pts, w, diagnostics)
    for j in range(1, stage.split_steps):  # a second split moves a spare center onto a pair the first left
        again = _split_step(x, _in_ball(merged.centers), spec, stage, avg, rng, j)
        if again.sizes.size:
            merged = again
    diagnostics["split_steps"] = stage.split_steps
    centers, sizes_k = merged.centers, merged.sizes
    if stage.steps > stage.split_steps:
        step = lloyd_steps(x, centers, avg, rng, stage.steps - stage.split_steps,
                           avg.mean_variance(merged.sizes, merged.draws, stage.step_units), units=stage.step_units,
                           accelerate=True)
        centers, sizes_k = step.centers, step.sizes
        diagnostics["lloyd_step_kept"] = step.lam.tolist()
        diagnostics["lloyd_steps_carried"] = list(step.carried)
    return StageFit(_in_ball(centers), sizes_k, pts, w, diagnostics)


def _split_step(x: NDArray[np.float64], centers: NDArray[np.float64], spec: CentralSpec, stage: PartitionStage,
                avg: NoisyAverageSpec, rng: np.random.Generator, index: int) -> Merged:
    """One split step (a release of the stage's ``step_units``): every center against two candidates
    along a public direction (the stream (seed, ``SPLIT_LABEL``) for the first split, a stream of its
    own for each later one), each candidate's part released, the parts below the noise gate left out
    (a near-empty half's mean is noise, and its noise term, d sd^2 / size, would swamp the test's
    estimate of the saving), the rest merged into k clusters (``lift.reduce_parts``)."""
    label = SPLIT_LABEL if index == 0 else f"{SPLIT_LABEL}/central-{index + 1}"
    cand = split_candidates(centers, 2, spec.seed, label)
    cmeans, csizes = noisy_means(x, assign(x, cand), cand.shape[0], avg, rng, stage.step_units)
    cmeans[~_kept(cmeans, csizes, avg, stage.step_units)] = np.nan
    return reduce_parts(parts_of(cmeans, csizes), spec.k, rng)
