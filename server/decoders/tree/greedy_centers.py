"""Seed 001's greedy on a net tree's nodes (issue 18, local and shuffle models).

The tree round's reports already release, per level, private counts of the
nettree's nodes (seed 004's frequency oracles; seed 001, Sec. B.3, asks
the same of devices: their ball memberships at a sampled level). Here the
nodes are the balls: level j's radius is its lattice spacing
s_j = 2^(2-j) (``public_random.lattice_spacing``), a node's value is
s_j^z times its (consistent, clamped) count, and ``greedy_order`` picks
the k centers in order. This deviates from seed 001's values, which weigh
each point by (1 - |p - c| / r)^z: a device reports only its node, not its
offset, so every point counts 1 (a constant factor for points spread over
their cell). Everything is post-processing of the round's release; the
privacy statement is the tree round's.

The elbow is post-processing too: cost(k') of the first k' centers over
the coreset (each coreset node at its lattice point, weighted by its
count), in the projected space and in squared distances, with a band of
two standard deviations of the count noise's effect (sum over nodes of the
count variance times the squared cost per unit). It misses the cost
within a node, so it is the curve's shape, not the data's cost.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from shoal.common.public_random import lattice_spacing
from shoal.common.tree_round import RoundConfig
from shoal.server.decoders.greedy_order import Balls, coreset_elbow, greedy_order


def tree_radii(levels: int) -> tuple[float, ...]:
    return tuple(float(lattice_spacing(j)) for j in range(levels + 1))


def greedy_centers(level: NDArray[np.int64], pos: NDArray[np.float64], weights: NDArray[np.float64],
                   significant: NDArray[np.bool_], levels: int, k: int,
                   z: int = 2) -> tuple[NDArray[np.float64], list[int]]:
    """k centers in the greedy's order from the tree's significant nodes (count above the
    tree's noise gate, all levels): a node the gate calls noise would weigh r^z times its
    noise, and at coarse levels outrank every real cluster."""
    keep = significant & (weights > 0)
    radii = tree_radii(levels)
    values = np.asarray(radii)[level[keep]] ** z * weights[keep]
    return greedy_order(Balls(level[keep], pos[keep], values), k, radii)


def ordered_centers(level: NDArray[np.int64], significant: NDArray[np.bool_], pos: NDArray[np.float64],
                    weights: NDArray[np.float64], core: NDArray[np.int64], variances: NDArray[np.float64],
                    cfg: RoundConfig) -> tuple[NDArray[np.float64], dict[str, Any]]:
    """The tree decoder's step 3 with ``tree.centers = "greedy"``: the k ordered
    centers and what the result says of them (their levels, the elbow)."""
    centers, depth = greedy_centers(level, pos, weights, significant, cfg.levels, cfg.k)
    curve, suggested = coreset_elbow(pos[core], weights[core], variances[core], centers)
    return centers, {"center_levels": depth, "elbow": {
        "costs": curve, "suggested_k": suggested, "objective": "kmeans",
        "units": "the coreset's nodes in the projected unit ball (post-processing; within-node cost not counted)",
        "rule": "the largest k' whose drop is at least half of cost(k') and 1.5 bands "
                "(server/decoders/tree/greedy_centers.py)"}}
