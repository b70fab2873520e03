"""Seed 001's greedy on released balls: Mettu and Plaxton's incremental order
(La Tour, Henzinger, Saulpic, Sec. 3, Alg. 1, with Modification 2: noisy
values instead of exact ones). Pure post-processing of released values,
shared by the curator's decoder (``central/greedy.py``) and the tree
decoder's ``centers="greedy"`` (``tree/decoder.py``), whose balls are the
net tree's nodes and whose values are seed 001's generalized sums over
the released coreset (``tree/greedy_centers.py``).

k times: the available ball of largest value; then, while an available
descendant exists (a ball of a finer level whose center is within CHILD r
of the current one), the one of largest value among those of the nearest
such level; the last ball's center is the next center, and every ball
B(c, r) with |c - s| <= FORBID r is forbidden from then on. The first k'
centers answer k' (Thm. 3.4).

The descent may skip a level. Seed 001 releases every net ball, so a
child always exists there; shoal's instances release only the balls past
a noise gate, and a point adds to the one ball of its own cell per level,
so a cluster split over two cells of one level (or sitting near their
corners) can leave that level without a ball while the next level has
one. Stopping at the coarse ball put the center up to r away from the
cluster: 23 of 1,000 public seeds of the continual service test's
curator (two clusters of 24 points, eps = 50) missed a cluster by more
than a quarter of their distance; descending to the nearest released
level, 2 of the same 1,000 (both where no finer ball of that cluster
passed the gate at all).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

ELBOW_RATIO = 0.5  # coreset_elbow's suggested k': its drop is at least this share of cost(k') ...
BAND_SDS = 1.5  # ... and this many of the drop's bands (two sds each) above zero
CHILD = 1.0  # a descendant of B(c, r) is a finer-level ball whose center is within CHILD r of c
FORBID = 2.0  # a chosen center s forbids every ball B(c, r) with |c - s| <= FORBID r


@dataclass(frozen=True)
class Balls:
    """The released balls of every level: level, center (projected space), noisy value (r^z units)."""

    level: NDArray[np.int64]
    centers: NDArray[np.float64]
    values: NDArray[np.float64]


def greedy_order(balls: Balls, k: int, radii: tuple[float, ...]) -> tuple[NDArray[np.float64], list[int]]:
    """Alg. 1 on released balls: k centers in order (projected space) and each
    center's final level. When no released ball is available any more, the
    next centers are the released balls of largest value not yet chosen
    (post-processing; Alg. 1 has no such case because every ball is
    released there); with none left, the last center repeats."""
    r = np.asarray(radii)[balls.level]
    available = np.ones(balls.level.size, dtype=bool)
    unused = np.ones(balls.level.size, dtype=bool)
    chosen: list[NDArray[np.float64]] = []
    depth: list[int] = []
    last = len(radii) - 1
    for _ in range(k):
        pool = available if available.any() else unused
        if not pool.any():
            break
        cur = int(np.flatnonzero(pool)[np.argmax(balls.values[pool])])
        while pool is available and balls.level[cur] < last:
            near = np.linalg.norm(balls.centers - balls.centers[cur], axis=1) <= CHILD * r[cur]
            below = np.flatnonzero(available & near & (balls.level > balls.level[cur]))
            if below.size == 0:
                break
            kids = below[balls.level[below] == balls.level[below].min()]  # the nearest level released here
            cur = int(kids[np.argmax(balls.values[kids])])
        s = balls.centers[cur]
        chosen.append(s)
        depth.append(int(balls.level[cur]))
        unused[cur] = False
        available &= np.linalg.norm(balls.centers - s, axis=1) > FORBID * r
    if not chosen:
        chosen, depth = [np.zeros(balls.centers.shape[1])], [0]
    while len(chosen) < k:
        chosen.append(chosen[-1])
        depth.append(depth[-1])
    return np.vstack(chosen), depth


def coreset_elbow(pos: NDArray[np.float64], weights: NDArray[np.float64], variances: NDArray[np.float64],
                  centers: NDArray[np.float64]) -> tuple[list[dict[str, float]], int]:
    """cost(k') over a weighted coreset for k' = 1..k, bands (two standard deviations of
    the weights' noise), and the suggested k' (post-processing of released weights)."""
    d2 = ((pos[:, None, :] - centers[None, :, :]) ** 2).sum(2)
    best = np.minimum.accumulate(d2, axis=1)  # (nodes, k)
    cost = (weights[:, None] * best).sum(0)
    band = 2 * np.sqrt((np.maximum(variances, 0.0)[:, None] * best**2).sum(0))
    curve = [{"k": j + 1, "cost": float(cost[j]), "band": float(band[j])} for j in range(centers.shape[0])]
    suggested = 1
    for j in range(1, centers.shape[0]):
        drop = float(cost[j - 1] - cost[j])
        if drop > ELBOW_RATIO * float(cost[j]) and drop > BAND_SDS * math.hypot(float(band[j - 1]), float(band[j])):
            suggested = j + 1
    return curve, suggested
