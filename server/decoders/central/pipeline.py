"""Central k-means by private maximum coverage (seeds 000 and 003), end to end.

``central_kmeans(points, spec, rng)``: the four steps of
``common/kinds/central.py`` on points already in the unit ball. Public
randomness (the projection, the grids' shifts) comes from ``spec.seed``
only; every private draw (the exponential mechanism, the empty cell it may
pick, the counts, the lift) from ``rng``, which the caller seeds from the
OS. Batch-first: each level costs a few whole-array passes (cell indices,
one ``np.unique``, one sparse incidence) and one exponential mechanism per
pick; memory is O(n d') plus one level's non-empty cells. Pure numpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import sparse
from scipy.spatial import cKDTree

from shoal.common.errors import ConfigError
from shoal.common.kinds.central import CentralSpec, CuratorEvent, curator_guarantee
from shoal.common.mechanisms.exact_sampling import discrete_laplace, laplace_scale_fraction
from shoal.common.privacy.threats import curator_guarantee as curator_guarantee_words
from shoal.server.decoders.central.greedy import greedy_fit
from shoal.server.decoders.central.grids import (
    Occupied,
    cells,
    project,
    projection,
    random_cell,
    shifted_grids,
)
from shoal.server.decoders.central.histogram import histogram_level
from shoal.server.decoders.central.lift import (
    clusters_beat_the_mean,
    lloyd_steps,
    parts_of,
    reduce_parts,
)
from shoal.server.decoders.central.maxcover import private_max_coverage
from shoal.server.decoders.central.noisy_average import calibrate, noisy_means
from shoal.server.decoders.central.partition_stage import partition_fit
from shoal.server.decoders.kmeans import assign, weighted_kmeans
from shoal.server.decoders.kmedian import weighted_kmedian

# Proxy cells whose noisy count is below ln(JUNK * |C|) / eps_count are dropped
# (post-processing): an empty cell survives with probability <= 1 / (JUNK |C|).
JUNK = 20
PARTS_PER_CENTER = 2  # the lift's first step takes at most this many parts per center (``central_kmeans``)
# Seed 003 unprojected: k-means++ restarts on the proxy for the Lloyd steps' start (the proxy holds a few
# dozen cells, so they cost little; the steps cannot leave a poor local optimum: the overlapping set
# eps 1 / 4, 10 seeds: 0.0784 / 0.0766 with 5, 0.0782 / 0.0762 with 30).
START_RESTARTS = 30


@dataclass(frozen=True)
class CentralFit:
    """What a central run releases: centers and sizes in the unit ball's space,
    the private proxy (coreset) in the projected space, and diagnostics."""

    centers: NDArray[np.float64]
    sizes: NDArray[np.float64]
    proxy_points: NDArray[np.float64]
    proxy_weights: NDArray[np.float64]
    lift_steps: int
    diagnostics: dict[str, Any] = field(default_factory=dict)
    elbow: list[dict[str, float]] | None = None  # greedy-001: private cost of the first k' centers, k' = 1..k
    suggested_k: int | None = None  # greedy-001: the elbow rule's k' (``greedy.elbow_curve``)


def _level(y: NDArray[np.float64], alive: NDArray[np.int64], side: float, spec: CentralSpec,
           public: np.random.Generator, rng: np.random.Generator) -> tuple[list[NDArray[np.float64]], NDArray[np.int64], int]:
    """One grid side: the greedy's picks (cell centers) and the points they newly cover."""
    grids = shifted_grids(side, spec.proj_dim, spec.cover.shifts, public)
    sub = y[alive]
    set_ids, centers, taken, base = [], [], [], 0
    for g in grids:
        rows, inverse = cells(g.index(sub))
        set_ids.append(inverse + base)
        centers.append(g.centers(rows))
        taken.append(rows)
        base += rows.shape[0]
    m = sub.shape[0]
    incidence = sparse.csr_matrix(
        (np.ones(m * len(grids), dtype=np.int64), (np.concatenate(set_ids), np.tile(np.arange(m), len(grids)))),
        shape=(base, m))
    empty = sum(g.universe() for g in grids) - base
    cover = private_max_coverage(incidence, np.ones(m, dtype=bool), spec.cover.picks, spec.cover.beta, rng,
                                 empty_sets=empty)
    all_centers = np.concatenate(centers)
    occupied = [Occupied.of(rows) for rows in taken] if (cover.picked < 0).any() else []  # only for the block
    picks = [all_centers[j] if j >= 0 else random_cell(grids, occupied, rng) for j in cover.picked]
    return picks, alive[cover.covered], int(np.count_nonzero(cover.picked >= 0))


def candidates(y: NDArray[np.float64], spec: CentralSpec,
               rng: np.random.Generator) -> tuple[NDArray[np.float64], NDArray[np.float64], int]:
    """Step 2: the chosen cell centers over every level, fine to coarse, each
    level covering only points no finer level covered; each one's cell side;
    and how many of the picks were non-empty cells."""
    public = np.random.default_rng([spec.seed, 2])  # the shifts: public, apart from the projection's stream
    left = np.ones(y.shape[0], dtype=bool)
    chosen: list[NDArray[np.float64]] = []
    sides: list[float] = []
    useful = 0
    for side in spec.cover.sides:
        if spec.cover.histogram is not None:  # gridhist: every cell that passes the threshold
            cells_found, newly = histogram_level(y, np.flatnonzero(left), side, spec.cover.histogram, public, rng)
            picks, hits = list(cells_found), cells_found.shape[0]
        else:
            picks, newly, hits = _level(y, np.flatnonzero(left), side, spec, public, rng)
        chosen.extend(picks)
        sides.extend([side] * len(picks))
        left[newly] = False
        useful += hits
    if not chosen:  # the histogram released no cell (too few points for eps): one public cell, the whole cube
        chosen, sides = [np.zeros(spec.proj_dim)], [2.0]
    return np.array(chosen).reshape(-1, spec.proj_dim), np.array(sides), useful


def proxy(y: NDArray[np.float64], cand: NDArray[np.float64], spec: CentralSpec,
          rng: np.random.Generator) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]]:
    """Step 3: every point moved to its nearest candidate; the counts with
    discrete Laplace noise (L1 sensitivity 1); cells below the junk threshold dropped."""
    nearest = cKDTree(cand).query(y)[1] if cand.shape[0] > 64 else assign(y, cand)
    counts = np.bincount(nearest, minlength=cand.shape[0]).astype(np.int64)
    t, s = laplace_scale_fraction(1, spec.count_epsilon)
    noisy = (counts + discrete_laplace(t, s, cand.shape[0], rng)).astype(np.float64)
    keep = noisy >= math.log(JUNK * cand.shape[0]) * t / s
    if not keep.any():
        keep = noisy > 0
    return cand[keep], noisy[keep], keep


def central_kmeans(x: NDArray[np.float64], spec: CentralSpec, rng: np.random.Generator) -> CentralFit:
    """k centers of ``x`` (n, d) in the unit ball, (spec.epsilon, spec.delta)-DP for the curator's release."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != spec.dim:
        raise ConfigError(f"central k-means: points must be (n, {spec.dim}), got shape {x.shape}")
    if x.shape[0] == 0:
        raise ConfigError("central k-means: no points")
    if spec.algorithm == "lsh-partition":  # the shuffle model's partition stage, central (``partition_stage.py``)
        p = partition_fit(x, spec, rng)
        return _finish(p.centers, p.sizes, p.proxy_points, p.proxy_weights, spec.lift_steps, spec.k, p.diagnostics)
    matrix = projection(spec.dim, spec.proj_dim, np.random.default_rng([spec.seed, 1]))
    y = project(x, matrix)
    if spec.algorithm == "greedy-001":  # seed 001: its own pipeline (``greedy.py``), no proxy
        g = greedy_fit(x, y, spec, rng)
        return CentralFit(g.centers, g.sizes, np.zeros((0, spec.proj_dim)), np.zeros(0), spec.lift_steps,
                          g.diagnostics, g.elbow, g.suggested_k)
    cand, sides, useful = candidates(y, spec, rng)
    pts, w, keep = proxy(y, cand, spec, rng)
    diagnostics: dict[str, Any] = {"candidates": int(cand.shape[0]), "nonempty_picks": useful,
                                   "proxy_points": int(pts.shape[0]), "proxy_mass": float(w.sum()),
                                   "proj_dim": spec.proj_dim, "levels": len(spec.cover.sides),
                                   "finest_proxy_side": float(sides[keep].min()) if keep.any() else None}
    if pts.shape[0] == 0:
        return CentralFit(np.zeros((spec.k, spec.dim)), np.zeros(spec.k), pts, w, spec.lift_steps,
                          diagnostics)
    steps = spec.lift_steps
    diagnostics["lift_steps"] = steps
    if steps == 0:  # the proxy's centers are the answer (seed 003 unprojected for k-median, or lift_steps=0)
        s2 = (weighted_kmedian if spec.objective == "kmedian" else weighted_kmeans)(pts, w, spec.k, rng)
        sizes = np.bincount(assign(pts, s2), weights=w, minlength=s2.shape[0]).astype(np.float64)
        centers = s2
    else:
        # One noise spec for all the lift's releases: the sums' zCDP budget split over the steps and
        # composed back (``calibrate(releases=steps)``), so a step that repeats a converged partition
        # costs the answer no precision (``shrunk_lloyd_step`` averages the two releases).
        avg = calibrate(spec.dim, spec.lift_epsilon, spec.lift_delta, releases=steps)
        diagnostics["lift_sum_sd"] = avg.sum_sd
        # Step 1: the proxy's cells, grouped into at most PARTS_PER_CENTER k parts in the projected space
        # (each part's sum is one noise draw, and a cluster adds up its parts' draws), lifted, then
        # reduced to k in the original space. Seed 003 unprojected: the proxy already lives in the
        # original space and no projection can have merged two clusters, so every step is a Lloyd step
        # from its k centers, each moved only as far as its noisy mean is estimated to be worth
        # (``shrunk_lloyd_step``). Issue 41: on broad, overlapping clusters the cover's cells alone
        # answered 1.27x diffprivlib's noisy Lloyd at eps 1 (0.101 against 0.079), one step 0.083,
        # three steps at the composed budget 0.079 (tests/bench/results/central_lift.md). Forced
        # maxcover-000 and gridhist keep their 2k parts unprojected too (k groups measured 1-5% worse
        # there on 5 seeds).
        if spec.algorithm == "maxcover-003" and spec.proj_dim == spec.dim:
            centers = pts if pts.shape[0] <= spec.k else weighted_kmeans(pts, w, spec.k, rng, restarts=START_RESTARTS)
            diagnostics["lift_parts"] = int(centers.shape[0])
            step = lloyd_steps(x, centers, avg, rng, steps)
            diagnostics["lloyd_step_kept"] = step.lam.tolist()  # no test against the private mean: uncertified
            return _finish(step.centers, step.sizes, pts, w, steps, spec.k, diagnostics)
        groups = pts if pts.shape[0] <= PARTS_PER_CENTER * spec.k else weighted_kmeans(
            pts, w, PARTS_PER_CENTER * spec.k, rng)
        diagnostics["lift_parts"] = int(groups.shape[0])
        means, part_sizes = noisy_means(x, assign(y, groups), groups.shape[0], avg, rng)
        merged = reduce_parts(parts_of(means, part_sizes), spec.k, rng)
        clusters_pay, gain = clusters_beat_the_mean(merged, spec.dim, avg.sum_sd)
        diagnostics["answer"] = "clusters" if clusters_pay else "private mean"
        diagnostics["estimated_gain_over_mean"] = gain
        centers, sizes = merged.centers, merged.sizes
        if merged.sizes.size == 0:
            centers, sizes = np.zeros((1, spec.dim)), np.zeros(1)
        elif not clusters_pay:  # the private mean, from the same released sums: post-processing
            mean = merged.sums.sum(0) / max(float(merged.sizes.sum()), 1.0)
            centers, sizes = mean[None, :], np.array([float(merged.sizes.sum())])
        elif steps > 1:  # Lloyd steps in the original space from the certified clusters (their budget is spent either way)
            step = lloyd_steps(x, centers, avg, rng, steps - 1, avg.mean_variance(merged.sizes, merged.draws))
            centers, sizes = step.centers, step.sizes
    return _finish(centers, sizes, pts, w, steps, spec.k, diagnostics)


def _finish(centers: NDArray[np.float64], sizes: NDArray[np.float64], pts: NDArray[np.float64],
            w: NDArray[np.float64], steps: int, k: int, diagnostics: dict[str, Any]) -> CentralFit:
    """k centers in the unit ball: fewer than k repeat the largest part's center."""
    if centers.shape[0] < k:
        pad = np.repeat(centers[[int(np.argmax(sizes))]], k - centers.shape[0], axis=0)
        centers, sizes = np.vstack([centers, pad]), np.concatenate([sizes, np.zeros(k - sizes.shape[0])])
    norms = np.linalg.norm(centers, axis=1, keepdims=True)
    centers = centers / np.maximum(norms, 1.0)
    return CentralFit(centers, sizes, pts, w, steps, diagnostics)


_COVER_WORDS = {
    "seed003-lemma6": "exponential mechanism per pick (exact), greedy maximum coverage",
    "threshold-gaussian": "thresholded histogram of grid cells per level (exact discrete Gaussian counts, only the "
                          "cells that pass are released)",
    "seed001-values": "seed 001's ball values: each point's weight (1 - |p - c| / r)^z in fixed point summed per "
                      "net ball and level, exact discrete Gaussian noise, only the balls that pass the threshold "
                      "are released, with their noisy values",
    "lift-units": "public hyperplanes from the seed through a released mean; every bucket's noisy size and sum "
                     "released as units of the lift's budget (nothing spent here)",
}


def _lift_words(event: CuratorEvent, spec: CentralSpec) -> str:
    """What the lift's one (eps, delta) covers."""
    sizes_sums = ("each part's sum and weighted size one vector with discrete Gaussian noise (parallel over parts; "
                  "its zCDP split over the releases and composed, converted to (eps, delta) once)")
    stage = spec.partition
    if stage is None:
        return f"{event.lift_steps} private Lloyd step(s): {sizes_sums}"
    return (f"{stage.units} units of one noisy-average budget: the mean of every point ({stage.mean_units}), the "
            f"{1 << stage.bits} buckets' sizes and sums ({stage.partition_units}), {stage.steps} Lloyd step(s) of "
            f"{stage.step_units} each (the first {stage.split_steps} against two candidates per center, reduced to k); "
            f"a release of m units is m unit releases summed; {sizes_sums}")


def privacy_statement(spec: CentralSpec, steps: int | None = None) -> dict[str, Any]:
    """A run's privacy statement, built from its event record (``curator_guarantee``)."""
    event = spec.event(steps)
    eps, delta = curator_guarantee(event)
    return {
        "model": "central",
        "algorithm": spec.algorithm,
        "objective": spec.objective,
        "central_epsilon": eps,
        "delta": delta,
        "neighbours": "add or remove one point",
        "device_epsilon": None,
        "device_epsilon_note": "central model: the curator sees raw points; no local guarantee",
        "guarantees": [curator_guarantee_words(eps, delta)],
        "parts": {
            "census": {"epsilon": event.census_epsilon, "mechanism": "discrete Laplace count of n"}
            if event.census_epsilon else {"epsilon": 0.0, "mechanism": "n given as public"},
            "cover": {"epsilon": event.cover_epsilon, "delta": event.cover_delta, "rule": event.cover_rule,
                      "mechanism": _COVER_WORDS[event.cover_rule]},
            "counts": {"epsilon": event.count_epsilon, "mechanism": "none: the buckets' noisy sizes are the lift's"}
            if event.cover_rule == "lift-units" else
            {"epsilon": event.count_epsilon, "mechanism": "discrete Laplace, L1 sensitivity 1"}
            if event.cover_rule != "seed001-values" else
            {"epsilon": event.count_epsilon, "mechanism": "elbow curve: each point's cost drops to the first k' "
             "centers (L1 sensitivity D^z for all k' at once), fixed point, discrete Laplace"},
            "lift": [{"epsilon": e, "delta": d, "steps": spec.lift_steps, "releases": event.lift_steps,
                      "mechanism": _lift_words(event, spec)}
                     for e, d in zip(event.lift_epsilons, event.lift_deltas, strict=True)],
        },
        "composition": "basic, over census, cover, counts and the lift",
    }
