"""Seed 001's greedy on a net tree's nodes (issue 18, local and shuffle models).

The tree round's reports already release, per level, private counts of the
nettree's nodes (seed 004's frequency oracles; seed 001, Sec. B.3, asks
the same of devices: their ball memberships at a sampled level). Here the
significant nodes are the balls: level j's radius is its lattice spacing
r_j = s_j = 2^(2-j) (``kinds.tree_randomness.lattice_spacing``), and a ball's
value is, by ``values``:

- ``"count"`` (``tree.centers = "greedy"``, the default): r_j^z times the
  node's own (consistent, clamped) count: every point of the node weighs 1.
- ``"generalized"`` (``tree.centers = "greedy-weighted"``): seed 001's
  generalized sum, over points p in B(c, r_j) of (r_j - |p - c|)^z (Sec. 4,
  the values of Alg. 1), evaluated on the released coreset, each coreset
  node standing for its count of points at its lattice point
  (``ball_values``; a device reports its node, not its offset).

Measured on the same reports (``shoal bench --greedy``'s tree table, nine
seeds; README, seed 001's greedy): the weighted values lose on average
(the paper generator at eps 8: 2 of 9 seeds near 2 x the k-means centers'
objective against none with counts). Their first center can be a coarse
ball whose weight sits near its middle but whose descendants within its
radius are below the noise gate at every finer level, so the descent
stops there; seed 001's nets cover every level, so Alg. 1 always
descends. Counts stay the default.
``greedy_order`` picks the k centers in order. Everything is
post-processing of the round's release; the privacy statement is the
tree round's.

The elbow is post-processing too: cost(k') of the first k' centers over
the coreset (each coreset node at its lattice point, weighted by its
count), in the projected space and in squared distances, with a band of
two standard deviations of the count noise's effect (sum over nodes of the
count variance times the squared cost per unit). It misses the cost
within a node, so it is the curve's shape, not the data's cost; an elbow
round on the ordered centers (``common/kinds/elbow.py``) releases the
data's cost of every k' with a second, small budget.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shoal.common.errors import ConfigError
from shoal.common.kinds.tree import RoundConfig
from shoal.common.kinds.tree_randomness import lattice_spacing
from shoal.server.decoders.greedy_order import Balls, coreset_elbow, greedy_order


def tree_radii(levels: int) -> tuple[float, ...]:
    return tuple(float(lattice_spacing(j)) for j in range(levels + 1))


CHUNK = 1 << 22  # ball x coreset distances computed per block in ``ball_values``


def ball_values(centers: NDArray[np.float64], radii: NDArray[np.float64], core_pos: NDArray[np.float64],
                core_w: NDArray[np.float64], z: int = 2) -> NDArray[np.float64]:
    """Seed 001's generalized sums on a weighted coreset: for ball i,
    sum over q of core_w[q] (radii[i] - |core_pos[q] - centers[i]|)_+^z. Linear in
    the weights (post-processing of released counts), computed in blocks of balls."""
    values = np.zeros(centers.shape[0])
    p2 = (core_pos**2).sum(1)
    rows = max(1, CHUNK // max(core_pos.shape[0], 1))
    for lo in range(0, centers.shape[0], rows):
        c = centers[lo:lo + rows]
        d2 = (c**2).sum(1)[:, None] + p2[None, :] - 2.0 * (c @ core_pos.T)
        reach = np.maximum(radii[lo:lo + rows, None] - np.sqrt(np.maximum(d2, 0.0)), 0.0)
        values[lo:lo + rows] = (reach**z) @ core_w
    return values


VALUES = {"greedy": "count", "greedy-weighted": "generalized"}  # tree.centers -> ball values


def greedy_centers(level: NDArray[np.int64], pos: NDArray[np.float64], weights: NDArray[np.float64],
                   significant: NDArray[np.bool_], core: NDArray[np.int64], levels: int, k: int,
                   z: int = 2, values: str = "count") -> tuple[NDArray[np.float64], list[int]]:
    """k centers in the greedy's order from the tree's significant nodes (count above the
    tree's noise gate, all levels): a node the gate calls noise would weigh r^z times its
    noise, and at coarse levels outrank every real cluster. ``values``: see the module."""
    keep = significant & (weights > 0)
    radii = tree_radii(levels)
    r = np.asarray(radii)[level[keep]]
    if values == "count":
        ball = r**z * weights[keep]
    elif values == "generalized":
        ball = ball_values(pos[keep], r, pos[core], weights[core], z)
    else:
        raise ConfigError(f"ball values must be 'count' or 'generalized', got {values!r}")
    return greedy_order(Balls(level[keep], pos[keep], ball), k, radii)


def ordered_centers(level: NDArray[np.int64], significant: NDArray[np.bool_], pos: NDArray[np.float64],
                    weights: NDArray[np.float64], core: NDArray[np.int64], variances: NDArray[np.float64],
                    cfg: RoundConfig) -> tuple[NDArray[np.float64], dict[str, Any]]:
    """The tree decoder's step 3 with ``tree.centers = "greedy"`` (or ``"greedy-weighted"``): the k ordered
    centers and what the result says of them (their levels, the elbow)."""
    centers, depth = greedy_centers(level, pos, weights, significant, core, cfg.levels, cfg.k,
                                   values=VALUES[cfg.tree.centers])
    curve, suggested = coreset_elbow(pos[core], weights[core], variances[core], centers)
    return centers, {"center_levels": depth, "elbow": {
        "costs": curve, "suggested_k": suggested, "objective": "kmeans",
        "units": "the coreset's nodes in the projected unit ball (post-processing; within-node cost not counted)",
        "rule": "the largest k' whose drop is at least half of cost(k') and 1.5 bands "
                "(server/decoders/tree/greedy_centers.py)"}}


@dataclass(frozen=True)
class Coreset:
    """What step 3 clustered (``TreeDecoder(keep_coreset=True)``), for benchmarks
    that hold the data: each coreset node's level and key (``space.keys``), its
    position (projected space), released weight and that weight's variance, and
    the centers chosen (projected, in the greedy's order when it chose them).
    ``shoal bench --greedy --model shuffle`` checks the elbow's band against the
    same curve on the nodes' exact counts."""

    level: NDArray[np.int64]
    keys: NDArray[np.uint64]
    pos: NDArray[np.float64]
    weights: NDArray[np.float64]
    variances: NDArray[np.float64]
    centers: NDArray[np.float64]


def coreset_of(tree: Any, space: Any, core: NDArray[np.int64], pos: NDArray[np.float64],
               weights: NDArray[np.float64], variances: NDArray[np.float64],
               centers: NDArray[np.float64]) -> Coreset:
    level = tree.level[core]
    keys = np.zeros(core.size, dtype=np.uint64)
    for j in np.unique(level).tolist():
        at = level == j
        keys[at] = space.keys(j, tree.coords[j][core[at] - tree.level_slice(j).start])
    return Coreset(level, keys, pos[core], weights[core], variances[core], centers)
