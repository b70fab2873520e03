"""Seed 003's k-median black box: Weiszfeld's geometric median and weighted k-median."""

import numpy as np

from shoal.server.decoders.kmedian import geometric_median, kmedian_cost, weighted_kmedian


def test_the_geometric_median_resists_an_outlier_the_mean_follows():
    x = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [100.0, 100.0]])
    m = geometric_median(x, np.ones(5))
    assert np.linalg.norm(m - [0.5, 0.5]) < 0.6 and np.linalg.norm(x.mean(0) - [0.5, 0.5]) > 20


def test_weights_count_as_repeated_points():
    x = np.array([[0.0, 0.0], [1.0, 0.0], [5.0, 0.0]])
    a = geometric_median(x, np.array([3.0, 1.0, 1.0]))
    b = geometric_median(np.repeat(x, [3, 1, 1], axis=0), np.ones(5))
    assert np.allclose(a, b, atol=1e-6)


def test_weighted_kmedian_beats_kmeans_centers_on_its_own_objective_with_outliers():
    from shoal.server.decoders.kmeans import weighted_kmeans

    rng = np.random.default_rng(3)
    x = np.vstack([rng.normal(0, 0.1, (200, 2)), rng.normal(5, 0.1, (200, 2)), [[60.0, 60.0]] * 6])
    w = np.ones(len(x))
    med = weighted_kmedian(x, w, 2, np.random.default_rng(1))
    means = weighted_kmeans(x, w, 2, np.random.default_rng(1))
    assert kmedian_cost(x, med, w) <= kmedian_cost(x, means, w)
