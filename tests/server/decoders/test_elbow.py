"""Decoding an elbow round: the curve is the tail sums of the released drops,
the band covers every k' at once at its stated level, the suggested k' is the
curator elbow's rule, and what the result carries is exact in the sum's unit."""

import math

import numpy as np
import pytest

from shoal.common.kinds.elbow import drop_sum_params
from shoal.common.mechanisms.secure_sum import noise_shares
from shoal.server.decoders.elbow import (
    BAND_LEVEL,
    band_quantile,
    coordinate_sd,
    elbow_from_drops,
    noise_totals,
    suggest_k,
)


def _params(k=16, eps=0.1, min_devices=1000, scale=1 << 16):
    return drop_sum_params(k, 2, eps, 1e-8, min_devices, None, scale=scale)


@pytest.mark.parametrize("devices", [1000, 2500])
def test_coordinate_sd_is_the_sd_of_every_devices_noise_shares_added_up(devices):
    # The devices' own shares (what leaves them), summed over m devices, at a coarse scale.
    p = _params(k=1, eps=1.0, min_devices=1000, scale=4)
    rng = np.random.default_rng(1)
    totals = np.array([noise_shares(devices, p, rng).sum() for _ in range(2000)]) / p.scale
    assert totals.std() == pytest.approx(coordinate_sd(p, devices), rel=0.08)
    draws = noise_totals(devices, p, (20_000,), rng) / p.scale
    assert draws.std() == pytest.approx(coordinate_sd(p, devices), rel=0.03)


@pytest.mark.parametrize("k", [4, 16])
def test_the_band_covers_every_k_at_once_at_its_level(k):
    """Fresh draws of the noise (another seed than the band's): the whole curve is inside
    the band in BAND_LEVEL of them; a band of two sds per k' would miss more often."""
    p = _params(k=k)
    devices = 1300
    rng = np.random.default_rng(7)
    noise = noise_totals(devices, p, (20_000, k), rng).astype(np.float64) / p.scale
    tails = np.cumsum(noise[:, ::-1], axis=1)[:, ::-1]
    drops = np.linspace(5e4, 0, k)
    curve, _, terms = elbow_from_drops(drops, p, devices)
    band = np.array([c["band"] for c in curve])
    covered = (np.abs(tails) <= band).all(axis=1).mean()
    assert covered == pytest.approx(BAND_LEVEL, abs=0.006)
    sd = coordinate_sd(p, devices) * np.sqrt(np.arange(k, 0, -1))
    per_k = (np.abs(tails) <= 2 * sd).all(axis=1).mean()
    assert per_k < BAND_LEVEL - 0.03
    assert terms["band_z"] > 2


def test_the_band_is_a_function_of_public_parameters_only():
    p = _params()
    assert band_quantile(16, p, 1500) == band_quantile(16, p, 1500)


def test_the_curve_is_the_tail_sums_of_the_drops_in_the_sums_unit():
    p = _params(k=4)
    units = np.array([400_000, 150_000, 3, 70_000])
    drops = units / p.scale  # what decode_total returns: integers over the scale
    curve, _, _ = elbow_from_drops(drops, p, 1000)
    costs = [c["cost"] for c in curve]
    assert costs == [620_003 / p.scale, 220_003 / p.scale, 70_003 / p.scale, 70_000 / p.scale]
    assert all(float(c * p.scale).is_integer() for c in costs)
    assert [c["k"] for c in curve] == [1, 2, 3, 4]


def test_the_suggested_k_is_the_last_drop_that_is_half_the_cost_and_above_the_noise():
    tail = np.array([100.0, 40.0, 10.0, 9.0, 8.5])
    drops = np.append(-np.diff(tail), tail[-1])
    assert suggest_k(drops, tail, sd=1.0) == 3  # 40 -> 10 is 30 >= 5; 10 -> 9 is 1 < 4.5
    assert suggest_k(drops, tail, sd=11.0) == 2  # 30 is below 3 sds of 11
    assert suggest_k(drops, tail, sd=40.0) == 1
    # A drop into a negative (noisy) cost is weighed against 0: only the noise test remains.
    assert suggest_k(np.array([5.0, 2.0, -1.0]), np.array([6.0, 1.0, -1.0]), sd=0.5) == 3
    assert suggest_k(np.array([5.0, 2.0, -1.0]), np.array([6.0, 1.0, -1.0]), sd=0.7) == 2


def test_the_elbow_of_a_noisy_curve_is_found_through_the_noise():
    p = _params(k=6, eps=0.1)
    devices = 2000
    sd = coordinate_sd(p, devices)
    true_tail = np.array([9e5, 5e5, 2e5, 2e4, 2e4 - 10, 2e4 - 20])
    drops = np.append(-np.diff(true_tail), true_tail[-1])
    rng = np.random.default_rng(3)
    for _ in range(20):
        noisy = drops + rng.laplace(0, sd / math.sqrt(2), drops.size)  # test data only
        assert elbow_from_drops(noisy, p, devices)[1] == 4
