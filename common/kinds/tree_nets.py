"""Node spaces of the two encoders: a device's path, and a node's children.

``LatticeNet`` (seed 004, Sec. 3 and Alg. 3): level i is the lattice
shift_i + s_i Z^d' with s_i = 2^(2-i) (covering radius s_i sqrt(d')/2, so
~2^-i up to the constant of the paper's nets). A device's path is computed
top-down: its level-T node is the lattice point nearest to its projected
point, and the level-j node is the level-j point nearest to the level-(j+1)
node. Rounding is coordinatewise, so the children of a node are a product
of 2 candidates per axis.

``SimHashTree`` (seed 004, Sec. 5): T public SimHash hyperplanes; the
level-i node is the prefix of the first i sign bits; binary tree.

Both hash (level, integer coordinates) to 64-bit keys with the round's
public level keys.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from shoal.common.clipping import clip_to_ball
from shoal.common.kinds.tree import RoundConfig
from shoal.common.kinds.tree_randomness import PublicRandomness, lattice_spacing
from shoal.common.randomness.hashing import node_keys

Coords = NDArray[np.int64]


class NodeSpace(Protocol):
    levels: int

    def paths(self, ball_points: NDArray[np.float64]) -> list[Coords]:
        """Coordinates of each point's node at levels 0..T (one array per level)."""
        ...

    def root(self) -> Coords: ...

    def children(self, level: int, coords: Coords) -> tuple[Coords, NDArray[np.int64]]:
        """All level+1 children of the given level nodes, with their parent's index."""
        ...

    def keys(self, level: int, coords: Coords) -> NDArray[np.uint64]: ...


class LatticeNet:
    """Nested randomly shifted lattices in the projected space."""

    def __init__(self, config: RoundConfig, public: PublicRandomness) -> None:
        self.levels = config.levels
        self.dim = config.proj_dim
        self.projection = public.projection
        self.shifts = public.shifts
        self.level_keys = public.level_keys

    def project(self, ball_points: NDArray[np.float64]) -> NDArray[np.float64]:
        """Project (Alg. 3 line 2, with the public matrix) and clip into the unit ball."""
        if self.projection is None:
            return ball_points
        return clip_to_ball(ball_points @ self.projection.T)

    def _index(self, level: int, pos: NDArray[np.float64]) -> Coords:
        s = float(lattice_spacing(level))
        return np.floor((pos - self.shifts[level]) / s + 0.5).astype(np.int64)

    def position(self, level: int, coords: Coords) -> NDArray[np.float64]:
        """Position of level nodes in the projected space (the net points)."""
        if level == 0:
            return np.zeros((coords.shape[0], self.dim))
        return self.shifts[level] + float(lattice_spacing(level)) * coords

    def rounding_sd(self, level: int) -> float:
        """Standard deviation, along any direction, of a point's offset from its
        level node's position over the public random shifts: each step of
        ``paths`` rounds to a lattice of spacing s_i shifted uniformly at
        random, an offset uniform on the cell (mean 0, variance s_i^2 / 12 per
        direction), independently per level. Level 0 (the origin): the ball's radius."""
        if level == 0:
            return 1.0
        return float(np.sqrt(sum(float(lattice_spacing(i)) ** 2 / 12 for i in range(level, self.levels + 1))))

    def paths(self, ball_points: NDArray[np.float64]) -> list[Coords]:
        y = self.project(ball_points)
        n = y.shape[0]
        out: list[Coords] = [np.zeros((n, self.dim), dtype=np.int64)] * (self.levels + 1)
        if self.levels == 0:
            return out
        out[self.levels] = self._index(self.levels, y)
        for j in range(self.levels - 1, 0, -1):
            out[j] = self._index(j, self.position(j + 1, out[j + 1]))
        out[0] = np.zeros((n, self.dim), dtype=np.int64)
        return out

    def root(self) -> Coords:
        return np.zeros((1, self.dim), dtype=np.int64)

    def _axis_candidates(
        self, level: int, coords: Coords
    ) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
        """Per axis, 4 candidate child indices and which of them have this parent."""
        child = level + 1
        s_child = float(lattice_spacing(child))
        if level == 0:
            # Paths are computed top-down, so a level-2 node may sit up to
            # sum_{i>=2} s_i / 2 = 1 outside the ball's box [-1, 1] per axis.
            lo = np.full((coords.shape[0], self.dim), -2.0)
            hi = np.full((coords.shape[0], self.dim), 2.0)
        else:
            s = float(lattice_spacing(level))
            centre = self.position(level, coords)
            lo, hi = centre - s / 2, centre + s / 2
        first = np.ceil((lo - self.shifts[child]) / s_child).astype(np.int64) - 1
        last = np.floor((hi - self.shifts[child]) / s_child).astype(np.int64) + 1
        width = int(np.max(last - first)) + 1 if coords.shape[0] else 1
        cand = first[:, :, None] + np.arange(width)[None, None, :]
        pos = self.shifts[child][None, :, None] + s_child * cand
        if level == 0:
            ok = (pos + s_child / 2 > -2.0) & (pos - s_child / 2 < 2.0)
        else:
            s = float(lattice_spacing(level))
            parent = np.floor((pos - self.shifts[level][None, :, None]) / s + 0.5).astype(np.int64)
            ok = parent == coords[:, :, None]
        return cand, ok

    def reach(self, level: int) -> float:
        """How far, per axis, a level node's position can be from the point whose
        path holds it: ``paths`` rounds the point to level L (at most s_L / 2 per
        axis), then each level's position to the next coarser lattice (s_i / 2),
        so |pos_j - y| <= sum_{i=j..L} s_i / 2 on every axis."""
        return float(sum(float(lattice_spacing(i)) for i in range(max(level, 1), self.levels + 1))) / 2

    def reachable(self, level: int, coords: Coords) -> NDArray[np.bool_]:
        """Whether any point of the unit ball (every projected device point is
        clipped into it) can have this level node on its path: the box of half
        side ``reach(level)`` around the node's position meets the ball. A node
        that cannot is known, from public geometry alone, to hold no device."""
        if level == 0:
            return np.ones(coords.shape[0], dtype=bool)
        gap = np.maximum(np.abs(self.position(level, coords)) - self.reach(level), 0.0)
        return (gap * gap).sum(axis=1) <= 1.0 + 1e-9

    def children(self, level: int, coords: Coords) -> tuple[Coords, NDArray[np.int64]]:
        """The level+1 nodes under the given ones that a device can reach
        (``reachable``): the others would only be queried for noise, and a noisy
        count far outside the ball pulls a center to where no device can be."""
        cand, ok = self._axis_candidates(level, coords)
        n = coords.shape[0]
        parent = np.arange(n, dtype=np.int64)
        partial = np.zeros((n, 0), dtype=np.int64)
        for axis in range(self.dim):
            rows, which = np.nonzero(ok[parent, axis, :])
            values = cand[parent[rows], axis, which]
            partial = np.concatenate([partial[rows], values[:, None]], axis=1)
            parent = parent[rows]
        keep = self.reachable(level + 1, partial)
        return partial[keep], parent[keep]

    def keys(self, level: int, coords: Coords) -> NDArray[np.uint64]:
        return node_keys(self.level_keys[level], coords)


class SimHashTree:
    """Binary tree of SimHash sign-bit prefixes (no projection)."""

    def __init__(self, config: RoundConfig, public: PublicRandomness) -> None:
        self.levels = config.levels
        self.planes = public.planes
        self.level_keys = public.level_keys

    def paths(self, ball_points: NDArray[np.float64]) -> list[Coords]:
        n = ball_points.shape[0]
        out: list[Coords] = [np.zeros(n, dtype=np.int64)]
        if self.levels == 0:
            return out
        bits = (ball_points @ self.planes.T >= 0).astype(np.int64)
        code = np.zeros(n, dtype=np.int64)
        for j in range(self.levels):
            code = code | (bits[:, j] << j)
            out.append(code.copy())
        return out

    def root(self) -> Coords:
        return np.zeros(1, dtype=np.int64)

    def children(self, level: int, coords: Coords) -> tuple[Coords, NDArray[np.int64]]:
        n = coords.shape[0]
        kids = np.concatenate([coords, coords | (np.int64(1) << level)])
        parent = np.concatenate([np.arange(n), np.arange(n)]).astype(np.int64)
        order = np.argsort(parent, kind="stable")
        return kids[order], parent[order]

    def keys(self, level: int, coords: Coords) -> NDArray[np.uint64]:
        return node_keys(self.level_keys[level], coords)


def node_space(config: RoundConfig) -> LatticeNet | SimHashTree:
    public = PublicRandomness.from_config(config)
    if config.encoder == "nettree":
        return LatticeNet(config, public)
    return SimHashTree(config, public)
