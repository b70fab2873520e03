"""Seed 001's greedy on a net tree's nodes (server/decoders/tree/greedy_centers.py):
only significant nodes compete, the centers come in order with an elbow curve
from the same release, the round's config asks for it by name (nettree only)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from shoal.common.bounds import PublicBound
from shoal.common.errors import ConfigError
from shoal.common.kinds.tree import TreeParams, derive_config
from shoal.deploy.simulation.simulate import simulate
from shoal.server.decoders.greedy_order import coreset_elbow
from shoal.server.decoders.tree.greedy_centers import ball_values, greedy_centers


def test_a_coarse_node_below_the_noise_gate_never_outranks_a_real_cluster():
    # A level-1 lattice point far outside the data with a large noisy count: its value,
    # spacing^2 = 4 times that count, beats the root's 16 x 1000, were it allowed to compete.
    level = np.array([0, 1, 1, 2, 3, 3, 4, 4])
    pos = np.array([[0.0, 0.0], [2.0, 2.0], [0.0, 0.0], [0.0, 0.0], [0.3, 0.3], [-0.3, -0.3], [0.3, 0.3],
                    [-0.3, -0.3]])
    weights = np.array([1000.0, 5000.0, 1000.0, 1000.0, 500.0, 480.0, 500.0, 480.0])
    significant = np.array([True, False, True, True, True, True, True, True])
    core = np.array([6, 7])
    centers, depth = greedy_centers(level, pos, weights, significant, core, 4, 2)
    assert centers.tolist() == [[0.3, 0.3], [-0.3, -0.3]] and depth == [4, 4]
    noisy, _ = greedy_centers(level, pos, weights, np.ones(8, dtype=bool), core, 4, 2)
    assert noisy[0].tolist() == [2.0, 2.0]  # what the gate prevents
    # Seed 001's weighted values: the far node holds none of the coreset within its radius.
    weighted, _ = greedy_centers(level, pos, weights, np.ones(8, dtype=bool), core, 4, 2, values="generalized")
    assert weighted.tolist() == [[0.3, 0.3], [-0.3, -0.3]]


def test_ball_values_are_named_and_nothing_else_is_accepted():
    level, pos, weights = np.array([0]), np.zeros((1, 2)), np.array([10.0])
    with pytest.raises(ConfigError, match="ball values must be 'count' or 'generalized', got 'median'"):
        greedy_centers(level, pos, weights, np.ones(1, dtype=bool), np.array([0]), 0, 1, values="median")


def test_ball_values_are_seed_001s_generalized_sums_over_the_coreset():
    rng = np.random.default_rng(0)
    core_pos = rng.uniform(-1, 1, size=(300, 3))
    core_w = rng.uniform(0, 50, size=300)
    centers = rng.uniform(-1, 1, size=(40, 3))
    radii = rng.choice([0.25, 0.5, 1.0, 2.0], size=40)
    for z in (1, 2):
        brute = [sum(w * max(r - np.linalg.norm(p - c), 0.0) ** z for p, w in zip(core_pos, core_w, strict=True))
                 for c, r in zip(centers, radii, strict=True)]
        assert ball_values(centers, radii, core_pos, core_w, z) == pytest.approx(brute, rel=1e-9, abs=1e-9)


def test_a_ball_value_weighs_each_point_by_its_distance_to_the_center():
    # seed 001's (r - |p - c|)^z: r^z at the center, (r/2)^z half way, nothing at or beyond r.
    core_pos = np.array([[0.0, 0.0], [0.5, 0.0], [1.0, 0.0], [0.0, 3.0]])
    one = np.eye(4)
    got = [ball_values(np.zeros((1, 2)), np.array([1.0]), core_pos, w, 2)[0] for w in one]
    assert got == pytest.approx([1.0, 0.25, 0.0, 0.0])
    assert ball_values(np.zeros((1, 2)), np.array([1.0]), core_pos, 3 * one[1], 1)[0] == pytest.approx(1.5)


def test_ball_values_are_linear_so_unbiased_counts_give_unbiased_sums():
    # Post-processing of released counts: E[values(counts + noise)] = values(counts) for zero-mean noise.
    rng = np.random.default_rng(1)
    core_pos = rng.uniform(-1, 1, size=(50, 2))
    counts = rng.integers(10, 100, size=50).astype(float)
    centers, radii = rng.uniform(-1, 1, size=(8, 2)), np.full(8, 0.5)
    exact = ball_values(centers, radii, core_pos, counts)
    noise = rng.laplace(0, 5.0, size=(2000, 50))
    mean = np.mean([ball_values(centers, radii, core_pos, counts + e) for e in noise], axis=0)
    sd = np.std([ball_values(centers, radii, core_pos, e) for e in noise], axis=0) / np.sqrt(2000)
    assert np.all(np.abs(mean - exact) <= 4 * sd + 1e-12)


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
    assert derive_config(10_000, 2, 3, 4.0, encoder="nettree",
                         tree=TreeParams(centers="greedy-weighted")).tree.centers == "greedy-weighted"
    with pytest.raises(ConfigError, match="tree centers 'greedy' need the nettree encoder"):
        derive_config(10_000, 20, 3, 4.0, encoder="lsh", tree=TreeParams(centers="greedy"))
    with pytest.raises(ConfigError, match="tree centers 'greedy-weighted' need the nettree encoder"):
        derive_config(10_000, 20, 3, 4.0, encoder="lsh", tree=TreeParams(centers="greedy-weighted"))
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
