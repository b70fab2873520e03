"""A drifting stream for continual rounds (issue 18, Build 5/6): clusters that
move, appear and vanish; points inserted near their cluster's current
center and deleted after a lifetime or when their cluster vanishes.

Cluster j (of ``k_true``, in 2-D inside the unit ball) circles the origin at
radius 0.35-0.6 a quarter turn over the horizon, and is alive over a
window of steps: the first for the whole stream, the others appearing or
vanishing at public fractions of T. Each alive cluster inserts the same
number of points per step (Gaussian, sd ``spread``); a point lives
``life`` steps, or until its cluster vanishes. Generated in whole arrays
(births, deaths, points), then sliced per step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

WINDOWS = ((0.0, 1.0), (0.0, 0.6), (0.25, 1.0), (0.5, 1.0), (0.1, 0.8), (0.4, 0.9))


@dataclass(frozen=True)
class Stream:
    points: NDArray[np.float64]  # (m, 2) every point ever inserted, in the unit ball
    born: NDArray[np.int64]  # step of its insertion, 1..T
    dies: NDArray[np.int64]  # step of its deletion (T + 1: never deleted)
    horizon: int

    def step(self, t: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """(inserted, deleted) at step t."""
        return self.points[self.born == t], self.points[self.dies == t]

    def alive(self, t: int) -> NDArray[np.float64]:
        """The population after step t."""
        return self.points[(self.born <= t) & (self.dies > t)]

    @property
    def events(self) -> int:
        return int(self.born.size + (self.dies <= self.horizon).sum())


def drifting_stream(horizon: int = 1024, inserts: int = 60_000, k_true: int = 4, life: int = 256,
                    spread: float = 0.05, seed: int = 0) -> Stream:
    if not 1 <= k_true <= len(WINDOWS):
        raise ValueError(f"k_true must be in [1, {len(WINDOWS)}], got {k_true}")
    rng = np.random.default_rng(seed)
    windows = np.array(WINDOWS[:k_true])
    start = np.floor(windows[:, 0] * horizon).astype(np.int64) + 1
    end = np.floor(windows[:, 1] * horizon).astype(np.int64) + 1  # the cluster's points die at ``end``
    per_step = inserts / float((end - start).sum())
    radius, phase = rng.uniform(0.35, 0.6, k_true), rng.uniform(0, 2 * np.pi, k_true)
    counts = rng.poisson(per_step, size=(k_true, horizon))
    steps = np.arange(1, horizon + 1)
    counts[(steps[None, :] < start[:, None]) | (steps[None, :] >= end[:, None])] = 0
    cluster = np.repeat(np.repeat(np.arange(k_true), horizon), counts.ravel())
    born = np.repeat(np.tile(steps, k_true), counts.ravel())
    angle = phase[cluster] + 0.5 * np.pi * born / horizon
    center = radius[cluster, None] * np.stack([np.cos(angle), np.sin(angle)], axis=1)
    pts = center + rng.normal(0, spread, size=center.shape)
    pts /= np.maximum(1.0, np.linalg.norm(pts, axis=1, keepdims=True))
    dies = np.minimum(born + life, end[cluster])
    dies = np.where(dies > horizon, horizon + 1, dies)
    return Stream(pts, born.astype(np.int64), dies.astype(np.int64), horizon)
