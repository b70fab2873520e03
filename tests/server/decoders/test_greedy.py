"""Seed 001's greedy in the curator model (server/decoders/central/greedy.py):
the weighted ball values are unbiased and (eps, delta)-DP on the wire for
worst-case neighbours (and the audit catches a weaker release), the elbow's
per-point drops stay within their stated sensitivity, the greedy orders
well-separated clusters first, and the elbow suggests their number; the
elbow's k-dimensional release is eps-DP on its wire doubles for worst-case
neighbouring data sets (and the audit catches a weaker one)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats

from shoal.common.cost_drops import DIAMETER, point_drops, prefix_costs
from shoal.common.errors import ConfigError
from shoal.common.kinds.central import GREEDY_Q, curator_guarantee, derive_central
from shoal.common.mechanisms.threshold_histogram import (
    HistogramNoise,
    calibrate_histogram,
    histogram_guarantee,
)
from shoal.server.decoders.central.greedy import (
    ELBOW_BITS,
    elbow_curve,
    elbow_sensitivity,
    fixed_point_weights,
    noisy_drops,
    noisy_sums,
    released_costs,
)
from shoal.server.decoders.central.pipeline import central_kmeans, privacy_statement
from shoal.server.decoders.greedy_order import Balls, greedy_order
from tests.dp_audit import joint_counts, simultaneous_lower_bound

EPS, DELTA = 1.0, 0.02  # a delta large enough to measure


def test_fixed_point_weights_are_unbiased_and_never_exceed_q():
    rng = np.random.default_rng(0)
    y = rng.uniform(-0.5, 0.5, size=(2000, 3))
    centers = np.zeros_like(y)
    w = np.clip(1 - np.linalg.norm(y, axis=1) / 0.8, 0, 1) ** 2
    draws = np.stack([fixed_point_weights(y, centers, 0.8, 2, GREEDY_Q, rng) for _ in range(400)])
    assert draws.min() >= 0 and draws.max() <= GREEDY_Q
    frac = GREEDY_Q * w - np.floor(GREEDY_Q * w)
    sd = np.sqrt(frac * (1 - frac) / draws.shape[0])  # each draw is floor(Q w) + Bernoulli(frac)
    assert np.all(np.abs(draws.mean(0) - GREEDY_Q * w) <= 5 * sd + 1e-9)
    assert np.all((draws == np.floor(GREEDY_Q * w)) | (draws == np.floor(GREEDY_Q * w) + 1))


def test_noisy_ball_sums_are_unbiased():
    noise = calibrate_histogram(EPS, 1e-6, 1, 1, weight=GREEDY_Q)
    rng = np.random.default_rng(1)
    sums = np.full(50_000, 1234, dtype=np.int64)
    out = noisy_sums(sums, noise, rng)
    assert abs(out.mean() - 1234) < 5 * noise.sd / math.sqrt(sums.size)
    assert out.std() == pytest.approx(noise.sd, rel=0.03)


def _release(noise: HistogramNoise, value: int | None, runs: int, rng: np.random.Generator) -> np.ndarray:
    """What leaves the curator for one cell of this sum over ``runs`` releases: its noisy
    sum when it passes, else the marker below every value (None: the cell is empty,
    never considered)."""
    low = np.iinfo(np.int64).min
    if value is None:
        return np.full(runs, low)
    out = noisy_sums(np.full(runs, value, dtype=np.int64), noise, rng)
    return np.where(out >= noise.threshold, out, low)


def _audit(noise: HistogramNoise, eps: float, runs: int = 60_000) -> float:
    """The largest lower confidence bound of P(A | D) - e^eps P(A | D') over neighbour
    pairs (a cell's sum v vs v + Q: one point of the largest weight added; v = None: the
    point alone in its cell) and events A = {released value >= t} and their complements,
    t over the observed values (the discrete Gaussian's likelihood ratio is monotone in
    the shift, so upper sets hold the worst case). <= delta for an (eps, delta) release."""
    rng = np.random.default_rng(7)
    q, tau = noise.weight, noise.threshold
    bases: list[int | None] = [None, 0, tau - 2 * q, tau - q, tau, tau + 2 * int(noise.sd)]
    worst = -np.inf
    for v in bases:
        a = _release(noise, v, runs, rng)
        b = _release(noise, (0 if v is None else v) + q, runs, rng)
        ts = np.unique(np.concatenate([a, b]))[::7]
        alpha = 0.05 / (4 * len(bases) * ts.size)
        for first, second in ((a, b), (b, a)):
            for upper in (True, False):
                hit1 = np.array([(first >= t).sum() if upper else (first < t).sum() for t in ts])
                hit2 = np.array([(second >= t).sum() if upper else (second < t).sum() for t in ts])
                lo = np.where(hit1 > 0, stats.beta.ppf(alpha, np.maximum(hit1, 1e-9), runs - hit1 + 1), 0.0)
                hi = np.where(hit2 < runs, stats.beta.ppf(1 - alpha, hit2 + 1, np.maximum(runs - hit2, 1e-9)), 1.0)
                worst = max(worst, float(np.max(lo - math.exp(eps) * hi)))
    return worst


def test_ball_values_are_eps_delta_dp_on_the_wire_for_worst_case_neighbours():
    noise = calibrate_histogram(EPS, DELTA, 1, 1, weight=GREEDY_Q)
    assert histogram_guarantee(noise, EPS) <= DELTA
    assert _audit(noise, EPS) <= DELTA


@pytest.mark.parametrize("weaken", ["a quarter of the variance", "the threshold without the weight"])
def test_the_audit_catches_a_weaker_value_release(weaken):
    noise = calibrate_histogram(EPS, DELTA, 1, 1, weight=GREEDY_Q)
    weak = (replace(noise, sigma_sq=max(1, noise.sigma_sq // 4)) if weaken.startswith("a quarter")
            else replace(noise, threshold=noise.threshold - 3 * GREEDY_Q, weight=1))
    assert _audit(weak, EPS) > DELTA


def test_a_weighted_cover_pays_for_its_weight():
    one, heavy = calibrate_histogram(0.5, 1e-6, 8, 1), calibrate_histogram(0.5, 1e-6, 8, 1, weight=GREEDY_Q)
    assert heavy.sd / one.sd == pytest.approx(GREEDY_Q, rel=0.02)
    assert histogram_guarantee(heavy, 0.5) <= 1e-6
    assert histogram_guarantee(replace(heavy, weight=2 * GREEDY_Q), 0.5) > 1e-6


@pytest.mark.parametrize("weight", [0, -3])
def test_calibrate_rejects_invalid_weight(weight):
    with pytest.raises(ConfigError, match="weight"):
        calibrate_histogram(1.0, 1e-6, 8, 1, weight=weight)


def test_histogram_noise_rejects_a_threshold_below_one_plus_its_weight():
    with pytest.raises(ConfigError, match=r"threshold 16 >= 17 \(1 \+ weight\)"):
        HistogramNoise(levels=1, shifts=1, sigma_sq=100, shares=1, threshold=16, clip=400, weight=16)


@pytest.mark.parametrize("z", [1, 2])
def test_a_points_elbow_drops_stay_within_the_stated_sensitivity(z):
    """The drops of one point's costs to the first k' centers sum to its cost to the
    first center, at most D^z: the elbow's noise is calibrated to that (plus rounding)."""
    rng = np.random.default_rng(3)
    centers = rng.normal(size=(12, 4))
    centers /= np.linalg.norm(centers, axis=1, keepdims=True)  # on the sphere: the farthest points
    x = -centers[rng.integers(0, 12, 500)]
    costs = prefix_costs(x, centers, z)
    drops = np.concatenate([costs[:, :-1] - costs[:, 1:], costs[:, -1:]], axis=1)
    assert drops.min() >= -1e-12
    assert drops.sum(1).max() <= DIAMETER**z + 1e-9
    assert costs.max() == pytest.approx(DIAMETER**z, rel=0.1)  # the bound is attained, not loose


# Elbow audit: unit-sphere centers and a small data set D; the neighbour D' adds one point
# at -e1, the farthest from the first center (cost D^2 = 4, the sensitivity's bound). With
# the centers in the order (e1, -e1, e2) its drops are (4, 0, 0): all of the L1 on one
# coordinate; in the order (e1, e2, -e1) they are (2, 2, 0): spread over two.
_ELBOW_CENTERS = {"concentrated": [[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0]],
                  "spread": [[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]]}
_ELBOW_D = np.array([[0.5, 0.1], [0.2, -0.6], [-0.3, 0.3], [0.0, 0.9]])
_FAR = np.array([[-1.0, 0.0]])


def _elbow_wire(x: np.ndarray, centers: np.ndarray, runs: int, eps_used: float, z_used: int = 2,
                seed: int = 0) -> np.ndarray:
    """``runs`` independent elbow releases of ``x`` as the result carries them: the cost
    doubles cost(1..k) of ``released_costs`` (the noise at ``eps_used`` and ``z_used``'s
    sensitivity; a correct release uses the claimed eps and the objective's z = 2)."""
    drops = np.broadcast_to(point_drops(x, centers, 2), (runs, x.shape[0], centers.shape[0]))
    return released_costs(noisy_drops(drops, z_used, eps_used, np.random.default_rng(seed)))


def _elbow_audit(order: str, eps_used: float, z_used: int = 2, runs: int = 200_000) -> float:
    """The 95% simultaneous lower bound on the log likelihood ratio of the elbow's wire
    values for D vs D + the far point, over bins of the optimal test statistic: the wire
    drops (differences of the cost doubles, times 2^b) scored by sum_j |o_j - a_j| -
    |o_j - b_j| against both data sets' exact drop sums a, b (the discrete Laplace
    product's log likelihood ratio up to rounding). Any binning gives a valid bound."""
    centers = np.array(_ELBOW_CENTERS[order])
    near, far = _ELBOW_D, np.vstack([_ELBOW_D, _FAR])
    a, b = (point_drops(v, centers, 2).sum(0) * 2**ELBOW_BITS for v in (near, far))
    scores = []
    for seed, v in enumerate((near, far)):
        costs = _elbow_wire(v, centers, runs, eps_used, z_used, seed)
        wire = np.concatenate([costs[:, :-1] - costs[:, 1:], costs[:, -1:]], axis=1) * 2**ELBOW_BITS
        scores.append((np.abs(wire - a) - np.abs(wire - b)).sum(1))
    reach = float(np.abs(a - b).sum()) + 2 * centers.shape[0]
    edges = np.linspace(-reach, reach, 41)
    codes = [np.digitize(sc, edges) for sc in scores]
    return simultaneous_lower_bound(*joint_counts(*codes))


def test_the_elbow_wire_values_are_exact_multiples_of_its_fixed_point_unit():
    """An attacker reading the cost doubles learns the noisy integers and nothing more:
    each cost times 2^b is an integer, and the drops come back exactly."""
    centers = np.array(_ELBOW_CENTERS["spread"])
    rng = np.random.default_rng(11)
    noisy = noisy_drops(np.broadcast_to(point_drops(_ELBOW_D, centers, 2), (5000, 4, 3)), 2, 1.0, rng)
    costs = released_costs(noisy)
    scaled = costs * 2**ELBOW_BITS
    assert np.array_equal(scaled, np.round(scaled))
    back = np.concatenate([scaled[:, :-1] - scaled[:, 1:], scaled[:, -1:]], axis=1).astype(np.int64)
    assert np.array_equal(back, noisy)
    curve, _ = elbow_curve(_ELBOW_D, centers, 2, 1.0, rng)
    assert all(float(c["cost"] * 2**ELBOW_BITS).is_integer() for c in curve)


def test_the_elbow_drops_are_unbiased():
    centers = np.array(_ELBOW_CENTERS["spread"])
    runs = 100_000
    noisy = noisy_drops(np.broadcast_to(point_drops(_ELBOW_D, centers, 2), (runs, 4, 3)), 2, 1.0,
                        np.random.default_rng(12))
    exact = point_drops(_ELBOW_D, centers, 2).sum(0) * 2**ELBOW_BITS
    sd = math.sqrt(2) * elbow_sensitivity(3, 2) / 1.0  # the discrete Laplace's sd at scale S / eps
    assert np.all(np.abs(noisy.mean(0) - exact) <= 5 * sd / math.sqrt(runs))


@pytest.mark.parametrize("order", ["concentrated", "spread"])
def test_the_elbow_release_is_eps_dp_on_the_wire_for_worst_case_neighbours(order):
    assert _elbow_audit(order, EPS) <= EPS


@pytest.mark.parametrize("weaken", ["noise at twice the eps", "the k-median sensitivity for k-means drops"])
def test_the_elbow_audit_catches_a_weaker_release(weaken):
    bound = _elbow_audit("concentrated", 2 * EPS) if weaken.startswith("noise") else _elbow_audit(
        "concentrated", EPS, z_used=1)
    assert bound > EPS


def _blobs(k: int, per: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    means = rng.uniform(-0.55, 0.55, size=(k, 2))
    while np.min([np.linalg.norm(a - b) for i, a in enumerate(means) for b in means[i + 1:]]) < 0.3:
        means = rng.uniform(-0.55, 0.55, size=(k, 2))
    return means, np.vstack([m + rng.normal(0, 0.01, size=(per, 2)) for m in means])


def test_the_greedy_orders_one_center_per_separated_cluster_first_and_the_elbow_finds_their_number():
    means, x = _blobs(4, 5000, 0)
    spec = derive_central("greedy-001", x.shape[0], 2, 8, 8.0, 1e-6, seed=4)
    fit = central_kmeans(x, spec, np.random.default_rng(5))
    first = fit.centers[:4]
    nearest = np.linalg.norm(first[:, None] - means[None], axis=2).argmin(1)
    assert sorted(nearest.tolist()) == [0, 1, 2, 3]  # every cluster once among the first four
    assert np.linalg.norm(first - means[nearest], axis=1).max() < 0.05
    assert fit.suggested_k == 4
    assert fit.elbow is not None and [e["k"] for e in fit.elbow] == list(range(1, 9))


def test_the_elbow_band_covers_the_exact_costs_of_the_released_centers():
    means, x = _blobs(3, 3000, 1)
    rng = np.random.default_rng(2)
    centers = means + 0.01
    exact = prefix_costs(x, centers, 2).sum(0)
    covered = 0
    for _ in range(40):
        curve, _ = elbow_curve(x, centers, 2, 0.5, rng)
        covered += sum(abs(c["cost"] - e) <= c["band"] for c, e in zip(curve, exact, strict=True))
    assert covered >= 0.9 * 40 * 3  # two standard deviations: ~95% each
    band = curve[0]["band"]
    assert band == pytest.approx(2 * math.sqrt(3 * 2) * (DIAMETER**2 * 2**ELBOW_BITS + 3) / 0.5 / 2**ELBOW_BITS,
                                 rel=0.05)


def test_with_no_ball_available_the_greedy_takes_unused_released_balls_then_repeats():
    balls = Balls(np.array([0, 1]), np.array([[0.0, 0.0], [0.05, 0.0]]), np.array([5.0, 3.0]))
    order, depth = greedy_order(balls, 4, (2.0, 1.0))
    assert order[0].tolist() == [0.05, 0.0] and depth[0] == 1  # descended to the child
    assert order[1].tolist() == [0.0, 0.0]  # forbidden, but not yet used
    assert order[2].tolist() == order[3].tolist() == [0.0, 0.0]


def test_the_descent_crosses_a_level_where_no_ball_passed_the_gate():
    # the cluster at (0.5, 0.5) split over two level-1 cells, both under the gate: its level-2 ball
    # (within r_0 of the level-0 ball) is still where the descent ends; the far level-2 ball is not reached
    balls = Balls(np.array([0, 2, 2]), np.array([[0.0, 0.0], [0.5, 0.5], [1.9, 0.0]]), np.array([9.0, 0.4, 0.9]))
    order, depth = greedy_order(balls, 1, (1.0, 0.5, 0.25))
    assert order[0].tolist() == [0.5, 0.5] and depth == [2]
    # a released next level still comes first, even where a deeper ball has more value
    balls = Balls(np.array([0, 1, 2]), np.array([[0.0, 0.0], [-0.4, 0.0], [0.5, 0.5]]), np.array([9.0, 0.1, 0.4]))
    order, depth = greedy_order(balls, 1, (1.0, 0.5, 0.25))
    assert order[0].tolist() == [-0.4, 0.0] and depth == [1]


def test_a_greedy_run_states_its_parts_and_spends_within_its_budget():
    spec = derive_central("greedy-001", 100_000, 50, 10, 1.0, 1e-6, seed=1)
    eps, delta = curator_guarantee(spec.event())
    assert eps <= 1.0 + 1e-9 and delta <= 1e-6
    assert spec.cover.rule == "seed001-values" and spec.cover.histogram is not None
    assert spec.cover.histogram.weight == GREEDY_Q and spec.cover.shifts == 1
    words = privacy_statement(spec)
    assert "seed 001" in words["parts"]["cover"]["mechanism"] and "elbow" in words["parts"]["counts"]["mechanism"]


def test_k_median_greedy_runs_unprojected_and_is_refused_where_a_lift_would_average():
    assert derive_central("greedy-001", 10_000, 2, 4, 1.0, 1e-6, objective="kmedian").lift_steps == 0
    with pytest.raises(ConfigError, match="a lift averages"):
        derive_central("greedy-001", 10_000, 50, 4, 1.0, 1e-6, objective="kmedian")
