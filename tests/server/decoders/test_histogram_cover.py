"""The thresholded histogram cover (server/decoders/central/histogram.py): a
cell passes exactly as the discrete Gaussian's law says, the released cells
are (eps, delta)-DP on the wire for worst-case neighbours (and the audit
catches a cover with less noise or a lower threshold), and a level covers
exactly the points of the cells it releases."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats

from shoal.common.errors import ConfigError
from shoal.common.mechanisms.threshold_histogram import HistogramNoise, calibrate_histogram
from shoal.server.decoders.central.grids import shifted_grids
from shoal.server.decoders.central.histogram import histogram_level, released

EPS, DELTA = 1.0, 0.02  # a delta large enough to measure: the audit's resolution is ~1e-3


def _law(noise: HistogramNoise, c: int) -> float:
    """P(c + Z >= threshold) for one exact N_Z(0, sigma_sq) draw (shares = 1)."""
    z = np.arange(-noise.clip, noise.clip + 1)
    w = np.exp(-(z.astype(np.float64) ** 2) / (2 * noise.sigma_sq))
    return float(w[z >= noise.threshold - c].sum() / w.sum())


def test_a_cell_passes_exactly_as_often_as_the_discrete_gaussian_law_says():
    noise = HistogramNoise(levels=1, shifts=1, sigma_sq=25, shares=1, threshold=20, clip=200)
    runs, counts = 40_000, [5, 12, 20, 28]
    bits = released(np.repeat(counts, runs), noise, np.random.default_rng(0)).reshape(len(counts), runs)
    for c, row in zip(counts, bits, strict=True):
        p = _law(noise, c)
        assert stats.binomtest(int(row.sum()), runs, p).pvalue > 1e-4, (c, row.mean(), p)


def test_the_noisy_count_is_unbiased():
    # The pass rates over thresholds t = 2, 3, ... add up to E[max(c + Z - 1, 0)]; with c far
    # above the noise (c = 40, sd 5.7) that is c - 1 + E[Z]: the sum of two shares has mean 0.
    noise = HistogramNoise(levels=1, shifts=1, sigma_sq=16, shares=2, threshold=2, clip=100)
    rng = np.random.default_rng(1)
    c, runs = 40, 4_000
    total = sum(float(released(np.full(runs, c), replace(noise, threshold=t), rng).mean()) for t in range(2, 100))
    assert total - (c - 1) == pytest.approx(0.0, abs=0.2)  # E[Z] = 0; the sum's sd is ~0.06


def _pass_rates(noise: HistogramNoise, counts: list[int], runs: int, seed: int) -> np.ndarray:
    bits = released(np.repeat(counts, runs), noise, np.random.default_rng(seed))
    return bits.reshape(len(counts), runs).sum(axis=1)


def _audit(noise: HistogramNoise, eps: float, runs: int = 100_000) -> float:
    """The largest lower confidence bound, over neighbours (a cell of count c vs c + 1;
    c = 0: the cell of the added point alone, never considered without it) and both
    outcomes, of P(outcome | D) - e^eps P(outcome | D'): an (eps, delta) mechanism keeps it <= delta."""
    top = noise.threshold + 4 * int(noise.sd) + 2
    counts = list(range(1, top + 1))
    passed = _pass_rates(noise, counts, runs, 7)
    alpha = 0.05 / (8 * len(counts))  # Bonferroni over every comparison
    lo = stats.beta.ppf(alpha, np.maximum(passed, 1e-9), runs - passed + 1)
    lo = np.where(passed > 0, lo, 0.0)
    hi = stats.beta.ppf(1 - alpha, passed + 1, np.maximum(runs - passed, 1e-9))
    hi = np.where(passed < runs, hi, 1.0)
    lo_f, hi_f = 1 - hi, 1 - lo  # the "not released" outcome
    # index i holds count i + 1; the neighbour of count 1 is "absent" (never released: rate 0 exactly)
    lo_p = np.concatenate([[0.0], lo])
    hi_p = np.concatenate([[0.0], hi])
    lo_n = np.concatenate([[1.0], lo_f])
    hi_n = np.concatenate([[1.0], hi_f])
    worst = -np.inf
    for a_lo, b_hi in ((lo_p[1:], hi_p[:-1]), (lo_p[:-1], hi_p[1:]), (lo_n[1:], hi_n[:-1]), (lo_n[:-1], hi_n[1:])):
        worst = max(worst, float(np.max(a_lo - math.exp(eps) * b_hi)))
    return worst


def test_released_cells_are_eps_delta_dp_on_the_wire_for_worst_case_neighbours():
    noise = calibrate_histogram(EPS, DELTA, 1, 1)
    assert _audit(noise, EPS) <= DELTA


@pytest.mark.parametrize("weaken", ["a quarter of the variance", "the threshold 40% lower"])
def test_the_audit_catches_a_cover_with_less_noise_or_a_lower_threshold(weaken):
    noise = calibrate_histogram(EPS, DELTA, 1, 1)
    weak = (replace(noise, sigma_sq=max(1, noise.sigma_sq // 4)) if weaken.startswith("a quarter")
            else replace(noise, threshold=max(2, int(noise.threshold * 0.6))))
    assert _audit(weak, EPS) > DELTA


def test_a_level_releases_only_non_empty_cells_and_covers_exactly_their_points():
    rng = np.random.default_rng(3)
    dense = np.array([0.3, -0.2]) + rng.uniform(-0.01, 0.01, size=(3000, 2))
    sparse_pts = rng.uniform(-0.9, 0.9, size=(40, 2))
    y = np.vstack([dense, sparse_pts])
    noise = calibrate_histogram(1.0, 1e-6, 1, 2)
    centers, covered = histogram_level(y, np.arange(len(y)), 0.25, noise, np.random.default_rng([5, 2]), rng)
    assert 1 <= centers.shape[0] <= 2  # the dense blob's cell in each shifted grid; no scattered point's
    assert set(range(3000)) <= set(covered.tolist())
    # Every released cell holds points (the same public grids, drawn again from the same seed).
    grids = shifted_grids(0.25, 2, 2, np.random.default_rng([5, 2]))
    cells_of_points = {tuple(g.index(y)[i]) + (j,) for j, g in enumerate(grids) for i in range(len(y))}
    for c in centers:
        assert any(tuple(g.index(c[None, :])[0]) + (j,) in cells_of_points
                   and np.allclose(g.centers(g.index(c[None, :]))[0], c) for j, g in enumerate(grids))


def test_released_refuses_negative_counts():
    with pytest.raises(ConfigError, match="non-negative"):
        released(np.array([3, -1]), calibrate_histogram(1.0, 1e-6, 1, 1), np.random.default_rng(0))
