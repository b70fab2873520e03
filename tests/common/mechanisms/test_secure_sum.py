"""Secure summation: exact totals plus discrete Laplace noise, uniform shares,
loud failure on missing shares, no overflow at the boundary, DP audit."""

import math
from dataclasses import asdict

import numpy as np
import pytest
from dp_audit import max_log_ratio_lower_bound, simultaneous_lower_bound
from scipy import stats

from shoal.common.errors import ConfigError
from shoal.common.mechanisms.secure_sum import (
    SecureSumError,
    SecureSumParams,
    add_shares,
    decode_total,
    encode_devices,
    fixed_point,
    noise_shares,
    shares_rule,
    split,
)


def small(**kw):
    base = dict(l1_norm=1.0, max_abs=1.0, max_nonzero=1, epsilon=1.0, delta=1e-6, min_devices=20, max_devices=60, scale=4)
    base.update(kw)
    return SecureSumParams.derive(kw.pop("length", 1), **{k: v for k, v in base.items() if k != "length"})


def test_total_is_the_true_sum_plus_discrete_laplace_noise():
    # n = min_devices devices: the noise shares must add up to exactly DLap(alpha) per coordinate.
    rng = np.random.default_rng(0)
    p = small(length=20_000)
    n = p.min_devices
    x = rng.integers(-p.scale, p.scale + 1, size=(n, p.length)) / p.scale  # exact in fixed point
    x[:, 1:] *= rng.random((n, p.length - 1)) < 1 / p.length  # at most one non-zero per device mostly
    x[:, 0] = 0.0
    x = x * (np.abs(x).sum(1, keepdims=True) <= 1)
    shares = encode_devices(x, p, rng)
    est, devices = decode_total(add_shares(shares, p), shares.shape[0] * shares.shape[1], p)
    assert devices == n
    noise = np.rint((est - x.sum(0)) * p.scale).astype(int)
    assert np.allclose((est - x.sum(0)) * p.scale, noise)
    a = p.alpha
    edges = np.arange(-25, 26)
    pmf = (1 - a) / (1 + a) * a ** np.abs(edges)
    inner = np.array([(noise == z).sum() for z in edges])
    observed = np.append(inner, noise.size - inner.sum())
    expected = np.append(pmf, 1 - pmf.sum()) * noise.size
    assert stats.chisquare(observed, expected).pvalue > 1e-4


def test_secure_sum_estimate_is_unbiased():
    # Stochastic rounding + symmetric noise: E[decoded sum] = true sum.
    rng = np.random.default_rng(1)
    p = small(length=1, scale=2, max_devices=20)
    trials, n = 20_000, p.min_devices
    x = np.full((trials * n, 1), 0.3)
    ints = fixed_point(x, p, rng) + noise_shares(trials * n, p, rng)
    totals = ints.reshape(trials, n).sum(1) / p.scale
    se = totals.std() / math.sqrt(trials)
    assert abs(totals.mean() - 0.3 * n) < 5 * se


def test_one_devices_shares_are_uniform_mod_q():
    rng = np.random.default_rng(2)
    p = small(length=1)
    reps = 40_000
    shares = encode_devices(np.full((reps, 1), 0.75), p, rng)  # the same device, many times
    for j in range(p.shares):
        for coord in (0, 1):  # the data coordinate and the check coordinate
            top = (shares[:, j, coord] >> np.uint64(p.bits - 4)).astype(int)
            assert stats.chisquare(np.bincount(top, minlength=16)).pvalue > 1e-4


def test_a_missing_share_fails_loudly():
    rng = np.random.default_rng(3)
    p = small(length=5)
    shares = encode_devices(np.zeros((max(p.min_devices, p.shares) + 2, 5)), p, rng)
    flat = shares.reshape(-1, p.length + 1)
    with pytest.raises(SecureSumError, match="not a multiple"):
        decode_total(add_shares(flat[1:], p), flat.shape[0] - 1, p)
    # s shares missing, one from each of s devices: the count looks whole, the check coordinate does not.
    drop = np.arange(p.shares) * (p.shares + 1)  # share i of device i
    kept = np.delete(flat, drop, axis=0)
    with pytest.raises(SecureSumError, match="check coordinate"):
        decode_total(add_shares(kept, p), kept.shape[0], p)


def test_a_repeated_share_fails_loudly():
    rng = np.random.default_rng(4)
    p = small(length=3)
    flat = encode_devices(np.zeros((p.min_devices, 3)), p, rng).reshape(-1, 4)
    doubled = np.concatenate([flat, flat[:1]])
    with pytest.raises(SecureSumError):
        decode_total(add_shares(doubled, p), doubled.shape[0], p)


def test_too_few_devices_fail_loudly():
    rng = np.random.default_rng(5)
    p = small(length=2)
    shares = encode_devices(np.zeros((p.min_devices - 1, 2)), p, rng)
    with pytest.raises(SecureSumError, match="outside"):
        decode_total(add_shares(shares, p), shares.shape[0] * shares.shape[1], p)


@pytest.mark.parametrize("sign", [1, -1])
def test_no_overflow_at_the_largest_possible_total(sign):
    # n_max devices each at the extreme A + T of what they can send: the centered
    # modular total is still exact, and it is within a factor 2 of q/2 (q is tight).
    rng = np.random.default_rng(6)
    p = small(length=2, max_devices=64, min_devices=16)
    top = p.max_value + p.noise_clip
    ints = np.full((p.max_devices, 2), sign * top, dtype=np.int64)
    shares = split(ints, p, rng)
    est, devices = decode_total(add_shares(shares, p), p.max_devices * p.shares, p)
    assert devices == p.max_devices
    assert np.array_equal(est * p.scale, np.full(2, sign * top * p.max_devices, dtype=float))
    assert p.max_devices * top < p.modulus // 2 <= 2 * (2 * p.max_devices * top + 2)


def test_bits_grow_until_the_cap_then_derive_refuses():
    with pytest.raises(ConfigError, match="lower the scale"):
        small(length=1000, scale=1 << 50)


def _audit(p, trials=300_000, seed=7, bound=max_log_ratio_lower_bound):
    rng = np.random.default_rng(seed)
    n = p.min_devices
    out = []
    for v in (-1.0, 1.0):  # neighbours: one device at -max vs +max, the rest at 0
        x = np.zeros((trials * n, 1))
        x[::n] = v
        ints = fixed_point(x, p, rng) + noise_shares(trials * n, p, rng)
        totals = ints.reshape(trials, n).sum(1)
        out.append(np.bincount(np.clip(totals + 30, 0, 60), minlength=61))
    return bound(out[0], out[1])


@pytest.mark.parametrize("eps", [1.0, 4.0, 8.0])
def test_secure_sum_total_is_eps_dp_on_the_wire(eps):
    """The server sees the exact integer total (mod q): every value is its own bin.
    |x - x'| = 2 A = 4 in integers while the calibration covers sensitivity 6."""
    p = small(length=1, scale=2, epsilon=eps, max_nonzero=1, l1_norm=1.0)
    assert _audit(p, trials=150_000, bound=simultaneous_lower_bound) <= p.epsilon


def test_audit_catches_noise_sized_for_more_devices():
    # Noise shares sized for 40 devices but only 20 contribute: half the noise, so the ratio is too large.
    good = small(length=1, scale=2, epsilon=0.5, min_devices=40, max_devices=80)
    bad = object.__new__(SecureSumParams)
    for k, v in asdict(good).items():
        object.__setattr__(bad, k, v)
    object.__setattr__(bad, "min_devices", 40)
    rng = np.random.default_rng(8)
    trials, n = 200_000, 20
    out = []
    for v in (-1.0, 1.0):
        x = np.zeros((trials * n, 1))
        x[::n] = v
        totals = (fixed_point(x, bad, rng) + noise_shares(trials * n, bad, rng)).reshape(trials, n).sum(1)
        out.append(np.bincount(np.clip(totals + 30, 0, 60), minlength=61))
    assert max_log_ratio_lower_bound(out[0], out[1]) > good.epsilon * 4 / good.sensitivity


def test_shares_rule_reproduces_the_published_operating_point():
    # Balle, Bell, Gascon, Nissim (2019): 32-bit values, n = 1e4 parties, 12 messages -> 2^-40.
    assert shares_rule(40, 32, 10_000) == 12
    assert shares_rule(40, 56, 1_000_000) < shares_rule(40, 56, 10_000)


def test_derived_parameters_satisfy_every_documented_inequality():
    p = SecureSumParams.derive(8 * 101, l1_norm=math.sqrt(100) + 1, max_abs=1.0, max_nonzero=101,
                               epsilon=0.2, delta=1e-8, min_devices=100_000, max_devices=10_000_000)
    assert p.delta_used <= p.delta
    assert (1 + math.exp(p.epsilon)) * 2.0**-p.sigma <= p.delta / 2
    assert 2 * p.max_devices * (p.max_value + p.noise_clip) + 2 < p.modulus
    assert p.bits <= 62
    assert p.noise_std * p.scale == pytest.approx(math.sqrt(2 * p.alpha) / (1 - p.alpha))


BASE = dict(length=4, l1_norm=1.0, max_abs=1.0, max_nonzero=1, epsilon=1.0, delta=1e-6, min_devices=20,
            max_devices=40, scale=4)


def _with(**change):
    good = SecureSumParams.derive(**BASE)
    fields = asdict(good)
    fields.update(change)
    return fields


@pytest.mark.parametrize(
    "change,match",
    [
        (dict(length=0), "length"),
        (dict(l1_norm=float("nan")), "l1_norm"),
        (dict(max_abs=0.0), "max_abs"),
        (dict(epsilon=-1.0), "epsilon"),
        (dict(max_nonzero=5), "max_nonzero"),
        (dict(delta=1.0), "delta"),
        (dict(min_devices=8), "min_devices"),
        (dict(max_devices=10), "max_devices"),
        (dict(scale=0), "scale"),
        (dict(bits=63), "bits"),
        (dict(noise_clip=-1), "noise_clip"),
        (dict(bits=10), "too small"),
        (dict(shares=1), "shares"),
        (dict(shares=3), "security"),
        (dict(sigma=20), "security"),
        (dict(noise_clip=1), "spend delta"),
    ],
)
def test_rejects_each_invalid_parameter(change, match):
    with pytest.raises(ConfigError, match=match):
        SecureSumParams(**_with(**change))


def test_rejects_vectors_beyond_the_public_bounds():
    p = SecureSumParams.derive(**BASE)
    with pytest.raises(ConfigError, match="public bounds"):
        fixed_point(np.array([[0.5, 0.5, 0.0, 0.0]]), p, np.random.default_rng(0))
    with pytest.raises(ConfigError, match="NaN"):
        fixed_point(np.array([[np.nan, 0, 0, 0]]), p, np.random.default_rng(0))


def gaussian(**kw):
    base = dict(l1_norm=1.0, max_abs=1.0, max_nonzero=1, epsilon=1.0, delta=1e-3, min_devices=20, max_devices=60,
                scale=2, noise="gaussian", l2_norm=1.0)
    base.update(kw)
    return SecureSumParams.derive(kw.pop("length", 1), **{k: v for k, v in base.items() if k != "length"})


def test_gaussian_total_is_the_true_sum_plus_discrete_gaussian_shares():
    rng = np.random.default_rng(20)
    p = gaussian(length=4, max_nonzero=4, l1_norm=4.0, l2_norm=2.0)
    n = p.min_devices
    x = rng.integers(-p.scale, p.scale + 1, size=(n, p.length)) / p.scale  # exact in fixed point
    shares = encode_devices(x, p, rng)
    est, devices = decode_total(add_shares(shares, p), shares.shape[0] * shares.shape[1], p)
    assert devices == n
    noise = (est - x.sum(0)) * p.scale
    assert np.allclose(noise, np.rint(noise))
    assert np.all(np.abs(noise) <= n * p.noise_clip)


def test_gaussian_secure_sum_estimate_is_unbiased():
    rng = np.random.default_rng(21)
    p = gaussian()
    trials, n = 20_000, p.min_devices
    x = np.full((trials * n, 1), 0.3)
    totals = (fixed_point(x, p, rng) + noise_shares(trials * n, p, rng)).reshape(trials, n).sum(1) / p.scale
    se = totals.std() / math.sqrt(trials)
    assert abs(totals.mean() - 0.3 * n) < 5 * se
    assert totals.var() <= (p.noise_std**2 + n * 0.25 / p.scale**2) * 1.05


def _tail_audit(p, contributors, trials=150_000, seed=22):
    """(eps, delta) audit on the exact integer totals the server decodes:
    over every one-sided threshold set S, the largest lower confidence
    bound of log((P1(S) - delta) / P2(S)); a violation of (eps, delta)-DP
    shows as a value above eps."""
    rng = np.random.default_rng(seed)
    out = []
    for v in (-1.0, 1.0):  # neighbours: one device at -max vs +max
        x = np.zeros((trials * contributors, 1))
        x[::contributors] = v
        totals = (fixed_point(x, p, rng) + noise_shares(trials * contributors, p, rng)).reshape(trials, -1).sum(1)
        out.append(totals)
    lo = min(int(out[0].min()), int(out[1].min()))
    edges = np.arange(lo, max(int(out[0].max()), int(out[1].max())) + 2)
    c1, c2 = (np.histogram(t, edges)[0] for t in out)
    best = -np.inf
    for a, b in ((c1, c2), (c2, c1)):
        for tail_a, tail_b in ((np.cumsum(a), np.cumsum(b)), (np.cumsum(a[::-1]), np.cumsum(b[::-1]))):
            lo_a = stats.beta.ppf(1e-4, np.maximum(tail_a, 1e-9), trials - tail_a + 1)
            hi_b = stats.beta.ppf(1 - 1e-4, tail_b + 1, np.maximum(trials - tail_b, 1e-9))
            with np.errstate(divide="ignore", invalid="ignore"):
                r = np.log(np.maximum(lo_a - p.delta, 0)) - np.log(hi_b)
            best = max(best, float(np.nanmax(r)))
    return best


@pytest.mark.parametrize("eps", [0.5, 1.0])
def test_gaussian_secure_sum_total_is_eps_delta_dp_on_the_wire(eps):
    p = gaussian(epsilon=eps)
    assert _tail_audit(p, p.min_devices) <= eps


def test_gaussian_audit_catches_noise_from_too_few_devices():
    # The noise is sized for 20 devices; one device's shares alone leak.
    p = gaussian(epsilon=0.5)
    assert _tail_audit(p, 1) > p.epsilon


def test_gaussian_parameters_satisfy_every_documented_inequality():
    from shoal.common.mechanisms.distributed_noise import rho_for_tight, zcdp_delta_tight

    p = SecureSumParams.derive(8 * 101, l1_norm=math.sqrt(100) + 1, max_abs=1.0, max_nonzero=101, epsilon=0.2,
                               delta=1e-8, min_devices=100_000, max_devices=10_000_000, noise="gaussian",
                               l2_norm=math.sqrt(2), aligned=True)
    assert p.rho <= rho_for_tight(p.epsilon, p.delta / 2)
    assert zcdp_delta_tight(p.rho, p.epsilon) <= p.delta / 2
    assert p.delta_used <= p.delta
    assert 16 <= p.sigma_sq <= 1 << 20
    assert 2 * p.max_devices * (p.max_value + p.noise_clip) + 2 < p.modulus
    assert p.l2_sensitivity == pytest.approx(math.sqrt(2) * p.scale * math.sqrt(2) + 2 * math.sqrt(101))


def test_auto_noise_picks_gaussian_in_high_dimension_and_laplace_in_low():
    def pick(d):
        return SecureSumParams.derive(8 * (d + 1), l1_norm=math.sqrt(d) + 1, max_abs=1.0, max_nonzero=d + 1,
                                      epsilon=0.2, delta=1e-8, min_devices=100_000, noise="auto",
                                      l2_norm=math.sqrt(2), aligned=True)
    assert pick(100).noise == "gaussian"
    assert pick(2).noise == "laplace"
    assert pick(100).noise_std < 0.5 * SecureSumParams.derive(
        808, l1_norm=11.0, max_abs=1.0, max_nonzero=101, epsilon=0.2, delta=1e-8, min_devices=100_000).noise_std


def _gaussian_with(**change):
    fields = asdict(gaussian(length=4, max_nonzero=4, l1_norm=4.0, l2_norm=2.0))
    fields.update(change)
    return fields


@pytest.mark.parametrize(
    "change,match",
    [
        (dict(noise="cauchy"), "noise must be one of"),
        (dict(l2_norm=0.0), "l2_norm"),
        (dict(sigma_sq=8), "sigma_sq"),
        (dict(sigma_sq=(1 << 20) + 1), "sigma_sq"),
        (dict(noise="laplace"), "sigma_sq belongs"),
        (dict(sigma_sq=16), "spend delta"),
        (dict(noise_clip=3), "spend delta"),
    ],
)
def test_rejects_each_invalid_gaussian_parameter(change, match):
    with pytest.raises(ConfigError, match=match):
        SecureSumParams(**_gaussian_with(**change))


def test_gaussian_rejects_vectors_beyond_the_public_l2_norm():
    p = gaussian(length=4, max_nonzero=4, l1_norm=4.0, l2_norm=1.0)
    with pytest.raises(ConfigError, match="L2"):
        fixed_point(np.array([[0.75, 0.75, 0.0, 0.0]]), p, np.random.default_rng(0))


def test_auto_noise_needs_the_l2_norm():
    with pytest.raises(ConfigError, match="l2_norm"):
        SecureSumParams.derive(4, l1_norm=1.0, max_abs=1.0, max_nonzero=1, epsilon=1.0, delta=1e-6,
                               min_devices=20, noise="auto")


def test_gaussian_secure_sum_takes_the_tight_zcdp_conversion():
    """Canonne-Kamath-Steinke's conversion (Cor. 13) admits more rho than Bun-Steinke's at
    the same (eps, delta / 2), so the shares carry less noise; both are valid bounds."""
    from shoal.common.mechanisms.distributed_noise import (
        gaussian_sigma_sq,
        rho_for,
        zcdp_delta,
        zcdp_delta_tight,
    )

    p = SecureSumParams.derive(8 * 101, l1_norm=math.sqrt(100) + 1, max_abs=1.0, max_nonzero=101, epsilon=0.5,
                               delta=1e-6, min_devices=10_000, noise="gaussian", l2_norm=math.sqrt(2), aligned=True)
    loose = gaussian_sigma_sq(p.l2_sensitivity, rho_for(p.epsilon, p.delta / 2), p.length, p.min_devices,
                              p.max_devices)
    assert p.sigma_sq < 0.72 * loose  # sd ratio below 0.85
    assert zcdp_delta_tight(p.rho, p.epsilon) <= p.delta / 2 < zcdp_delta(p.rho, p.epsilon)


def test_non_zeros_are_counted_in_the_input_even_when_they_round_to_zero():
    # max_nonzero = 1: a second entry of 1e-9 rounds to 0 almost surely (scale 4), but
    # its rounding error (scale |v| > 0) is what the L1 / L2 bounds charge a non-zero for.
    p = SecureSumParams.derive(4, l1_norm=1.0, max_abs=1.0, max_nonzero=1, epsilon=1.0, delta=1e-6,
                               min_devices=20, scale=4)
    with pytest.raises(ConfigError, match="non-zeros"):
        fixed_point(np.array([[0.5, 1e-9, 0.0, 0.0]]), p, np.random.default_rng(0))
    assert fixed_point(np.array([[0.5, 0.0, 0.0, 0.0]]), p, np.random.default_rng(0))[0, 1:].tolist() == [0, 0, 0]


def test_laplace_alpha_is_the_exact_rational_the_shares_are_drawn_with():
    # alpha = exp(-s / t) with s / t <= eps / sensitivity: the total is at most eps-DP, and barely less.
    p = small(length=3, epsilon=0.7)
    t, s = p.laplace_scale
    assert p.alpha == math.exp(-s / t)
    assert s * p.sensitivity / t <= p.epsilon < (s + 1) * p.sensitivity / t


def _bucket(eps: float, **kw):
    from shoal.common.kinds.refine import bucket_sum_params
    from shoal.common.mechanisms.secure_sum import SumLaw

    return bucket_sum_params(8, 16, eps, 1e-6, 1000, 10_000, SumLaw(**kw))


def test_a_failure_charged_at_a_larger_epsilon_takes_more_sigma_and_clip_and_spends_less_delta():
    own, charged = _bucket(0.5, noise="gaussian"), _bucket(0.5, noise="gaussian", failure_epsilon=4.0)
    assert charged.sigma >= own.sigma and charged.noise_clip > own.noise_clip and charged.rho == own.rho
    assert (1 + math.exp(4.0)) * charged.failure <= charged.delta / 2  # its failure within delta / 2 at eps 4
    assert charged.delta_used <= own.delta_used <= own.delta


def test_delta_used_is_the_mechanisms_delta_plus_the_failure_charged_at_epsilon():
    from shoal.common.privacy.zcdp import zcdp_delta_tight

    p = _bucket(1.0, noise="gaussian")
    assert p.delta_used == zcdp_delta_tight(p.rho, 1.0) + (1 + math.exp(1.0)) * p.failure
    lap = _bucket(1.0, noise="laplace")
    assert lap.delta_used == (1 + math.exp(1.0)) * lap.failure


@pytest.mark.parametrize("kw,match", [
    ({"noise": "uniform"}, "noise must be one of"),
    ({"failure_epsilon": 0.0}, "failure_epsilon must be finite and > 0"),
    ({"failure_epsilon": float("inf")}, "failure_epsilon must be finite and > 0"),
])
def test_a_sum_law_rejects_invalid_parameter(kw, match):
    from shoal.common.mechanisms.secure_sum import SumLaw

    with pytest.raises(ConfigError, match=match):
        SumLaw(**kw)


def test_a_failure_epsilon_below_the_rounds_own_is_refused():
    with pytest.raises(ConfigError, match="failure_epsilon must be finite and >= epsilon"):
        _bucket(1.0, noise="gaussian", failure_epsilon=0.5)
