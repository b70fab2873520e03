"""Building the net tree from a frequency oracle (seed 004, Alg. 1-2).

Top-down from the root: at each level the nodes are sorted by their
(clamped) estimated counts and COMPUTETHRESHOLD decides how many of the
heaviest to expand; their children are added and queried. Beyond the paper
(DESIGN.md: stop instead of emitting noise), only nodes whose estimate
exceeds ``noise_z`` standard deviations of the oracle noise are candidates
for expansion, and the number of nodes per level is capped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from shoal.common.kinds.tree import RoundConfig
from shoal.common.kinds.tree_nets import NodeSpace
from shoal.server.decoders.tree.oracles import FrequencyOracle


def compute_threshold(sorted_counts: NDArray[np.float64], k: int, a: int, gamma_steps: int) -> int:
    """COMPUTETHRESHOLD (seed 004, Alg. 2): how many of the heaviest nodes to expand.

    ``sorted_counts`` is nondecreasing and clamped at 0. Stops at step j as soon
    as the mass left below the top (j-1)ka nodes is at most twice the mass
    left below the top j ka nodes.
    """
    m = int(sorted_counts.shape[0])
    ka = k * a
    bottom = np.concatenate([[0.0], np.cumsum(sorted_counts)])  # bottom[t] = sum of t smallest
    for j in range(1, min(gamma_steps, m // ka) + 1):
        if bottom[m - (j - 1) * ka] <= 2 * bottom[m - j * ka]:
            return (j - 1) * ka
    return min(m, gamma_steps * ka)


def gate_z(base_z: float, queries: int) -> float:
    """Noise gate in standard deviations for ``queries`` nodes queried at one level.

    At least ``base_z``, raised to a Bonferroni bound so that about 0.05 false
    positives are expected per level however many children are queried
    (nettree queries 2^d' children per expanded node). Gaussian tail bound
    P(Z > z) <= exp(-z^2 / 2) / 2.
    """
    return max(base_z, math.sqrt(2 * math.log(max(queries, 1) / 0.1)))


@dataclass
class NetTree:
    """A built tree: nodes in level order (parents before children)."""

    level: NDArray[np.int64]
    parent: NDArray[np.int64]
    keys: NDArray[np.uint64]
    coords: list[NDArray[np.int64]]  # per level, coordinates of that level's nodes
    count: NDArray[np.float64]
    count_var: NDArray[np.float64]
    significant: NDArray[np.bool_]
    expanded: NDArray[np.bool_]

    @property
    def size(self) -> int:
        return int(self.level.shape[0])

    def level_slice(self, level: int) -> slice:
        idx = np.flatnonzero(self.level == level)
        if idx.size == 0:
            return slice(0, 0)
        return slice(int(idx[0]), int(idx[-1]) + 1)

    def coreset_nodes(self) -> NDArray[np.int64]:
        """Significant nodes with no significant child: the private coreset's support.

        A node that was expanded but whose children all fell below the noise
        gate still represents its mass (seed 004: a leaf of the built tree).
        """
        sig_child = np.zeros(self.size, dtype=bool)
        kids = np.flatnonzero(self.significant & (self.parent >= 0))
        sig_child[self.parent[kids]] = True
        return np.flatnonzero(self.significant & ~sig_child)


def build_tree(space: NodeSpace, oracle: FrequencyOracle, config: RoundConfig) -> NetTree:
    """BUILDTREE (seed 004, Alg. 1) with a noise gate on expansion."""
    tp = config.tree
    root = space.root()
    levels = [np.zeros(1, dtype=np.int64)]
    parents = [np.full(1, -1, dtype=np.int64)]
    keys = [space.keys(0, root)]
    coords = [root]
    count0, _ = oracle.counts(0, keys[0])
    counts = [count0]
    variances = [np.zeros(1)]
    significant = [np.ones(1, dtype=bool)]
    expanded: list[NDArray[np.bool_]] = []
    offset = 0
    for i in range(config.levels):
        est = np.maximum(counts[i], 0.0)
        cand = np.flatnonzero(significant[i])
        order = cand[np.argsort(est[cand], kind="stable")]
        tau = compute_threshold(est[order], config.k, tp.a, tp.gamma_steps) if i > 0 else len(order)
        chosen = order[len(order) - tau :] if tau > 0 else order[:0]
        exp_mask = np.zeros(est.shape[0], dtype=bool)
        exp_mask[chosen] = True
        if chosen.size:
            kids, par = space.children(i, coords[i][np.sort(chosen)])
            par = np.sort(chosen)[par]
            if kids.shape[0] > tp.max_nodes_per_level:
                # Keep the heaviest parents whose children fit.
                per = np.bincount(par, minlength=est.shape[0])
                heavy = np.sort(chosen)[np.argsort(-est[np.sort(chosen)], kind="stable")]
                keep_par = heavy[np.cumsum(per[heavy]) <= tp.max_nodes_per_level]
                exp_mask[:] = False
                exp_mask[keep_par] = True
                sel = exp_mask[par]
                kids, par = kids[sel], par[sel]
        else:
            kids, par = space.children(i, coords[i][:0])
        expanded.append(exp_mask)
        k_keys = space.keys(i + 1, kids)
        c, var = oracle.counts(i + 1, k_keys)
        sd = float(np.sqrt(var)) if np.isfinite(var) else np.inf
        levels.append(np.full(kids.shape[0], i + 1, dtype=np.int64))
        parents.append(par + offset)
        keys.append(k_keys)
        coords.append(kids)
        counts.append(c)
        variances.append(np.full(kids.shape[0], var))
        significant.append(c > gate_z(tp.noise_z, kids.shape[0]) * sd)
        offset += est.shape[0]
    expanded.append(np.zeros(counts[-1].shape[0], dtype=bool))
    return NetTree(
        level=np.concatenate(levels),
        parent=np.concatenate(parents),
        keys=np.concatenate(keys),
        coords=coords,
        count=np.concatenate(counts),
        count_var=np.concatenate(variances),
        significant=np.concatenate(significant),
        expanded=np.concatenate(expanded),
    )
