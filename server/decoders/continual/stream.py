"""Seed 001's greedy under continual observation, in the curator model
(issue 18, Build 5; seed 001, Sec. B.3.2 and Lemma B.3).

The curator receives a stream: at every step t = 1..T some points are
inserted and some earlier ones deleted. After each step it releases k
ordered centers and an elbow curve for the population at t. Everything
released is post-processing of three families of binary-tree counters
(``binary_tree.py``), so the whole sequence of releases is pure eps-DP
at event level (``delta = 0``: discrete Laplace nodes, L1 sensitivities
below), or (eps, delta)-DP with discrete Gaussian nodes calibrated by zCDP
to the L2 sensitivities (``delta > 0``: noise grows with sqrt(height L)
instead of height L): neighbouring streams differ by one item's insertion
(and possibly its later deletion), which is one device's point over the
round. The budget (eps, and delta) is split over the families by basic
composition.

- values (share VALUE_SHARE of eps): seed 001's generalized sums over the
  greedy's nets, as in ``central/greedy.py`` (one public shifted grid per
  level, radius 2^(1-l), a point adds (1 - |p - c| / r)^z in fixed point
  1/Q to its own cell's ball), one counter per cell of every level: the
  domain is dense (noise on empty balls too, as the continual model needs),
  so the round is for low dimension (``MAX_COUNTERS``). An item moves L
  counters by at most Q at its insertion and at its deletion, each in
  ``height`` released nodes: L1 sensitivity 2 height L Q.
- counts (COUNT_SHARE): the number of points per cell of the finest grid,
  2 height; the elbow's coreset.
- mean (the rest): the coordinate sums in fixed point 2^-MEAN_BITS and the
  count, one (d + 1)-vector counter: L1 2 height (ceil(sqrt(d) 2^b) + d + 2^b).

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
keeps no per-item state beyond the points it holds).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shoal.common.central_round import greedy_radii
from shoal.common.errors import ConfigError
from shoal.server.decoders.central.greedy import SIDE, Z_OF, fixed_point_weights, stochastic_round
from shoal.server.decoders.central.grids import Grid, shifted_grids
from shoal.server.decoders.continual.binary_tree import (
    BinaryTree,
    BinaryTreeGaussian,
    BinaryTreeNoise,
    tree_height,
)
from shoal.server.decoders.greedy_order import Balls, coreset_elbow, greedy_order

Q = 16  # a point's weight in a ball, in units of 1 / Q (as the curator greedy's GREEDY_Q)
MEAN_BITS = 8  # the mean's coordinate sums in units of 2^-MEAN_BITS
VALUE_SHARE, COUNT_SHARE = 0.6, 0.2  # of epsilon; the mean takes the rest
MAX_COUNTERS = 1 << 22  # cells over all levels (dense domain: every cell gets noise at every node)
GATE_FALSE = 0.05  # the gate: about this many noise-only balls per step, over all counters
MAX_DIM = 8


@dataclass(frozen=True)
class ContinualParams:
    """A continual round: dimension, k, event-level epsilon, horizon T, net levels, objective, public seed."""

    dim: int
    k: int
    epsilon: float
    horizon: int
    levels: int = 6
    objective: str = "kmeans"
    seed: int = 0
    delta: float = 0.0  # 0: pure eps (Laplace nodes); > 0: (eps, delta) with discrete Gaussian nodes

    def __post_init__(self) -> None:
        if not 1 <= self.dim <= MAX_DIM:
            raise ConfigError(f"a continual round keeps a dense net per level: dim must be in [1, {MAX_DIM}], "
                              f"got {self.dim}")
        if self.k < 1:
            raise ConfigError(f"k must be >= 1, got {self.k}")
        if not (math.isfinite(self.epsilon) and self.epsilon > 0):
            raise ConfigError(f"epsilon must be > 0, got {self.epsilon}")
        if self.horizon < 1:
            raise ConfigError(f"the horizon must be >= 1 step, got {self.horizon}")
        if not 1 <= self.levels <= 12:
            raise ConfigError(f"levels must be in [1, 12], got {self.levels}")
        if not 0 <= self.delta < 1:
            raise ConfigError(f"delta must be in [0, 1), got {self.delta}")
        if self.objective not in Z_OF:
            raise ConfigError(f"objective must be one of {sorted(Z_OF)}, got {self.objective!r}")
        cells = sum(g.universe() for g in level_grids(self))
        if cells > MAX_COUNTERS:
            raise ConfigError(f"{self.levels} levels in dimension {self.dim} need {cells} counters, more than "
                              f"{MAX_COUNTERS}: use fewer levels")


@dataclass(frozen=True)
class ContinualEvent:
    """The round's randomiser: three binary-tree counter families, pure DP by basic composition."""

    epsilon: float
    horizon: int
    families: tuple[BinaryTreeNoise | BinaryTreeGaussian, ...]


def continual_guarantee(event: object) -> tuple[float, float]:
    """The event-level (epsilon, delta) of the whole release sequence, by basic
    composition of the families; unknown records raise."""
    if not isinstance(event, ContinualEvent):
        raise ConfigError(f"no continual privacy rule for {event!r}")
    return math.fsum(f.epsilon for f in event.families), math.fsum(f.delta for f in event.families)


def continual_statement(event: object) -> dict[str, Any]:
    """What a continual round promises, from its event record (unknown records raise)."""
    eps, delta = continual_guarantee(event)
    assert isinstance(event, ContinualEvent)
    names = ("values", "counts", "mean")
    return {
        "model": "central (curator), continual observation",
        "epsilon": eps, "delta": delta, "horizon": event.horizon,
        "level": "event-level: streams that differ by one item's insertion and its later deletion "
                 "(one device's point over the round); a device that inserts m points is covered by group "
                 "privacy at m eps",
        "covers": "everyone who sees the releases (all T steps together); not the curator, which sees raw points",
        "parts": {name: _part(f) for name, f in zip(names, event.families, strict=True)},
    }


def _part(f: BinaryTreeNoise | BinaryTreeGaussian) -> dict[str, Any]:
    if isinstance(f, BinaryTreeNoise):
        return {"mechanism": "binary-tree mechanism, discrete Laplace per dyadic node", "epsilon": f.epsilon,
                "delta": 0.0, "l1_sensitivity": f.sensitivity, "tree_height": f.height}
    return {"mechanism": f"binary-tree mechanism, {f.shares} discrete Gaussian(s) per dyadic node (zCDP)",
            "epsilon": f.epsilon, "delta": f.delta, "l2_sensitivity": math.sqrt(f.l2_sq), "tree_height": f.height}


def level_grids(params: ContinualParams) -> list[Grid]:
    """One public shifted grid per level, coarse to fine, from the round's seed."""
    public = np.random.default_rng([params.seed, 5])
    return [shifted_grids(SIDE * r / math.sqrt(params.dim), params.dim, 1, public)[0]
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
        h = tree_height(params.horizon)
        self.sizes = [g.universe() for g in self.grids]
        unit = 1 << MEAN_BITS
        shares = (VALUE_SHARE, COUNT_SHARE, 1 - VALUE_SHARE - COUNT_SHARE)
        widths = (sum(self.sizes), self.sizes[-1], params.dim + 1)
        if params.delta == 0:  # pure eps: L1 of one item's two events over its ``h`` nodes each
            l1 = (params.levels * Q, 1, math.ceil(math.sqrt(params.dim) * unit) + params.dim + unit)
            families: list[BinaryTreeNoise | BinaryTreeGaussian] = [
                BinaryTreeNoise(params.horizon, 2 * h * r, share * params.epsilon) for r, share in zip(l1, shares, strict=True)]
        else:  # (eps, delta): squared L2 of one event's leaf (a node holding both events moves by less)
            l2_sq = (params.levels * Q**2, 1, math.ceil((unit + math.sqrt(params.dim)) ** 2) + unit**2)
            families = [BinaryTreeGaussian(params.horizon, 2 * h * r, share * params.epsilon, share * params.delta, w)
                        for r, share, w in zip(l2_sq, shares, widths, strict=True)]
        self.values_noise, self.counts_noise, self.mean_noise = families
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)])
        self.cell_centers = [_all_centers(g, params.dim) for g in self.grids]
        self.all_centers = np.concatenate(self.cell_centers)  # every counter's ball center, in counter order
        self.values = BinaryTree(int(self.offsets[-1]), self.values_noise, rng)
        self.counts = BinaryTree(self.sizes[-1], self.counts_noise, rng)
        self.mean = BinaryTree(params.dim + 1, self.mean_noise, rng)

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
