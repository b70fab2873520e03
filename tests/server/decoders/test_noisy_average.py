"""Private part sizes and sums (the lift of seed 000, NoisyAVG's role): unbiased,
noise as calibrated, the delta actually spent within budget, and (eps, delta)-DP
on the worst-case neighbours as released on the wire (integers)."""

import math

import numpy as np
import pytest

from shoal.common.errors import ConfigError
from shoal.server.decoders.central.noisy_average import (
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
    column, nx = release(sizes, sums, spec, rng)
    assert column.dtype == np.int64 and nx.dtype == np.int64  # what leaves the curator: integers
    ns = spec.sizes_of(column)
    assert abs(ns.mean() - 500) < 5 * ns.std() / np.sqrt(ns.size)
    assert ns.var() == pytest.approx(spec.size_var, rel=0.03)
    np.testing.assert_allclose(nx.mean(0), [1000, -2000, 0], atol=5 * nx.std() / np.sqrt(nx.shape[0]))
    assert nx.std(0) / 2.0**spec.bits == pytest.approx(np.full(3, spec.sum_sd), rel=0.03)


def test_parts_are_summed_on_the_public_fixed_point_grid():
    rng = np.random.default_rng(1)
    x = rng.uniform(-0.5, 0.5, size=(1000, 4))
    labels = rng.integers(0, 3, size=1000)
    sizes, sums = exact_parts(x, labels, 3, 10, np.random.default_rng(9))
    assert sizes.tolist() == np.bincount(labels, minlength=3).tolist()
    rounded = fixed_point(x, 10, np.random.default_rng(9))  # the same draws, row by row
    assert np.all(np.abs(rounded - x * 2**10) < 1)  # each coordinate within one grid unit
    for j in range(3):
        assert sums[j].tolist() == rounded[labels == j].sum(0).tolist()


def test_a_tight_clusters_sum_on_a_coarse_grid_is_unbiased():
    """Stochastic rounding: every point of a tight cluster sits at the same place between two grid
    points, where nearest rounding moved them all the same way (a bias no release averages out);
    floor + Bernoulli(fraction) is unbiased, so the sum's error is the rounding's spread alone."""
    x = np.full((20_000, 2), [0.30, -0.11]) + np.random.default_rng(3).normal(0, 1e-4, (20_000, 2))
    sizes, sums = exact_parts(x, np.zeros(len(x), dtype=np.int64), 1, 4, np.random.default_rng(4))
    mean = sums[0] / 2**4 / sizes[0]
    nearest = np.rint(x * 2**4).sum(0) / 2**4 / len(x)
    np.testing.assert_allclose(mean, x.mean(0), atol=5 * 0.5 / 2**4 / np.sqrt(len(x)))
    assert np.abs(nearest - x.mean(0)).max() > 0.01  # what nearest rounding did here


class _AlwaysUp:
    """A stand-in for the curator's generator whose uniforms are all 0: every coordinate with a
    fractional part rounds up, the longest stochastic rounding there is."""

    def random(self, shape):
        return np.zeros(shape)


def test_a_rounded_point_is_never_longer_than_the_sensitivity():
    """d = 200 at 2^3 per unit: a point with one long coordinate (7.9 grid units) and 199 tiny ones
    (0.01) rounds up to norm sqrt(64 + 199) = 16.2 > 2^3 + sqrt(200) / 2 = 15.07, the sensitivity;
    it is rounded to nearest instead (norm 8). A point that stays within rounds stochastically."""
    far = np.full(200, 0.01 / 8)
    far[0] = 7.9 / 8
    near = np.full(200, 0.01 / 8)
    near[0] = 4.5 / 8  # rounds up to norm sqrt(25 + 199) = 14.97
    r = fixed_point(np.stack([far, near]), 3, _AlwaysUp())
    bound = 2.0**3 + np.sqrt(200) / 2
    assert np.sqrt((r * r).sum(axis=1)).max() <= bound
    assert r[0].tolist() == np.rint(far * 8).astype(int).tolist()  # the fallback: nearest
    assert r[1].tolist() == np.ceil(near * 8).astype(int).tolist()  # stochastic (all up), within the bound
    spec = calibrate(200, 1.0, 1e-6)
    assert spec.sensitivity == math.hypot(2.0**spec.bits + np.sqrt(200) / 2, spec.size_weight)  # and its size weight


def test_a_release_of_several_units_sums_them_and_draws_its_size_once():
    """A release of m units: the fixed-point sums and the weighted sizes m times over with m x shares
    Gaussian draws per coordinate (variance m x one unit's: sd / sqrt(m) on the sum's scale, and
    ``size_var_at(m)`` = size_var / m on the size's)."""
    spec = calibrate(3, 1.0, 1e-6, releases=4)
    sizes = np.full(40_000, 500, dtype=np.int64)
    sums = np.tile(np.array([1000, -2000, 0], dtype=np.int64), (40_000, 1))
    column, nx = release(sizes, sums, spec, np.random.default_rng(5), units=3)
    ns = spec.sizes_of(column, units=3)
    assert abs(ns.mean() - 500) < 5 * ns.std() / np.sqrt(ns.size)
    np.testing.assert_allclose(nx.mean(0) / 3, [1000, -2000, 0], atol=5 * nx.std() / 3 / np.sqrt(nx.shape[0]))
    assert nx.std(0) / 3 / 2.0**spec.bits == pytest.approx(np.full(3, spec.sum_sd / np.sqrt(3)), rel=0.03)
    assert ns.var() == pytest.approx(spec.size_var_at(3), rel=0.05)
    assert spec.size_var_at(3) == pytest.approx(spec.size_var / 3)


@pytest.mark.parametrize("units", [0, 5, True, 1.0])
def test_a_release_refuses_invalid_units(units):
    spec = calibrate(2, 1.0, 1e-6, releases=4)
    with pytest.raises(ConfigError, match="a release takes 1 to 4 units"):
        release(np.array([3]), np.array([[1, 2]]), spec, np.random.default_rng(0), units=units)


def test_a_part_whose_noisy_size_is_below_one_has_no_mean():
    spec = calibrate(2, 1.0, 1e-6)
    x = np.array([[0.5, 0.5]])
    means, sizes = noisy_means(x, np.array([0]), 2, spec, np.random.default_rng(2))
    assert np.isnan(means[1]).all() or sizes[1] >= 1  # part 1 is empty: a mean only if its noise made it >= 1


def _wire(spec, present, runs, seed, units=1):
    """Runs of the release on one part: three points, plus a fourth of norm 1
    (the farthest the sum can move) when ``present``. Codes: (size, sum bin)."""
    x = np.array([[0.3], [-0.2], [0.1]] + ([[1.0]] if present else []))
    sizes, sums = exact_parts(x, np.zeros(len(x), dtype=np.int64), 1, spec.bits, np.random.default_rng(seed))
    column, nx = release(np.repeat(sizes, runs), np.repeat(sums, runs, axis=0), spec, np.random.default_rng(seed), units)
    return column, nx[:, 0]


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


def test_a_release_of_all_its_specs_units_is_eps_dp_on_the_wire():
    """The partition stage's releases take several units (``release(units=...)``): a spec of three
    releases spent in one release of three units, audited on the worst-case neighbours: within eps."""
    spec = calibrate(1, 1.0, 1e-6, releases=3)
    s1, v1 = _wire(spec, True, 200_000, 11, units=3)
    s2, v2 = _wire(spec, False, 200_000, 12, units=3)
    q = [0.0005, 0.002, 0.01, 0.05, 0.2, 0.5, 0.8, 0.95, 0.99, 0.998, 0.9995]
    edges = np.quantile(np.concatenate([v1, v2]), q)
    size_edges = np.quantile(np.concatenate([s1, s2]), [0.05, 0.5, 0.95])
    code = lambda s, v: np.searchsorted(size_edges, s) * (len(q) + 1) + np.searchsorted(edges, v)  # noqa: E731
    assert simultaneous_lower_bound(*joint_counts(code(s1, v1), code(s2, v2))) <= 1.0


def test_the_audit_catches_a_release_run_at_three_times_its_epsilon():
    # A Gaussian's (eps, delta = 1e-6) loss sits in tails of mass ~delta that 2e5 runs
    # barely reach (the correct release measures ~0.45); at 3x eps the loss shows (~1.6).
    spec = calibrate(1, 1.0, 1e-6)
    weak = type(spec)(spec.dim, spec.bits, spec.size_weight, max(1, spec.sigma_sq // 9),
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
    """The lift's steps share one budget: the sizes and sums' composed zCDP, over d + 1
    coordinates at the sensitivity of a point and its size weight, with every draw's tail spends at
    most delta at eps (``spent_delta`` recomputes it from the noise, not from the calibration)."""
    spec = calibrate(dim, eps, delta, releases)
    assert spec.releases == releases and spec.epsilon == eps
    assert spec.sensitivity == pytest.approx(math.hypot(2.0**spec.bits + math.sqrt(dim) / 2, spec.size_weight))
    assert spent_delta(spec) <= delta


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


def test_a_spec_refuses_a_size_weight_below_one():
    spec = calibrate(2, 1.0, 1e-6)
    with pytest.raises(ConfigError, match="size_weight 0"):
        type(spec)(spec.dim, spec.bits, 0, spec.sigma_sq, spec.shares, spec.clip, spec.epsilon, spec.delta)


@pytest.mark.parametrize("dim", [2, 6, 16, 100])
def test_the_size_weight_makes_a_unit_norm_mean_least_noisy(dim):
    """A mean of norm 1 over m points has variance (d sd^2 + var(size)) / m^2 (``mean_variance``);
    the weight c = d^(-1/4) (of 2^bits) minimises (1 + c^2)(d + 1 / c^2), the only part of it that
    the weight moves (the sensitivity grows as sqrt(1 + c^2)): half or twice the weight is noisier."""
    spec = calibrate(dim, 1.0, 1e-6, releases=4)
    c = spec.size_weight / 2.0**spec.bits
    assert c == pytest.approx(dim**-0.25, rel=0.01)
    cost = lambda c: (1 + c * c) * (dim + 1 / (c * c))  # noqa: E731
    assert cost(c) < cost(c / 2) and cost(c) < cost(2 * c)
    assert spec.size_var == pytest.approx(spec.sum_sd**2 * 4.0**spec.bits / spec.size_weight**2)
