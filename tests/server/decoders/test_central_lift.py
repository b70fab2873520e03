"""The lift's private Lloyd step for seed 003 unprojected (issue 41): each center moves as far
as its noisy mean is worth, and a pure-noise mean moves none."""

import numpy as np

from shoal.server.decoders.central.lift import shrunk_lloyd_step
from shoal.server.decoders.central.noisy_average import calibrate


def test_a_shrunk_lloyd_step_moves_a_center_as_far_as_its_noisy_mean_is_worth():
    """Many rows at a generous eps: the centers move (nearly) to their parts' means. A handful
    of rows at a small eps: the noise would swamp the mean, so the centers stay where they were."""
    rng = np.random.default_rng(0)
    true = np.array([[0.4, 0.0], [-0.4, 0.0]])
    start = true + np.array([[0.1, 0.1], [-0.1, -0.1]])
    many = true[rng.integers(0, 2, 20_000)] + 0.05 * rng.standard_normal((20_000, 2))
    moved, _, lam = shrunk_lloyd_step(many, start, calibrate(2, 4.0, 1e-6), rng)
    assert (lam > 0.95).all() and np.abs(moved - true).max() < 0.02
    few = true[rng.integers(0, 2, 12)] + 0.05 * rng.standard_normal((12, 2))
    stayed = 0
    for _ in range(200):  # the gate lets a pure-noise mean through with probability 1e-3 per center
        kept, _, lam = shrunk_lloyd_step(few, start, calibrate(2, 0.05, 1e-6), rng)
        stayed += int(np.array_equal(kept, start) and (lam == 0).all())
    assert stayed >= 195
