"""Seed 001's greedy on a net tree's nodes (server/decoders/tree/greedy_centers.py):
only significant nodes compete, the centers come in order with an elbow curve
from the same release, the round's config asks for it by name (nettree only)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from shoal.common.bounds import PublicBound
from shoal.common.errors import ConfigError
from shoal.common.tree_round import TreeParams, derive_config
from shoal.deploy.simulate import simulate
from shoal.server.decoders.greedy_order import coreset_elbow
from shoal.server.decoders.tree.greedy_centers import greedy_centers


def test_a_coarse_node_below_the_noise_gate_never_outranks_a_real_cluster():
    # A level-1 lattice point far outside the data with a large noisy count: its value,
    # spacing^2 = 4 times that count, beats the root's 16 x 1000, were it allowed to compete.
    level = np.array([0, 1, 1, 2, 3, 3, 4, 4])
    pos = np.array([[0.0, 0.0], [2.0, 2.0], [0.0, 0.0], [0.0, 0.0], [0.3, 0.3], [-0.3, -0.3], [0.3, 0.3],
                    [-0.3, -0.3]])
    weights = np.array([1000.0, 5000.0, 1000.0, 1000.0, 500.0, 480.0, 500.0, 480.0])
    significant = np.array([True, False, True, True, True, True, True, True])
    centers, depth = greedy_centers(level, pos, weights, significant, 4, 2)
    assert centers.tolist() == [[0.3, 0.3], [-0.3, -0.3]] and depth == [4, 4]
    noisy, _ = greedy_centers(level, pos, weights, np.ones(8, dtype=bool), 4, 2)
    assert noisy[0].tolist() == [2.0, 2.0]  # what the gate prevents


def test_the_coreset_elbow_drops_until_every_cluster_has_a_center():
    pos = np.array([[0.5, 0.0], [-0.5, 0.0], [0.0, 0.5]])
    weights = np.array([100.0, 100.0, 100.0])
    centers = np.vstack([pos, [[0.5, 0.01]]])
    curve, suggested = coreset_elbow(pos, weights, np.ones(3), centers)
    assert [c["k"] for c in curve] == [1, 2, 3, 4]
    assert curve[2]["cost"] == pytest.approx(0.0) and curve[0]["cost"] > curve[1]["cost"] > 0
    assert suggested == 3


def test_greedy_centers_are_asked_for_by_name_and_only_on_nettree():
    assert derive_config(10_000, 2, 3, 4.0, encoder="nettree", tree=TreeParams(centers="greedy")).tree.centers == "greedy"
    with pytest.raises(ConfigError, match="tree centers 'greedy' need the nettree encoder"):
        derive_config(10_000, 20, 3, 4.0, encoder="lsh", tree=TreeParams(centers="greedy"))
    with pytest.raises(ConfigError, match="tree centers must be one of"):
        TreeParams(centers="median")


def test_a_greedy_tree_round_finds_separated_clusters_in_order_with_an_elbow():
    rng = np.random.default_rng(0)
    means = np.array([[0.5, 0.5], [-0.5, 0.5], [0.0, -0.5]])
    x = np.vstack([m + rng.normal(0, 0.02, size=(10_000, 2)) for m in means])
    out = simulate(x, 6, 8.0, encoder="nettree", bound=PublicBound(radius=1.0), seed=3,
                   tree=replace(TreeParams(), centers="greedy"))
    first = np.asarray(out["centers"])[:3]
    nearest = np.linalg.norm(first[:, None] - means[None], axis=2).argmin(1)
    assert sorted(nearest.tolist()) == [0, 1, 2]
    assert np.linalg.norm(first - means[nearest], axis=1).max() < 0.05
    elbow = out["diagnostics"]["elbow"]
    assert [c["k"] for c in elbow["costs"]] == list(range(1, 7)) and elbow["suggested_k"] == 3
