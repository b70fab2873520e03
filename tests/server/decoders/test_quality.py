"""Every tree result carries a verdict (issue 16, item 2): which answer it is,
how many distinct centers it holds, and each center's expected error in the
user's units, from the decoder's own noise estimates."""

import numpy as np

from shoal.common.bounds import PublicBound
from shoal.deploy.simulation.datasets import city_locations
from shoal.deploy.simulation.simulate import simulate
from shoal.server.decoders.quality import distinct_centers


def test_a_mean_only_round_says_so():
    # n = 1000, k = 10, eps = 1 in d = 5: no cluster of n/k devices can be located (levels = 0).
    x = np.random.default_rng(0).normal(0.2, 0.1, (1000, 5))
    r = simulate(x, 10, 1.0, "lsh", seed=0, nonprivate=1.0)
    q = r["quality"]
    assert r["config"]["levels"] == 0
    assert q["answer"] == "mean-only round" and not q["clusters_found"]
    assert q["distinct_centers"] == 1 and "mean-only round" in q["verdict"]
    assert q["mean_error"] > 0


def test_a_fallback_round_says_no_clusters_were_shown():
    x = np.random.default_rng(1).normal(0.3, 0.05, (50_000, 10))
    r = simulate(x, 4, 2.0, "lsh", seed=1, nonprivate=1.0)
    q = r["quality"]
    assert q["answer"] == "private mean" and not q["clusters_found"]
    assert "one-center answer" in q["verdict"]


def test_a_tree_that_located_nothing_says_so_instead_of_a_zero_test():
    # n = 1000, k = 10, eps = 1 in d = 3 (identity nettree): the tree is built, its coreset is the root.
    x = np.random.default_rng(0).uniform(-1, 1, (1000, 3))
    r = simulate(x, 10, 1.0, "nettree", bound=PublicBound(radius=2.0), seed=1, nonprivate=1.0)
    q = r["quality"]
    assert r["config"]["levels"] > 0 and r["diagnostics"]["coreset_points"] == 1
    assert q["answer"] == "private mean" and q["distinct_centers"] == 1
    assert "no clusters found" in q["verdict"] and "noise sd of 0" not in q["verdict"]


def test_found_clusters_come_with_their_errors_in_original_units():
    ds = city_locations(100_000, seed=1)
    r = simulate(ds.points, ds.k, 4.0, "nettree", bound=ds.bound, seed=1, nonprivate=1.0)
    q = r["quality"]
    assert q["answer"] == "clusters" and q["clusters_found"]
    assert q["distinct_centers"] == ds.k and f"{ds.k} distinct centers of {ds.k}" in q["verdict"]
    assert q["mean_error"] is not None and 0 < q["mean_error"] < 0.03 * ds.bound.scale
    assert q["bound"] == {"radius": None, "low": [0.0, 0.0], "high": [100.0, 100.0]}


def test_center_errors_scale_with_the_public_bound():
    x = np.random.default_rng(2).normal(0.0, 0.3, (20_000, 3)) + np.array([[0.5, 0, 0]]) * np.sign(
        np.random.default_rng(3).random((20_000, 1)) - 0.5)
    small = simulate(x, 2, 4.0, "lsh", bound=PublicBound(radius=1.0), seed=3, nonprivate=1.0)["quality"]
    big = simulate(x * 10, 2, 4.0, "lsh", bound=PublicBound(radius=10.0), seed=3, nonprivate=1.0)["quality"]
    assert big["mean_error"] == 10 * small["mean_error"]


def test_distinct_centers_counts_repeats_once():
    c = np.array([[0.1, 0.2], [0.1, 0.2], [0.3, 0.0]])
    assert distinct_centers(c) == 2


def test_lattice_positions_claim_no_center_error():
    # d = 2 nettree sends no vector report: its count-only noise would read as ~0 error.
    ds = city_locations(5000, seed=0)
    q = simulate(ds.points, ds.k, 4.0, "nettree", bound=ds.bound, seed=0, nonprivate=1.0)["quality"]
    assert q["center_errors"] is None and "not estimated" in q["center_errors_note"]
    assert "typical center error" not in q["verdict"]
