"""Tree BLUE: parent = sum of children, and less error than the raw estimates."""

import numpy as np

from shoal.server.decoders.tree.consistency import tree_blue

# root -> (1, 2); 1 -> (3, 4); 2 leaf
PARENT = np.array([-1, 0, 0, 1, 1])
LEVEL = np.array([0, 1, 1, 2, 2])
KIDS = np.array([True, True, False, False, False])
TRUTH = np.array([10.0, 7.0, 3.0, 5.0, 2.0])


def test_consistent_estimates_add_up():
    y = TRUTH + np.array([0.0, 1.0, -2.0, 0.5, 0.3])
    x, _ = tree_blue(PARENT, LEVEL, KIDS, y, np.array([0.0, 1, 1, 1, 1]))
    assert np.isclose(x[0], 10.0)  # variance 0: kept exactly
    assert np.isclose(x[1] + x[2], x[0])
    assert np.isclose(x[3] + x[4], x[1])


def test_consistency_reduces_error_over_independent_noise():
    rng = np.random.default_rng(0)
    s = np.ones(5)
    raw, fit = 0.0, 0.0
    for _ in range(4000):
        y = TRUTH + rng.standard_normal(5)
        x, _ = tree_blue(PARENT, LEVEL, KIDS, y, s)
        raw += ((y - TRUTH) ** 2).sum()
        fit += ((x - TRUTH) ** 2).sum()
    assert fit < 0.8 * raw


def test_consistency_is_unbiased():
    rng = np.random.default_rng(1)
    acc = np.zeros(5)
    reps = 4000
    for _ in range(reps):
        x, _ = tree_blue(PARENT, LEVEL, KIDS, TRUTH + rng.standard_normal(5), np.ones(5))
        acc += x
    assert np.all(np.abs(acc / reps - TRUTH) < 5 / np.sqrt(reps))


def test_vectors_are_smoothed_coordinatewise():
    y = np.stack([TRUTH, 2 * TRUTH], axis=1)
    x, _ = tree_blue(PARENT, LEVEL, KIDS, y, np.ones(5))
    assert np.allclose(x, y)


def test_the_returned_variances_are_the_errors_of_the_consistent_estimates():
    rng = np.random.default_rng(2)
    s = np.array([4.0, 1.0, 2.0, 0.5, 3.0])
    reps = 20_000
    err = np.zeros(5)
    for _ in range(reps):
        x, p = tree_blue(PARENT, LEVEL, KIDS, TRUTH + rng.standard_normal(5) * np.sqrt(s), s)
        err += (x - TRUTH) ** 2
    measured = err / reps
    assert np.allclose(measured, p, rtol=0.05), (measured, p)
    assert np.all(p <= s + 1e-12)  # never noisier than the node's own estimate
