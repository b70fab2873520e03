"""The thresholded histogram cover's noise and privacy arithmetic
(common/mechanisms/threshold_histogram.py): calibration meets its budget with little to
spare, each ingredient of the guarantee moves it the right way, and one test
per invalid parameter."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from shoal.common.errors import ConfigError, PrivacyError
from shoal.common.mechanisms.distributed_noise import zcdp_delta_tight
from shoal.common.mechanisms.exact_sampling import discrete_gaussian_tail
from shoal.common.mechanisms.threshold_histogram import (
    HistogramNoise,
    calibrate_histogram,
    histogram_guarantee,
)


@pytest.mark.parametrize(("eps", "delta", "levels", "shifts"),
                         [(0.1, 5e-7, 8, 2), (0.5, 5e-7, 8, 2), (2.0, 1e-9, 12, 3), (0.02, 1e-6, 8, 2)])
def test_a_calibrated_cover_is_within_its_budget_and_a_lower_threshold_or_less_noise_is_not(eps, delta, levels, shifts):
    noise = calibrate_histogram(eps, delta, levels, shifts)
    assert histogram_guarantee(noise, eps) <= delta
    assert (noise.levels, noise.shifts) == (levels, shifts)
    assert histogram_guarantee(replace(noise, threshold=max(2, int(noise.threshold * 0.8))), eps) > delta
    assert histogram_guarantee(replace(noise, sigma_sq=max(1, int(noise.sigma_sq * 0.8))), eps) > delta


def test_the_threshold_sits_a_few_noise_sds_out_and_grows_like_the_square_root_of_the_levels():
    a, b = calibrate_histogram(0.5, 5e-7, 4, 2), calibrate_histogram(0.5, 5e-7, 16, 2)
    assert 4 < a.threshold / a.sd < 7 and 4 < b.threshold / b.sd < 7
    assert b.sd / a.sd == pytest.approx(2.0, rel=0.02)  # rho per level is a quarter: sd doubles


def test_the_guarantee_is_the_zcdp_conversion_plus_the_chance_a_points_own_cell_passes():
    noise = HistogramNoise(levels=3, shifts=2, sigma_sq=400, shares=1, threshold=90, clip=2000)
    alone = 3 * 2 * discrete_gaussian_tail(400, 88)
    rho = 3 * 2 / (2 * 400)
    expected = zcdp_delta_tight(rho, 1.0 + math.log1p(-alone)) + alone
    assert noise.alone_delta() == pytest.approx(alone)
    assert histogram_guarantee(noise, 1.0) == pytest.approx(expected, rel=1e-9)


def test_several_shares_per_cell_count_every_draw_in_the_tail():
    one = HistogramNoise(levels=1, shifts=1, sigma_sq=100, shares=1, threshold=42, clip=400)
    four = HistogramNoise(levels=1, shifts=1, sigma_sq=100, shares=4, threshold=4 * 40 + 2, clip=400)
    assert four.alone_delta() == pytest.approx(4 * one.alone_delta())
    assert four.sd == pytest.approx(2 * one.sd)


def test_a_tiny_budget_sums_several_draws_rather_than_exceed_one_draws_range():
    noise = calibrate_histogram(0.003, 1e-6, 8, 2)
    assert noise.shares > 1 and noise.sigma_sq <= 1 << 20
    assert histogram_guarantee(noise, 0.003) <= 1e-6


def test_a_threshold_below_the_noise_gives_no_guarantee():
    noise = HistogramNoise(levels=8, shifts=2, sigma_sq=10_000, shares=1, threshold=2, clip=4000)
    assert histogram_guarantee(noise, 1.0) == 1.0


@pytest.mark.parametrize("field,value,match", [
    ("levels", 0, "levels 0"),
    ("shifts", 0, "shifts 0"),
    ("shares", 0, "shares 0"),
    ("sigma_sq", 0, "sigma_sq 0"),
    ("sigma_sq", (1 << 20) + 1, "sigma_sq 1048577"),
    ("clip", 0, "clip 0"),
    ("threshold", 1, "threshold 1"),
])
def test_histogram_noise_rejects_invalid_parameter(field, value, match):
    args = dict(levels=2, shifts=2, sigma_sq=100, shares=1, threshold=50, clip=400)
    args[field] = value
    with pytest.raises(ConfigError, match=match):
        HistogramNoise(**args)


@pytest.mark.parametrize("eps,delta", [(0.0, 1e-6), (math.inf, 1e-6), (1.0, 0.0), (1.0, 1.0)])
def test_calibrate_rejects_invalid_parameter(eps, delta):
    with pytest.raises(ConfigError, match="eps > 0 and delta in"):
        calibrate_histogram(eps, delta, 8, 2)


def test_the_guarantee_is_refused_at_a_non_positive_epsilon():
    with pytest.raises(PrivacyError, match="epsilon must be"):
        histogram_guarantee(calibrate_histogram(1.0, 1e-6, 8, 2), 0.0)
