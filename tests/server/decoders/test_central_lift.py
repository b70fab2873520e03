"""The lift's private Lloyd steps (issue 41): each center moves as far as its noisy mean is
worth, a pure-noise mean moves none, a step that repeats a converged partition averages
its release with the last instead of replacing it, and accelerated steps carry on where the
centers still creep the same way, and only there."""

import numpy as np
import pytest

from shoal.deploy.simulation.datasets import overlapping_mixture
from shoal.server.decoders.central.lift import (
    CONTRACTION_CAP,
    contraction,
    lloyd_steps,
    shrunk_lloyd_step,
)
from shoal.server.decoders.central.noisy_average import calibrate
from shoal.server.decoders.kmeans import kmeans_cost

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


def test_contraction_is_the_pooled_ratio_of_the_moves_within_its_cap():
    """Moves that shrink by half, the same way, at every center: rho = 0.5; the same way but
    barely shrinking: the cap; reversed, or no last move: 0."""
    rng = np.random.default_rng(3)
    last = rng.standard_normal((8, 6))
    assert contraction(last, 0.5 * last) == pytest.approx(0.5)
    assert contraction(last, 0.99 * last) == CONTRACTION_CAP
    assert contraction(last, -0.5 * last) == 0.0
    assert contraction(np.zeros((8, 6)), last) == 0.0


def test_contraction_is_zero_for_moves_unrelated_to_the_last():
    """Independent moves (a converged center's noise) agree in direction by chance: the pooled
    ratio is then within a few of its null sds (``CONTRACTION_SDS``), and nothing is carried on;
    a ratio of 0.5 under a little noise is seen."""
    rng = np.random.default_rng(4)
    chance = [contraction(rng.standard_normal((5, 6)), rng.standard_normal((5, 6))) for _ in range(400)]
    assert np.mean(np.array(chance) > 0) < 0.05
    last = rng.standard_normal((5, 6))
    assert contraction(last, 0.5 * last + 0.05 * rng.standard_normal((5, 6))) > 0.4


def test_accelerated_steps_creep_further_on_broad_overlapping_clusters():
    """The overlapping generator, where Lloyd converges over tens of steps: six accelerated steps
    from random starts end below six plain ones (same releases' noise draws), and every step after
    the first is carried on by a factor in [1, 1 / (1 - cap)]."""
    ds = overlapping_mixture(seed=0)
    x = ds.bound.to_ball(ds.points)
    spec = calibrate(x.shape[1], 8.0, 1e-6, releases=6)
    fast, plain = [], []
    for r in range(4):
        start = x[np.random.default_rng(r).choice(len(x), ds.k, replace=False)]
        a = lloyd_steps(x, start, spec, np.random.default_rng(100 + r), 6, accelerate=True)
        b = lloyd_steps(x, start, spec, np.random.default_rng(100 + r), 6)
        assert len(a.carried) == 5 and all(1 <= f <= 1 / (1 - CONTRACTION_CAP) for f in a.carried)
        assert b.carried == (1.0,) * 5
        fast.append(kmeans_cost(x, a.centers))
        plain.append(kmeans_cost(x, b.centers))
    assert np.mean(fast) < 0.997 * np.mean(plain)  # measured 0.994; without acceleration exactly 1


def test_accelerated_steps_leave_converged_tight_clusters_as_the_plain_ones():
    """Two tight clusters started at their means plus a release's noise: the combined steps
    average the releases, their moves are noise, and acceleration carries none of them on (it
    would double the squared error: ``contraction``)."""
    rng = np.random.default_rng(1)
    x = _points(4_000, rng)
    lab = (x[:, 0] < 0).astype(int)
    exact = np.array([x[lab == j].mean(0) for j in range(2)])
    spec = calibrate(2, 0.3, 1e-6, releases=4)
    v = (2 * spec.sum_sd**2 + spec.size_var) / 2_000**2
    for i in range(100):
        start = exact + np.sqrt(v / 2) * rng.standard_normal((2, 2))
        a = lloyd_steps(x, start, spec, np.random.default_rng(1000 + i), 4, np.full(2, v), accelerate=True)
        b = lloyd_steps(x, start, spec, np.random.default_rng(1000 + i), 4, np.full(2, v))
        assert a.carried == (1.0,) * 3
        np.testing.assert_array_equal(a.centers, b.centers)
