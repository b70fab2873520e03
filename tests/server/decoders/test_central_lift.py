"""The lift's private Lloyd steps (issue 41): each center moves as far as its noisy mean is
worth, a pure-noise mean moves none, and a step that repeats a converged partition averages
its release with the last instead of replacing it."""

import numpy as np

from shoal.server.decoders.central.lift import shrunk_lloyd_step
from shoal.server.decoders.central.noisy_average import calibrate

TRUE = np.array([[0.4, 0.0], [-0.4, 0.0]])


def _points(n: int, rng: np.random.Generator) -> np.ndarray:
    return TRUE[rng.integers(0, 2, n)] + 0.05 * rng.standard_normal((n, 2))


def test_a_shrunk_lloyd_step_moves_a_center_as_far_as_its_noisy_mean_is_worth():
    """Many rows at a generous eps: the centers move (nearly) to their parts' means. A handful
    of rows at a small eps: the noise would swamp the mean, so the centers stay where they were."""
    rng = np.random.default_rng(0)
    start = TRUE + np.array([[0.1, 0.1], [-0.1, -0.1]])
    step = shrunk_lloyd_step(_points(20_000, rng), start, calibrate(2, 4.0, 1e-6), rng)
    assert (step.lam > 0.95).all() and np.abs(step.centers - TRUE).max() < 0.02
    few = _points(12, rng)
    stayed = 0
    for _ in range(200):  # the gate lets a pure-noise mean through with probability 1e-3 per center
        kept = shrunk_lloyd_step(few, start, calibrate(2, 0.05, 1e-6), rng)
        stayed += int(np.array_equal(kept.centers, start) and (kept.lam == 0).all() and np.isnan(kept.var).all())
    assert stayed >= 195


def test_a_step_from_a_converged_noisy_mean_averages_the_two_releases():
    """Start at the parts' exact means plus noise of the variance a release has (the first
    step's answer): the next step's center is the inverse-variance average, so its squared
    error is about half of either release's (two releases of equal noise), where taking the
    new mean (lam = 1) would keep the whole of it."""
    rng = np.random.default_rng(1)
    x = _points(4_000, rng)
    lab = (x[:, 0] < 0).astype(int)
    exact = np.array([x[lab == j].mean(0) for j in range(2)])
    spec = calibrate(2, 0.3, 1e-6, releases=2)
    v = (2 * spec.sum_sd**2 + spec.size_var) / 2_000**2  # a release's mean variance at about 2,000 rows
    errors, lams = [], []
    for _ in range(200):
        start = exact + np.sqrt(v / 2) * rng.standard_normal((2, 2))
        step = shrunk_lloyd_step(x, start, spec, rng, start_var=np.full(2, v))
        errors.append(((step.centers - exact) ** 2).sum(1))
        lams.append(step.lam)
    assert 0.4 < np.mean(lams) < 0.65
    assert np.mean(errors) < 0.65 * v
    assert np.all(np.isfinite(step.var)) and np.all(step.var < v)


def test_a_step_from_a_noisy_mean_that_is_far_off_follows_the_new_mean():
    """A center an earlier step left far from its part's mean (Lloyd still travelling): lam
    near 1, the center lands at the new noisy mean."""
    rng = np.random.default_rng(2)
    x = _points(20_000, rng)
    spec = calibrate(2, 2.0, 1e-6, releases=2)
    start = TRUE + np.array([[0.15, 0.05], [-0.15, -0.05]])
    step = shrunk_lloyd_step(x, start, spec, rng, start_var=np.full(2, 1e-7))
    assert (step.lam > 0.98).all() and np.abs(step.centers - TRUE).max() < 0.02
