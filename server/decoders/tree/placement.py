"""Where a net tree's coreset points sit (step 3 of ``decoder.py``, nettree).

A coreset point is a significant node with no significant child. Seed 004
puts it at its net point. That is a good place for a node whose children
were never queried (the tree's last level, or a node the threshold did not
expand), but a poor one for a node that *was* expanded and whose children
all fell below the noise gate: ``LatticeNet.paths`` rounds bottom-up, so a
level-j point can sit up to ``reach(j)`` per axis from its devices (about
one ball unit at level 2), and the node's whole mass lands there. Its
children were queried, though: their counts say where, inside it, the mass
is. Such a node is placed at its children's count-weighted net points
(counts clamped at 0): the devices of child c lie within ``reach(j + 1)``
of it, half the parent's reach. Issue 41 (session 25): on 2-D city rounds
(5,000 devices, eps 4, the demo's round, 400 rounds) the mean normalised
objective fell 15% and the median 14%; on Uber at eps 4, 6% (40 rounds).

The safety net's certificate needs how far a placed node's position can
be from its devices' mean, per direction: the children's rounding spread
``rounding_sd(j + 1)`` plus what their count noise moves the weighted mean,
sum_c Var(n_c) |p_c - p|^2 / (W^2 d) (delta method; W the clamped total).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from shoal.common.kinds.tree_nets import LatticeNet
from shoal.server.decoders.tree.tree import NetTree


def place_coreset(
    tree: NetTree, space: LatticeNet, core: NDArray[np.int64], pos: NDArray[np.float64], enabled: bool = True
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Positions of every node (expanded coreset nodes moved, module doc) and
    each node's position variance per direction as an estimate of its devices' mean.
    ``enabled=False``: every node at its net point (seed 004; for ablations)."""
    top = int(tree.level.max())
    rho_sq = np.array([space.rounding_sd(j) ** 2 for j in range(top + 2)])
    var = rho_sq[tree.level].astype(np.float64)
    placed = core[tree.expanded[core]] if enabled else core[:0]
    if placed.size == 0:
        return pos, var
    kids = np.flatnonzero(np.isin(tree.parent, placed))
    w = np.maximum(tree.count[kids], 0.0)
    par = tree.parent[kids]
    total = np.zeros(tree.size)
    np.add.at(total, par, w)
    weighted = np.zeros_like(pos)
    np.add.at(weighted, par, pos[kids] * w[:, None])
    placed = placed[total[placed] > 0]
    if placed.size == 0:
        return pos, var
    out = pos.copy()
    out[placed] = weighted[placed] / total[placed][:, None]
    moved = np.zeros(tree.size)
    spread = ((pos[kids] - out[par]) ** 2).sum(1)
    np.add.at(moved, par, np.nan_to_num(tree.count_var[kids], nan=0.0, posinf=1e30) * spread)
    var[placed] = rho_sq[tree.level[placed] + 1] + moved[placed] / (total[placed] ** 2 * pos.shape[1])
    return out, var
