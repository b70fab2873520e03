"""Identity nettree's certificate (``safety.lattice_safety_net``): every device
is charged to the answer, and the variance of its estimate is exact."""

import numpy as np

from shoal.deploy.simulation.datasets import city_locations
from shoal.deploy.simulation.simulate import simulate
from shoal.server.decoders.tree.consistency import tree_blue
from shoal.server.decoders.tree.safety import leaf_sum_variance
from shoal.server.decoders.tree.tree import NetTree


def _tree() -> NetTree:
    """Root -> three level-1 nodes (the first two expanded) -> two children each."""
    level = np.array([0, 1, 1, 1, 2, 2, 2, 2])
    parent = np.array([-1, 0, 0, 0, 1, 1, 2, 2])
    expanded = np.array([True, True, True, False, False, False, False, False])
    var = np.array([0.0, 40.0, 25.0, 30.0, 10.0, 60.0, 15.0, 20.0])
    return NetTree(level=level, parent=parent, keys=np.arange(8, dtype=np.uint64),
                   coords=[np.zeros((1, 2), dtype=np.int64)] * 3, count=np.zeros(8), count_var=var,
                   significant=np.ones(8, dtype=bool), expanded=expanded)


def test_the_variance_of_a_sum_of_consistent_leaf_counts_is_exact():
    """Monte Carlo over the raw counts' noise: Var(coef . tree_blue(y)) agrees
    with ``leaf_sum_variance`` within sampling error (2e5 draws: 1%)."""
    tree = _tree()
    coef = np.array([0.0, 0.0, 0.0, 1.5, -2.0, 0.5, 1.0, -0.7])
    rng = np.random.default_rng(3)
    y = rng.normal(0.0, 1.0, (tree.size, 200_000)) * np.sqrt(tree.count_var)[:, None]
    y[0] = 0.0
    x, _ = tree_blue(tree.parent, tree.level, tree.expanded, y, tree.count_var)
    assert np.isclose(np.var(coef @ x), leaf_sum_variance(tree, coef), rtol=0.02)
    columns, _ = tree_blue(tree.parent, tree.level, tree.expanded, np.eye(tree.size), tree.count_var)
    assert np.isclose(leaf_sum_variance(tree, coef), float(np.sum(tree.count_var * (coef @ columns) ** 2)))


def test_the_variance_is_below_the_independent_sum_where_siblings_share_a_parent():
    """Siblings' consistent counts are negatively correlated (their parent's total
    is known better than they are): treating them as independent overstated
    Var(L) and sent good answers to the mean."""
    tree = _tree()
    coef = np.array([0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0])
    _, post = tree_blue(tree.parent, tree.level, tree.expanded, np.zeros(tree.size), tree.count_var)
    assert leaf_sum_variance(tree, coef) < post[4] + post[5]


def test_an_answer_that_misses_most_devices_is_not_certified():
    """City data, 20,000 devices, eps 1, seed 21: the tree finds two coreset
    leaves holding 6,900 devices, both in the upper half. Counting only those,
    the certificate kept an answer at 1.33x the one-center cost; charging every
    leaf of the tree, it falls back and the answer is below one center."""
    ds = city_locations(20_000, seed=0)
    r = simulate(ds.points, 6, 1.0, encoder="nettree", bound=ds.bound, seed=21, reference=False)
    assert r["diagnostics"]["certificate"]["answer"] == "private mean"
    assert r["normalized_objective"] <= r["trivial_objective"]
