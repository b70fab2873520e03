"""Seed 001's greedy under continual observation, in the curator model
(issue 18, Build 5; seed 001, Sec. B.3.2 and Lemma B.3).

The curator receives a stream: at every step t = 1..T some points are
inserted and some earlier ones deleted. After each step it releases k
ordered centers and an elbow curve for the population at t. Everything
released is post-processing of three families of binary-tree counters
(``binary_tree.py``): seed 001's generalized sums on every cell of every
level (values), the finest cells' counts (the elbow's coreset) and the
coordinate sums with the count (the private mean). Their sensitivities,
noise and budget split are the round's public parameters and live in
``common/kinds/continual.py`` (event-level DP over the whole release
sequence: pure eps with discrete Laplace nodes, or (eps, delta) with
discrete Gaussian nodes); a point adds (1 - |p - c| / r)^z in fixed point
1/Q to its own cell's ball at every level, as in ``central/greedy.py``.

At step t the balls whose noisy value passes the gate (the Laplace tail
over the level's cells, widened by the nodes summed; post-processing)
feed ``greedy_order``. The released order is the greedy's first k - 1
centers, then the private mean (the one-center answer: the k centers are
never worse than the private one-center answer, by construction; with
no ball past the gate, all k are the mean). The elbow is the coreset's
(``coreset_elbow``: the finest cells' noisy counts past their gate, at
their centers), post-processing too; it is in k-means cost (squared
distances) whatever the round's objective. Deletions use
a fresh stochastic rounding of the item's weight (unbiased; the curator
keeps no per-item state beyond the points it holds). The service drives
this object step by step (``server/rounds/kinds/continual.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shoal.common.errors import ConfigError
from shoal.common.kinds.central import GREEDY_SIDE, greedy_radii
from shoal.common.kinds.continual import (
    MEAN_BITS,
    ContinualEvent,
    ContinualParams,
    Q,
    continual_families,
)
from shoal.common.mechanisms.continual_noise import BinaryTreeGaussian, BinaryTreeNoise
from shoal.server.decoders.central.greedy import Z_OF, fixed_point_weights
from shoal.server.decoders.central.grids import Grid, shifted_grids
from shoal.server.decoders.central.noisy_average import stochastic_round
from shoal.server.decoders.continual.binary_tree import BinaryTree
from shoal.server.decoders.greedy_order import Balls, coreset_elbow, greedy_order

GATE_FALSE = 0.05  # the gate: about this many noise-only balls per step, over all counters


def level_grids(params: ContinualParams) -> list[Grid]:
    """One public shifted grid per level, coarse to fine, from the round's seed."""
    public = np.random.default_rng([params.seed, 5])
    return [shifted_grids(GREEDY_SIDE * r / math.sqrt(params.dim), params.dim, 1, public)[0]
            for r in greedy_radii(params.levels)]


def _flat(grid: Grid, y: NDArray[np.float64]) -> NDArray[np.int64]:
    idx = grid.index(y)
    return np.ravel_multi_index(tuple(idx.T), (grid.per_axis,) * idx.shape[1]).astype(np.int64)


def _all_centers(grid: Grid, dim: int) -> NDArray[np.float64]:
    idx = np.stack(np.unravel_index(np.arange(grid.universe()), (grid.per_axis,) * dim), axis=1)
    return grid.centers(idx)


@dataclass(frozen=True)
class StepRelease:
    step: int
    centers: NDArray[np.float64]  # (k, d): the greedy's first k - 1 in order, then the private mean
    elbow: list[dict[str, float]]
    suggested_k: int
    diagnostics: dict[str, Any] = field(default_factory=dict)


class ContinualGreedy:
    """The curator's state for one continual round: O(log T) noisy sums per counter."""

    def __init__(self, params: ContinualParams, rng: np.random.Generator) -> None:
        self.params, self.rng = params, rng
        self.grids = level_grids(params)
        self.radii = greedy_radii(params.levels)
        self.z = Z_OF[params.objective]
        self.sizes = [g.universe() for g in self.grids]
        if tuple(self.sizes) != params.cells():  # the public count and the grids must agree
            raise ConfigError(f"continual grids have {self.sizes} cells, the round's parameters say {params.cells()}")
        self.values_noise, self.counts_noise, self.mean_noise = continual_families(params)
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)])
        self.cell_centers = [_all_centers(g, params.dim) for g in self.grids]
        self.all_centers = np.concatenate(self.cell_centers)  # every counter's ball center, in counter order
        self.values = BinaryTree(int(self.offsets[-1]), self.values_noise, rng)
        self.counts = BinaryTree(self.sizes[-1], self.counts_noise, rng)
        self.mean = BinaryTree(params.dim + 1, self.mean_noise, rng)

    @property
    def steps(self) -> int:
        """Steps fed so far."""
        return self.values.step_count

    @property
    def event(self) -> ContinualEvent:
        return ContinualEvent(self.params.epsilon, self.params.horizon,
                              (self.values_noise, self.counts_noise, self.mean_noise))

    def _leaves(self, pts: NDArray[np.float64]) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
        """One side's (inserted or deleted) contribution to the three families at this step."""
        values = np.zeros(int(self.offsets[-1]), dtype=np.int64)
        counts = np.zeros(self.sizes[-1], dtype=np.int64)
        for level, (grid, r) in enumerate(zip(self.grids, self.radii, strict=True)):
            ids = _flat(grid, pts)
            w = fixed_point_weights(pts, self.cell_centers[level][ids], r, self.z, Q, self.rng)
            lo = int(self.offsets[level])
            values[lo:lo + self.sizes[level]] += np.bincount(ids, weights=w, minlength=self.sizes[level]).astype(np.int64)
            if level == len(self.grids) - 1:
                counts += np.bincount(ids, minlength=self.sizes[level]).astype(np.int64)
        sums = stochastic_round(pts * (1 << MEAN_BITS), self.rng).sum(0)
        mean = np.concatenate([sums, [pts.shape[0] << MEAN_BITS]]).astype(np.int64)
        return values, counts, mean

    def step(self, inserted: NDArray[np.float64], deleted: NDArray[np.float64]) -> StepRelease:
        """Feed one step (points in the unit ball) and release the centers for the population now."""
        d = self.params.dim
        parts = []
        for pts in (inserted, deleted):
            pts = np.asarray(pts, dtype=np.float64).reshape(-1, d)
            if pts.size and (not np.isfinite(pts).all() or np.linalg.norm(pts, axis=1).max() > 1 + 1e-9):
                raise ConfigError("continual points must be finite and inside the unit ball (the round's bound)")
            parts.append(self._leaves(pts))
        (vi, ci, mi), (vd, cd, md) = parts
        noisy_values = self.values.step(vi - vd)
        noisy_counts = self.counts.step(ci - cd)
        noisy_mean = self.mean.step(mi - md)
        return self._release(noisy_values, noisy_counts, noisy_mean)

    def _gate(self, noise: BinaryTreeNoise | BinaryTreeGaussian, counters: int) -> float:
        return noise.gate(self.values.step_count, counters, GATE_FALSE)

    def _release(self, values: NDArray[np.int64], counts: NDArray[np.int64], mean_sums: NDArray[np.int64]) -> StepRelease:
        p, step = self.params, self.values.step_count
        count = mean_sums[-1] / (1 << MEAN_BITS)
        count_sd = math.sqrt(self.mean_noise.prefix_variance(step)) / (1 << MEAN_BITS)
        mean = mean_sums[:-1] / (1 << MEAN_BITS) / count if count > 3 * count_sd else np.zeros(p.dim)
        mean = mean / max(1.0, float(np.linalg.norm(mean)))
        # Each level's balls compete with their own level's cells (the gate's union is per level).
        gate = np.repeat([self._gate(self.values_noise, size) for size in self.sizes], self.sizes)
        ok = values >= gate
        level = np.searchsorted(self.offsets, np.flatnonzero(ok), side="right") - 1
        centers = self.all_centers[ok]
        balls = Balls(level.astype(np.int64), centers, np.asarray(self.radii)[level] ** self.z * values[ok] / Q)
        if p.k > 1 and balls.level.size:
            order, depth = greedy_order(balls, p.k - 1, self.radii)
            released = np.vstack([order, mean[None, :]])
        else:
            released, depth = np.repeat(mean[None, :], p.k, axis=0), []
        kept = counts >= self._gate(self.counts_noise, self.sizes[-1])
        var = np.full(int(kept.sum()), self.counts_noise.prefix_variance(step))
        curve, suggested = coreset_elbow(self.cell_centers[-1][kept], counts[kept].astype(np.float64), var, released)
        return StepRelease(step, released, curve, suggested,
                           {"balls": int(ok.sum()), "center_levels": depth, "noisy_count": float(count),
                            "elbow_objective": "kmeans",
                            "coreset_cells": int(kept.sum())})
