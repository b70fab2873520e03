"""Private part sizes and sums (the lift of seed 000, NoisyAVG's role): unbiased,
noise as calibrated, the delta actually spent within budget, and (eps, delta)-DP
on the worst-case neighbours as released on the wire (integers)."""

from fractions import Fraction

import numpy as np
import pytest

from shoal.common.errors import ConfigError
from shoal.server.decoders.central.noisy_average import (
    SIZE_SHARE,
    calibrate,
    exact_parts,
    fixed_point,
    noisy_means,
    release,
    spent_delta,
)
from tests.dp_audit import joint_counts, simultaneous_lower_bound


@pytest.mark.parametrize("dim,eps,delta", [(1, 1.0, 1e-6), (16, 0.7, 5e-7), (100, 4.0, 1e-8)])
def test_calibration_spends_at_most_its_delta(dim, eps, delta):
    spec = calibrate(dim, eps, delta)
    assert spent_delta(spec) <= delta


def test_sizes_and_sums_are_unbiased_with_the_calibrated_spread():
    spec = calibrate(3, 1.0, 1e-6)
    rng = np.random.default_rng(0)
    sizes = np.full(40_000, 500, dtype=np.int64)
    sums = np.tile(np.array([1000, -2000, 0], dtype=np.int64), (40_000, 1))
    ns, nx = release(sizes, sums, spec, rng)
    assert ns.dtype == np.int64 and nx.dtype == np.int64  # what leaves the curator: integers
    assert abs(ns.mean() - 500) < 5 * ns.std() / np.sqrt(ns.size)
    np.testing.assert_allclose(nx.mean(0), [1000, -2000, 0], atol=5 * nx.std() / np.sqrt(nx.shape[0]))
    assert nx.std(0) / 2.0**spec.bits == pytest.approx(np.full(3, spec.sum_sd), rel=0.03)


def test_parts_are_summed_on_the_public_fixed_point_grid():
    rng = np.random.default_rng(1)
    x = rng.uniform(-0.5, 0.5, size=(1000, 4))
    labels = rng.integers(0, 3, size=1000)
    sizes, sums = exact_parts(x, labels, 3, 10)
    assert sizes.tolist() == np.bincount(labels, minlength=3).tolist()
    for j in range(3):
        assert sums[j].tolist() == fixed_point(x[labels == j], 10).sum(0).tolist()


def test_a_part_whose_noisy_size_is_below_one_has_no_mean():
    spec = calibrate(2, 1.0, 1e-6)
    x = np.array([[0.5, 0.5]])
    means, sizes = noisy_means(x, np.array([0]), 2, spec, np.random.default_rng(2))
    assert np.isnan(means[1]).all() or sizes[1] >= 1  # part 1 is empty: a mean only if its noise made it >= 1


def _wire(spec, present, runs, seed):
    """Runs of the release on one part: three points, plus a fourth of norm 1
    (the farthest the sum can move) when ``present``. Codes: (size, sum bin)."""
    x = np.array([[0.3], [-0.2], [0.1]] + ([[1.0]] if present else []))
    sizes, sums = exact_parts(x, np.zeros(len(x), dtype=np.int64), 1, spec.bits)
    ns, nx = release(np.repeat(sizes, runs), np.repeat(sums, runs, axis=0), spec, np.random.default_rng(seed))
    return ns, nx[:, 0]


def _audit(spec, runs=200_000):
    """Bins reach into both tails (a Gaussian's privacy loss grows there); the
    size and the sum are binned jointly (one release)."""
    s1, v1 = _wire(spec, True, runs, 3)
    s2, v2 = _wire(spec, False, runs, 4)
    q = [0.0005, 0.002, 0.01, 0.05, 0.2, 0.5, 0.8, 0.95, 0.99, 0.998, 0.9995]
    edges = np.quantile(np.concatenate([v1, v2]), q)
    size_edges = np.quantile(np.concatenate([s1, s2]), [0.05, 0.5, 0.95])
    code = lambda s, v: np.searchsorted(size_edges, s) * (len(q) + 1) + np.searchsorted(edges, v)  # noqa: E731
    return simultaneous_lower_bound(*joint_counts(code(s1, v1), code(s2, v2)))


def test_release_is_eps_dp_on_the_wire_for_worst_case_neighbours():
    spec = calibrate(1, 1.0, 1e-6)
    assert _audit(spec) <= 1.0


def test_the_audit_catches_a_release_run_at_three_times_its_epsilon():
    # A Gaussian's (eps, delta = 1e-6) loss sits in tails of mass ~delta that 2e5 runs
    # barely reach (the correct release measures ~0.45); at 3x eps the loss shows (~1.6).
    spec = calibrate(1, 1.0, 1e-6)
    weak = type(spec)(spec.dim, spec.bits, (spec.size_scale[0] // 3, spec.size_scale[1]), max(1, spec.sigma_sq // 9),
                      spec.shares, spec.clip, spec.epsilon, spec.delta)
    assert _audit(weak) > 1.0


@pytest.mark.parametrize("dim,eps,delta,releases,match", [
    (0, 1.0, 1e-6, 1, "dim >= 1"),
    (2, 0.0, 1e-6, 1, "eps > 0"),
    (2, 1.0, 0.0, 1, "delta in \\(0, 1\\)"),
    (2, 1.0, 1e-6, 0, "releases must be an integer >= 1"),
])
def test_calibrate_rejects_invalid_parameter(dim, eps, delta, releases, match):
    with pytest.raises(ConfigError, match=match):
        calibrate(dim, eps, delta, releases)


@pytest.mark.parametrize("releases", [1, 2, 3, 7])
@pytest.mark.parametrize("dim,eps,delta", [(2, 0.3, 5e-7), (16, 1.2, 5e-7), (100, 4.0, 1e-8)])
def test_several_releases_spend_at_most_the_budget_together(dim, eps, delta, releases):
    """The lift's steps share one budget: the sizes' exact Laplace eps times the releases plus
    the sums' eps is <= eps exactly, and the sums' composed zCDP with every draw's tail spends
    at most delta (``spent_delta`` recomputes it from the noise, not from the calibration)."""
    spec = calibrate(dim, eps, delta, releases)
    t, s = spec.size_scale
    assert spec.releases == releases
    assert Fraction(s, t) * releases <= Fraction(eps) * Fraction(SIZE_SHARE) * (1 + Fraction(1, 10**9))
    assert spent_delta(spec) <= delta  # and it raises if sizes + sums spend more than eps, exactly


def test_releases_composed_in_zcdp_average_back_to_one_release_at_the_whole_budget():
    """T releases each carry T times one release's sum variance (rho / T each), so their average
    is as precise as one release at the whole budget (up to the rounding of the grid and of
    the integer sigma^2); T separate (eps / T, delta / T) calibrations would be 2.2x worse at T = 2."""
    one = calibrate(8, 1.0, 1e-6)
    for releases in (2, 3):
        each = calibrate(8, 1.0, 1e-6, releases)
        assert each.sum_sd**2 / releases == pytest.approx(one.sum_sd**2, rel=0.02)
        separate = calibrate(8, 1.0 / releases, 1e-6 / releases)
        assert separate.sum_sd**2 / releases > 1.5 * one.sum_sd**2


def test_two_releases_of_the_same_part_are_eps_dp_on_the_wire_together():
    """Both releases of a worst-case neighbour pair, audited through their sum (post-processing
    of the transcript, so its loss is a lower bound on the pair's): within eps."""
    spec = calibrate(1, 1.0, 1e-6, releases=2)
    a1, b1 = _wire(spec, True, 200_000, 5)
    a2, b2 = _wire(spec, True, 200_000, 6)
    c1, d1 = _wire(spec, False, 200_000, 7)
    c2, d2 = _wire(spec, False, 200_000, 8)
    s1, v1, s2, v2 = a1 + a2, b1 + b2, c1 + c2, d1 + d2
    q = [0.0005, 0.002, 0.01, 0.05, 0.2, 0.5, 0.8, 0.95, 0.99, 0.998, 0.9995]
    edges = np.quantile(np.concatenate([v1, v2]), q)
    size_edges = np.quantile(np.concatenate([s1, s2]), [0.05, 0.5, 0.95])
    code = lambda s, v: np.searchsorted(size_edges, s) * (len(q) + 1) + np.searchsorted(edges, v)  # noqa: E731
    assert simultaneous_lower_bound(*joint_counts(code(s1, v1), code(s2, v2))) <= 1.0


def test_a_tiny_epsilon_coarsens_the_grid_so_the_draws_stay_few_and_the_budget_holds():
    from shoal.server.decoders.central.noisy_average import MAX_SHARES, spent_delta

    fine, tiny = calibrate(40, 1.0, 5e-7), calibrate(40, 0.005, 5e-7)
    assert tiny.bits < fine.bits and tiny.shares <= MAX_SHARES
    assert spent_delta(tiny) <= 5e-7 * (1 + 1e-9)
