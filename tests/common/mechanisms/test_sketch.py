"""The scrambled sketch (seed 002): public frequencies, unbiasedness (Def. 3),
eps-DP by audit (Prop. 1 as re-derived), the global sketch (Def. 4) and the SNR (Eq. 6)."""

import math
from dataclasses import dataclass

import numpy as np
import pytest

from shoal.common.errors import ConfigError
from shoal.common.mechanisms.sketch import (
    SketchParams,
    estimated_snr,
    exact_sketch,
    frequencies,
    masks,
    mean_sketch,
    noise_variance,
    predicted_snr,
    record_features,
    scramble,
    secure_sum_params,
    shuffle_noise_variance,
)
from tests.dp_audit import max_log_ratio_lower_bound


def params(**kw):
    base = dict(dim=3, size=40, measurements=40, epsilon=1.0, seed=5, scale_low=0.05, scale_high=1.0)
    base.update(kw)
    return SketchParams(**base)


def test_frequencies_are_a_function_of_the_public_params_alone():
    p = params()
    assert np.array_equal(frequencies(p), frequencies(params()))
    assert not np.array_equal(frequencies(p), frequencies(params(seed=6)))
    assert frequencies(p).shape == (3, 40)


def test_frequency_radii_span_the_public_bandwidths():
    om = frequencies(params(size=4000, scale_low=0.1, scale_high=1.0))
    norms = np.linalg.norm(om, axis=0)
    # adapted-radius R (median ~1.6) over bandwidths in [0.1, 1]
    assert 0.5 < np.median(norms) / (1.6 / math.sqrt(0.1)) < 2
    assert norms.max() > 10 * norms.min()


def test_masks_are_uniform_r_subsets():
    rng = np.random.default_rng(0)
    idx = masks(20000, 10, 3, rng)
    assert all(len(set(row)) == 3 for row in idx[:2000].tolist())
    counts = np.bincount(idx.ravel(), minlength=10)
    expected = 20000 * 3 / 10
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 30  # 9 dof, p ~ 4e-4
    srt = np.sort(idx, axis=1)
    subsets = np.unique(srt[:, 0] * 100 + srt[:, 1] * 10 + srt[:, 2], return_counts=True)[1]
    assert subsets.size == math.comb(10, 3)  # every 3-subset occurs ...
    e = 20000 / subsets.size
    assert float(((subsets - e) ** 2 / e).sum()) < 190  # ... equally often (119 dof, p ~ 1e-4)


@pytest.mark.parametrize("r", [40, 7])
def test_scrambled_sketch_is_unbiased(r):
    """E[s] = z_X (seed 002, Def. 3), with and without masks."""
    p = params(measurements=r, epsilon=4.0)
    om = frequencies(p)
    rng = np.random.default_rng(1)
    x = rng.uniform(-0.5, 0.5, (5, 3))
    devices = 40000
    s = scramble(np.tile(x, (devices, 1)), np.full(devices, 5), p, om, rng)
    z = exact_sketch(x, om)
    se = s.std(axis=0) / math.sqrt(devices)
    assert np.all(np.abs(s.mean(axis=0).real - z.real) < 5 * se)
    assert np.all(np.abs(s.mean(axis=0).imag - z.imag) < 5 * se)


def _min_statistic_counts(p, omega, n0, trials, seed):
    """Neighbouring datasets differing in one record whose features are opposite
    (phases pi/4 and 5 pi/4); the statistic min over all real coordinates has,
    in its upper tail, the largest likelihood ratio the noise allows."""
    rng = np.random.default_rng(seed)
    edges = np.array([-np.inf, -3, -2, -1, 0, 0.5, 1, 1.5, 2, 3, np.inf])
    out = []
    for v in (0.25, -0.75):
        x = np.full((trials * n0, 1), 0.25)
        x[::n0] = v
        s = scramble(x, np.full(trials, n0), p, omega, rng) * math.sqrt(p.size) * p.alpha * n0
        stat = np.minimum(s.real.min(axis=1), s.imag.min(axis=1))
        out.append(np.histogram(stat, edges)[0])
    return out


@pytest.mark.parametrize("r,n0", [(2, 1), (1, 1), (1, 3)])
def test_sketch_is_eps_ldp(r, n0):
    p = SketchParams(dim=1, size=2, measurements=r, epsilon=1.0, seed=0, scale_low=0.1, scale_high=1.0)
    omega = np.array([[math.pi, math.pi]])
    c1, c2 = _min_statistic_counts(p, omega, n0, 300_000, seed=3)
    assert max_log_ratio_lower_bound(c1, c2) <= p.epsilon


@dataclass(frozen=True)
class _PrintedProposition1(SketchParams):
    """Noise with Prop. 1's sigma exactly as printed (alpha instead of sqrt(alpha)):
    the noise scale, hence the sensitivity it is calibrated to, is sqrt(alpha) smaller."""

    def sensitivity(self, n0):
        return super().sensitivity(n0) * math.sqrt(self.alpha)


def test_printed_proposition_1_fails_the_audit_when_masks_subsample():
    """At alpha = 1/2 the printed sigma gives only eps sqrt(2): the audit sees it."""
    p = _PrintedProposition1(dim=1, size=2, measurements=1, epsilon=1.0, seed=0, scale_low=0.1, scale_high=1.0)
    omega = np.array([[math.pi, math.pi]])
    c1, c2 = _min_statistic_counts(p, omega, 1, 300_000, seed=4)
    assert max_log_ratio_lower_bound(c1, c2) > 1.15 * p.epsilon


def test_global_sketch_weights_devices_by_their_records():
    s = np.array([[1 + 1j, 0], [0, 2j]])
    assert np.allclose(mean_sketch(s, np.array([3, 1])), [0.75 + 0.75j, 0.5j])


def test_estimated_snr_matches_the_predicted_snr():
    p = params(size=200, measurements=200, epsilon=2.0)
    om = frequencies(p)
    rng = np.random.default_rng(2)
    x = rng.uniform(-0.3, 0.3, (20000, 3))
    n0 = np.full(100, 200)
    s = mean_sketch(scramble(x, n0, p, om, rng), n0)
    z2 = float(np.sum(np.abs(exact_sketch(x, om)) ** 2))
    assert estimated_snr(s, p, n0) == pytest.approx(predicted_snr(p, n0, z2), rel=0.25)
    # more records per device -> less noise per record; one-record devices drown
    assert predicted_snr(p, np.full(20000, 1), z2) < predicted_snr(p, n0, z2) < predicted_snr(p, np.array([20000]), z2)


def test_noise_variance_is_the_papers_eq_6_for_equal_devices():
    p = params(size=100, measurements=50, epsilon=0.5)
    n0, big_l, z2 = 30, 7, 0.35
    sigma2 = 32 * p.alpha * p.size**2 / (n0 * p.epsilon**2)  # Eq. (7) with the sqrt(alpha) sigma
    paper = (1 - p.alpha * z2 + sigma2) / (p.alpha * n0 * big_l)
    # The exact noise sits on a grid with a rounded-up scale: never less, at most ~2% more.
    assert paper * (1 + 1e-5) ** 2 <= noise_variance(p, np.full(big_l, n0), z2) <= 1.02 * paper


def test_shuffle_sketch_noise_is_at_the_central_level():
    p = params(size=100, measurements=100, epsilon=1.0)
    sp = secure_sum_params(p, epsilon=1.0, delta=1e-6, min_devices=10_000, max_devices=100_000)
    n = 10_000
    local = noise_variance(p, np.full(n, 1), 0.35)
    central = noise_variance(p, np.array([n]), 0.35)  # one curator holding all n records
    assert shuffle_noise_variance(sp, n, 0.35) < 2 * central < local / 100
    f = record_features(np.zeros((2, 3)), frequencies(p))
    assert f.shape == (2, 200) and np.abs(f).sum(axis=1).max() <= sp.l1_norm


@pytest.mark.parametrize(
    "field,value,match",
    [
        ("dim", 0, "dim"),
        ("size", 0, "sketch size"),
        ("size", 1 << 17, "sketch size"),
        ("measurements", 0, "measurements"),
        ("measurements", 41, "measurements"),
        ("epsilon", 0.0, "epsilon"),
        ("epsilon", math.inf, "epsilon"),
        ("seed", -1, "seed"),
        ("scale_low", 0.0, "bandwidths"),
        ("scale_high", 0.01, "bandwidths"),
        ("scale_high", 11.0, "bandwidths"),
    ],
)
def test_invalid_sketch_parameter_is_refused(field, value, match):
    with pytest.raises(ConfigError, match=match):
        params(**{field: value})


def test_records_outside_the_ball_are_refused():
    p = params()
    with pytest.raises(ConfigError, match="unit ball"):
        scramble(np.full((1, 3), 2.0), np.array([1]), p, frequencies(p), np.random.default_rng(0))


def test_device_counts_must_cover_the_records():
    p = params()
    with pytest.raises(ConfigError, match="n0"):
        scramble(np.zeros((3, 3)), np.array([1, 1]), p, frequencies(p), np.random.default_rng(0))
