"""The central algorithms' public geometry: projection into the unit ball, shifted
grids, exact grouping of points into cells, and uniform empty cells."""

import numpy as np
import pytest
from scipy import stats

from shoal.server.decoders.central import grids
from shoal.server.decoders.central.grids import (
    Grid,
    Occupied,
    cells,
    project,
    projection,
    random_cell,
)


def test_the_projection_is_public_and_keeps_points_in_the_unit_ball():
    a = projection(50, 6, np.random.default_rng([7, 1]))
    b = projection(50, 6, np.random.default_rng([7, 1]))
    assert a is not None and np.array_equal(a, b)
    x = np.random.default_rng(0).standard_normal((500, 50))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    assert np.linalg.norm(project(x, a), axis=1).max() <= 1 + 1e-12
    assert projection(5, 6, np.random.default_rng(0)) is None  # nothing to project


def test_points_are_grouped_exactly_as_a_row_wise_unique():
    rng = np.random.default_rng(1)
    idx = rng.integers(0, 4, size=(3000, 3))
    rows, inverse = cells(idx)
    assert np.array_equal(rows[inverse], idx)
    assert len(rows) == len(np.unique(idx, axis=0))


def test_a_hash_collision_falls_back_to_the_exact_grouping(monkeypatch):
    monkeypatch.setattr(grids, "row_hash", lambda index: np.zeros(index.shape[0], dtype=np.uint64))
    idx = np.array([[0, 1], [1, 0], [0, 1], [2, 2]])
    rows, inverse = cells(idx)
    assert np.array_equal(rows[inverse], idx) and len(rows) == 3


def test_a_grid_counts_every_cell_of_the_cube_as_its_universe():
    g = Grid(0.5, np.zeros(3))
    assert g.per_axis == 6 and g.universe() == 6**3
    assert Grid(1e-9, np.zeros(8)).universe() > 2**64  # a Python int, never an overflow


def test_every_point_of_the_ball_falls_in_a_cell_of_the_universe():
    g = Grid(0.3, np.random.default_rng(2).uniform(0, 0.3, 4))
    y = np.random.default_rng(3).uniform(-1, 1, (2000, 4))
    y /= np.maximum(np.linalg.norm(y, axis=1, keepdims=True), 1)
    idx = g.index(y)
    assert idx.min() >= 0 and idx.max() < g.per_axis
    assert np.all(np.abs(g.centers(idx) - y) <= 0.15 + 1e-12)  # a point lies within half a side of its center


def test_the_blocks_pick_is_a_uniform_empty_cell():
    g = Grid(1.0, np.zeros(2))  # 4 x 4 cells over [-1, 1]^2 (floor(2 / side) + 2 per axis)
    taken = np.array([[0, 0], [1, 1], [2, 1]])
    rng = np.random.default_rng(4)
    picks = np.array([random_cell([g], [Occupied.of(taken)], rng) for _ in range(6500)])
    idx = np.floor((picks + 1.0) / 1.0).astype(int)  # the cell of each picked center
    codes = idx[:, 0] * 4 + idx[:, 1]
    counts = np.bincount(codes, minlength=16)
    assert counts[[0, 5, 9]].sum() == 0
    assert (counts > 0).sum() == 13 and stats.chisquare(counts[counts > 0]).pvalue > 1e-4


@pytest.mark.parametrize("idx", [np.array([1, 1]), np.array([0, 2])])
def test_occupied_answers_membership_exactly(idx):
    occ = Occupied.of(np.array([[1, 1], [2, 0]]))
    assert (idx in occ) == any(np.array_equal(idx, r) for r in ([1, 1], [2, 0]))
