"""The public geometry of the central algorithms: projection and shifted grids.

Seed 000, Step 1: a Johnson-Lindenstrauss map to d' dimensions (Gaussian,
drawn from the run's public seed), scaled and clipped into the unit ball
of R^d' (a per-point map, so clipping costs no privacy). Step 2: grids of
side t over the cube [-1, 1]^d', each shifted by a public uniform offset;
a cell covers the points inside it (diameter t sqrt(d')). Seed 000 lets a
grid point cover every point within r + t sqrt(d') through an offset set
V_i whose size grows like (1/eps)^d' (Lemma 8), which no machine
enumerates past d' ~ 4; ``SHIFTS`` shifted copies of the grid give
overlapping sets instead (a cluster cut by one grid's wall lies whole in
another's cell), at ``shifts`` incidences per point.

The universe of sets is public: every cell of every shifted grid whose
index lies in [0, N)^d', N = floor(2 / t) + 2, non-empty or not; only its
size enters the exponential mechanism (``empty_sets``). Pure numpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from shoal.common.clipping import clip_to_ball
from shoal.common.kinds.central import PROJECTION_SLACK

# Odd 64-bit multipliers for hashing a cell index row (collisions are detected, never trusted).
_MIX = np.array([0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93,
                 0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53, 0x94D049BB133111EB, 0xBF58476D1CE4E5B9],
                dtype=np.uint64)


def projection(dim: int, proj_dim: int, rng: np.random.Generator) -> NDArray[np.float64] | None:
    """The public JL matrix (dim, proj_dim), or None when nothing is projected."""
    if proj_dim >= dim:
        return None
    return rng.standard_normal((dim, proj_dim)) / math.sqrt(proj_dim)


def project(x: NDArray[np.float64], matrix: NDArray[np.float64] | None) -> NDArray[np.float64]:
    """Ball points into the unit ball of R^d' (chunked: memory O(n d'))."""
    if matrix is None:
        return np.asarray(x, dtype=np.float64)
    out = np.empty((x.shape[0], matrix.shape[1]))
    for lo in range(0, x.shape[0], 65536):
        out[lo:lo + 65536] = x[lo:lo + 65536] @ matrix
    return clip_to_ball(out / PROJECTION_SLACK)


@dataclass(frozen=True)
class Grid:
    """One shifted grid: side, offset (in [0, side)^d'), cells per axis."""

    side: float
    offset: NDArray[np.float64]

    @property
    def per_axis(self) -> int:
        return math.floor(2.0 / self.side) + 2

    def universe(self) -> int:
        """How many cells the grid has over the cube (a Python int: it may exceed 2^64)."""
        return int(self.per_axis) ** int(self.offset.shape[0])

    def index(self, y: NDArray[np.float64]) -> NDArray[np.int64]:
        """Each point's cell index row, in [0, per_axis)^d'."""
        c = np.floor((y + 1.0 + self.offset) / self.side).astype(np.int64)
        return np.clip(c, 0, self.per_axis - 1)

    def centers(self, index: NDArray[np.int64]) -> NDArray[np.float64]:
        return (index + 0.5) * self.side - 1.0 - self.offset


def shifted_grids(side: float, proj_dim: int, shifts: int, rng: np.random.Generator) -> list[Grid]:
    """``shifts`` grids of one side, offsets from the public generator."""
    return [Grid(side, rng.uniform(0.0, side, size=proj_dim)) for _ in range(shifts)]


def row_hash(index: NDArray[np.int64]) -> NDArray[np.uint64]:
    """One uint64 per index row (wrapping arithmetic; equal rows, equal hashes)."""
    h = (index.astype(np.uint64) * _MIX[np.arange(index.shape[1]) % _MIX.size]).sum(axis=1, dtype=np.uint64)
    return np.asarray(h ^ (h >> np.uint64(29)), dtype=np.uint64)


def cells(index: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Group index rows: (the distinct rows (c, d'), each point's group (n,)).

    Rows are hashed to one uint64 and sorted by hash once; equal hashes next
    to each other are then checked against the rows themselves, and an exact
    row-wise unique runs in the (never seen) event of a collision."""
    h = row_hash(index)
    order = np.argsort(h)
    hs = h[order]
    new = np.empty(h.size, dtype=bool)
    new[:1] = True
    np.not_equal(hs[1:], hs[:-1], out=new[1:])
    same = np.flatnonzero(~new)
    if same.size and not np.array_equal(index[order[same]], index[order[same - 1]]):
        rows, inverse = np.unique(index, axis=0, return_inverse=True)
        return rows, inverse.ravel().astype(np.int64)
    inverse = np.empty(h.size, dtype=np.int64)
    inverse[order] = np.cumsum(new) - 1
    return index[order[new]], inverse


@dataclass(frozen=True)
class Occupied:
    """A grid's non-empty cells, for testing whether a cell is one of them."""

    rows: NDArray[np.int64]
    hashes: NDArray[np.uint64]  # sorted
    order: NDArray[np.int64]  # rows[order] follow hashes

    @classmethod
    def of(cls, rows: NDArray[np.int64]) -> Occupied:
        h = row_hash(rows)
        order = np.argsort(h, kind="stable")
        return cls(rows, h[order], order)

    def __contains__(self, idx: NDArray[np.int64]) -> bool:
        h = row_hash(idx[None, :])[0]
        lo, hi = np.searchsorted(self.hashes, h, "left"), np.searchsorted(self.hashes, h, "right")
        return any(np.array_equal(self.rows[self.order[j]], idx) for j in range(lo, hi))


def random_cell(grids: list[Grid], occupied: list[Occupied], rng: np.random.Generator) -> NDArray[np.float64]:
    """A uniformly random empty cell of the level's universe (the pick of the
    block): a uniform cell, drawn again while it is one of the non-empty ones."""
    while True:
        g = int(rng.integers(len(grids)))
        idx: NDArray[np.int64] = np.asarray(rng.integers(0, grids[g].per_axis, size=grids[g].offset.shape[0]),
                                            dtype=np.int64)
        if idx not in occupied[g]:
            return grids[g].centers(idx[None, :])[0]
