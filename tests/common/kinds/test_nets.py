"""Node spaces: every device's path is found by expanding its ancestors."""

import numpy as np
import pytest

from shoal.common.kinds.tree import derive_config
from shoal.common.kinds.tree_nets import node_space


@pytest.mark.parametrize("encoder,dim", [("nettree", 20), ("nettree", 2), ("lsh", 20)])
def test_children_enumeration_contains_every_path(encoder, dim):
    cfg = derive_config(50_000, dim, 8, 4.0, encoder=encoder, seed=3)
    space = node_space(cfg)
    x = np.random.default_rng(0).standard_normal((3000, dim)) * 0.3
    paths = space.paths(cfg.bound.to_ball(x))
    for j in range(cfg.levels):
        parents = np.unique(paths[j], axis=0)
        kids, par = space.children(j, parents)
        known = set(space.keys(j + 1, kids).tolist())
        assert set(space.keys(j + 1, paths[j + 1]).tolist()) <= known
        assert np.all(par >= 0) and np.all(par < parents.shape[0])


def test_lattice_children_are_two_per_axis():
    cfg = derive_config(50_000, 20, 8, 4.0, encoder="nettree", seed=3)
    space = node_space(cfg)
    kids, _ = space.children(3, np.zeros((1, cfg.proj_dim), dtype=np.int64))
    assert kids.shape[0] == 2**cfg.proj_dim


def test_client_and_server_derive_the_same_keys():
    cfg = derive_config(50_000, 20, 8, 4.0, encoder="lsh", seed=3)
    a, b = node_space(cfg), node_space(cfg.with_overrides())
    x = np.random.default_rng(1).standard_normal((100, 20)) * 0.3
    pa, pb = a.paths(x), b.paths(x)
    for j in range(cfg.levels + 1):
        assert np.array_equal(a.keys(j, pa[j]), b.keys(j, pb[j]))


@pytest.mark.parametrize("dim", [2, 6, 20])
def test_children_keep_every_path_of_points_on_the_sphere(dim):
    """Points on the ball's surface are the worst case for ``reachable``: their
    paths drift furthest out; every one must still be enumerated."""
    cfg = derive_config(50_000, dim, 8, 4.0, encoder="nettree", seed=5)
    space = node_space(cfg)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4000, dim))
    x = np.vstack([x / np.linalg.norm(x, axis=1, keepdims=True), np.eye(dim), -np.eye(dim)])
    paths = space.paths(x)
    for j in range(cfg.levels):
        parents = np.unique(paths[j], axis=0)
        kids, _ = space.children(j, parents)
        assert set(space.keys(j + 1, paths[j + 1]).tolist()) <= set(space.keys(j + 1, kids).tolist())
        assert np.all(space.reachable(j + 1, paths[j + 1]))


def test_children_leave_out_lattice_nodes_no_device_can_reach():
    cfg = derive_config(50_000, 2, 3, 4.0, encoder="nettree", seed=3)
    space = node_space(cfg)
    cand, ok = space._axis_candidates(0, space.root())
    enumerated = int(np.prod(ok.sum(axis=2)))  # the root's lattice children over the box [-2, 2]^d'
    kids, _ = space.children(0, space.root())
    assert 0 < kids.shape[0] < enumerated
    assert np.all(space.reachable(1, kids))
    top = cfg.levels
    assert not space.reachable(top, space._index(top, np.full((1, cfg.proj_dim), 3.0)))[0]
    assert space.reachable(top, space._index(top, np.full((1, cfg.proj_dim), 0.5)))[0]
