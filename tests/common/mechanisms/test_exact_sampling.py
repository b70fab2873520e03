"""Exact samplers: their distributions equal the exact pmfs (chi-square), and
the rational probabilities they claim are the ones they draw."""

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from shoal.common.errors import ConfigError
from shoal.common.mechanisms.exact_sampling import (
    DYADIC_ONE,
    bernoulli_dyadic,
    bernoulli_exp_neg,
    bernoulli_exp_neg_mixed,
    bernoulli_exp_neg_rational,
    discrete_gaussian,
    discrete_gaussian_tail,
    discrete_laplace,
    discrete_laplace_variance,
    dyadic_below,
    grr_keep_numerator,
    laplace_scale_fraction,
    log_ratio_upper,
    poisson_rational,
)


def _chi2_pvalue(counts, probs):
    keep = probs * counts.sum() >= 5
    obs = np.r_[counts[keep], counts[~keep].sum()]
    exp = np.r_[probs[keep], probs[~keep].sum()] * counts.sum()
    return stats.chisquare(obs, exp).pvalue


@pytest.mark.parametrize("t,s", [(3, 1), (7, 2), (1, 4), (5000, 1024)])
def test_discrete_laplace_matches_its_exact_pmf(t, s):
    rng = np.random.default_rng(11)
    z = discrete_laplace(t, s, 400_000, rng)
    q = math.exp(-s / t)
    width = int(10 * t / s) + 2
    ks = np.arange(-width, width + 1)
    probs = (1 - q) / (1 + q) * q ** np.abs(ks)
    counts = np.array([(z == k).sum() for k in ks]) if width < 60 else np.histogram(z, np.r_[ks, width + 1])[0]
    assert counts.sum() >= 0.999 * z.size
    assert _chi2_pvalue(counts, probs / probs.sum()) > 1e-4
    assert z.var() == pytest.approx(discrete_laplace_variance(t, s), rel=0.02)


@pytest.mark.parametrize("num,den", [(0, 5), (3, 7), (5, 5)])
def test_bernoulli_exp_neg_has_probability_exp_minus_gamma(num, den):
    rng = np.random.default_rng(12)
    b = bernoulli_exp_neg(np.full(400_000, num), den, rng)
    p = math.exp(-num / den)
    assert abs(b.mean() - p) < 5 * math.sqrt(p * (1 - p) / b.size) + 1e-12


def test_bernoulli_dyadic_is_one_uniform_integer_comparison():
    """Replaying the same generator shows each coin is integers(0, 2^32) < A."""
    a = 1_234_567_890
    got = bernoulli_dyadic(a, 1000, np.random.default_rng(5))
    ints = np.random.default_rng(5).integers(0, DYADIC_ONE, size=1000, dtype=np.int64)
    assert np.array_equal(got, ints < a)


def test_dyadic_below_is_exactly_below():
    for p in (0.1, 1 / 3, 0.999999, 2**-40):
        a = dyadic_below(p)
        assert Fraction(a, DYADIC_ONE) <= Fraction(p) < Fraction(a + 1, DYADIC_ONE)


@pytest.mark.parametrize("eps,g", [(0.5, 2), (4.0, 56), (8.0, 2048)])
def test_grr_keep_numerator_meets_epsilon_with_its_exact_ratio(eps, g):
    a = grr_keep_numerator(eps, g)
    ratio = Fraction(a * (g - 1), DYADIC_ONE - a)
    assert math.log(ratio) <= eps
    assert math.log(Fraction((a + 2) * (g - 1), DYADIC_ONE - a - 2)) > eps - 1e-6  # and is the largest (up to 2)


def test_laplace_scale_fraction_is_at_least_sensitivity_over_epsilon():
    for sens, eps in ((1, 0.1), (29164, 1.0), (7, 8.0)):
        t, s = laplace_scale_fraction(sens, eps)
        assert Fraction(t, s) >= Fraction(sens) / Fraction(eps)
        assert Fraction(t - 1, s) < Fraction(sens) / Fraction(eps)


def test_log_ratio_upper_bounds_the_log():
    assert log_ratio_upper(3, 2) >= math.log(1.5)
    assert log_ratio_upper(3, 2) - math.log(1.5) < 1e-11


def test_discrete_laplace_rejects_a_zero_scale():
    with pytest.raises(ConfigError, match="scale"):
        discrete_laplace(0, 1, 10, np.random.default_rng(0))


def test_discrete_laplace_rejects_a_zero_denominator():
    with pytest.raises(ConfigError, match="scale"):
        discrete_laplace(3, 0, 10, np.random.default_rng(0))


def test_bernoulli_exp_neg_rejects_gamma_above_one():
    with pytest.raises(ConfigError, match="num <= den"):
        bernoulli_exp_neg(np.array([4]), 3, np.random.default_rng(0))


def test_bernoulli_dyadic_rejects_a_numerator_above_one():
    with pytest.raises(ConfigError, match="dyadic numerator"):
        bernoulli_dyadic(DYADIC_ONE + 1, 3, np.random.default_rng(0))


def test_dyadic_below_rejects_a_probability_above_one():
    with pytest.raises(ConfigError, match="probability"):
        dyadic_below(1.5)


def test_grr_rejects_a_single_outcome():
    with pytest.raises(ConfigError, match="outcomes"):
        grr_keep_numerator(1.0, 1)


def test_laplace_scale_rejects_zero_sensitivity():
    with pytest.raises(ConfigError, match="sensitivity"):
        laplace_scale_fraction(0, 1.0)


def test_log_ratio_rejects_non_positive_integers():
    with pytest.raises(ConfigError, match="positive"):
        log_ratio_upper(0, 1)


def _dg_pmf(s, clip):
    ks = np.arange(-clip, clip + 1)
    w = np.exp(-(ks.astype(float) ** 2) / (2 * s))
    return ks, w / w.sum()


@pytest.mark.parametrize("s,clip", [(1, 6), (16, 30), (1000, 200), (1000, 40)])
def test_discrete_gaussian_matches_its_exact_truncated_pmf(s, clip):
    z = discrete_gaussian(s, clip, 300_000, np.random.default_rng(12))
    ks, probs = _dg_pmf(s, clip)
    assert np.abs(z).max() <= clip
    counts = np.bincount(z + clip, minlength=2 * clip + 1)
    keep = probs * z.size >= 5
    obs = np.r_[counts[keep], counts[~keep].sum()]
    exp = np.r_[probs[keep], probs[~keep].sum()] * z.size
    assert stats.chisquare(obs[exp > 0], exp[exp > 0]).pvalue > 1e-4
    assert abs(z.mean()) < 5 * math.sqrt(s / z.size)


def test_discrete_gaussian_tail_bound_is_above_the_exact_tail():
    for s, clip in [(1, 2), (16, 10), (1000, 60), (1000, 120)]:
        ks, _ = _dg_pmf(s, 40 * int(math.sqrt(s)) + 200)
        w = np.exp(-(ks.astype(float) ** 2) / (2 * s))
        exact = w[ks > clip].sum() / w.sum()
        assert exact <= discrete_gaussian_tail(s, clip) <= 10 * exact + 1e-300


def test_discrete_gaussian_rejects_a_zero_variance():
    with pytest.raises(ConfigError, match="variance parameter"):
        discrete_gaussian(0, 5, 10, np.random.default_rng(0))


def test_discrete_gaussian_rejects_a_variance_beyond_the_integer_range():
    with pytest.raises(ConfigError, match="variance parameter"):
        discrete_gaussian((1 << 20) + 1, 5, 10, np.random.default_rng(0))


def test_discrete_gaussian_rejects_a_zero_clip():
    with pytest.raises(ConfigError, match="clip"):
        discrete_gaussian(4, 0, 10, np.random.default_rng(0))


@pytest.mark.parametrize("num,den", [(1, 16), (1, 2), (23, 16), (7, 3)])
def test_poisson_rational_matches_its_exact_pmf(num, den):
    rng = np.random.default_rng(21)
    k = poisson_rational(num, den, 400_000, rng)
    mu = num / den
    ks = np.arange(0, 30)
    assert _chi2_pvalue(np.bincount(k, minlength=30)[:30], stats.poisson.pmf(ks, mu)) > 1e-4
    assert k.mean() == pytest.approx(mu, rel=0.02)


def test_poisson_rational_chi_square_catches_a_rate_off_by_five_percent():
    # The same test on a sampler whose rate is 5% too high fails: the test can fail.
    k = poisson_rational(21, 20, 400_000, np.random.default_rng(22))
    assert _chi2_pvalue(np.bincount(k, minlength=30)[:30], stats.poisson.pmf(np.arange(30), 1.0)) < 1e-6


@pytest.mark.parametrize("num,den", [(0, 3), (5, 3), (7, 2), (29, 10)])
def test_bernoulli_exp_neg_rational_has_probability_exp_minus_x_beyond_one(num, den):
    b = bernoulli_exp_neg_rational(np.full(400_000, num), den, np.random.default_rng(23))
    p = math.exp(-num / den)
    assert abs(b.mean() - p) < 5 * math.sqrt(p * (1 - p) / b.size) + 1e-12


def test_bernoulli_exp_neg_mixed_rejects_a_negative_whole_part():
    with pytest.raises(ConfigError, match="whole"):
        bernoulli_exp_neg_mixed(np.array([-1]), np.array([0]), 3, np.random.default_rng(0))


def test_poisson_rational_rejects_a_zero_denominator():
    with pytest.raises(ConfigError, match="poisson"):
        poisson_rational(1, 0, 5, np.random.default_rng(0))


# -- the batched constructions (factorial stops, runs, oversampled passes) ----------------------

from shoal.common.mechanisms import exact_sampling as es  # noqa: E402


def test_factorial_stops_have_the_exact_law_one_over_k_factorial():
    j = es._factorial_stops(400_000, np.random.default_rng(41))
    assert j.min() >= 2
    ks = np.arange(2, 12)
    probs = np.array([1 / math.factorial(k - 1) - 1 / math.factorial(k) for k in ks])
    assert _chi2_pvalue(np.bincount(j, minlength=12)[2:12], probs / probs.sum()) > 1e-4


class _ZerosFirst:
    """A Generator whose U(20!) draws are all 0 (J > 20): the continuation is exercised."""

    def __init__(self, rng):
        self.rng = rng

    def integers(self, low, high, size=None, dtype=np.int64):
        out = self.rng.integers(low, high, size=size, dtype=dtype)
        return np.zeros_like(out) if high == es.STOP_RANGE else out


def test_factorial_stops_continue_exactly_beyond_twenty():
    # Given J > 20: P(J = 21) = 20/21, P(J = 22) = 1/21 - 1/(21 22), ... coin by coin.
    j = es._factorial_stops(200_000, _ZerosFirst(np.random.default_rng(42)))
    ks = np.arange(21, 26)
    probs = np.array([math.factorial(20) * (1 / math.factorial(k - 1) - 1 / math.factorial(k)) for k in ks])
    assert j.min() == 21
    assert _chi2_pvalue(np.bincount(j - 21, minlength=5)[:5], probs / probs.sum()) > 1e-4


@pytest.mark.parametrize("block", [lambda m: 1, lambda m: 3, es.oversampled, es.poisson_block])
def test_runs_are_iid_geometric_whatever_the_block_sizes(block):
    # Runs cut by block ends and carried over must still be i.i.d. geometric: P(V = v) = (1 - p) p^v.
    rng = np.random.default_rng(43)
    p = 0.6
    v = es._runs(100_000, lambda size: rng.random(size) < p, block)
    ks = np.arange(0, 25)
    probs = (1 - p) * p**ks
    assert _chi2_pvalue(np.bincount(v, minlength=25)[:25], probs / probs.sum()) > 1e-4
    assert abs(np.corrcoef(v[:-1], v[1:])[0, 1]) < 0.02


def test_geometric_exp_neg1_has_ratio_one_over_e():
    v = es._geometric_exp_neg1(400_000, np.random.default_rng(44))
    ks = np.arange(0, 20)
    probs = (1 - math.exp(-1)) * np.exp(-ks)
    assert _chi2_pvalue(np.bincount(v, minlength=20)[:20], probs / probs.sum()) > 1e-4


def test_bernoulli_exp_neg_is_exact_per_element_for_mixed_numerators():
    rng = np.random.default_rng(45)
    den = 7
    num = np.tile(np.arange(den + 1), 50_000)
    b = bernoulli_exp_neg(num, den, rng)
    for k in range(den + 1):
        got, p = b[num == k], math.exp(-k / den)
        assert abs(got.mean() - p) < 5 * math.sqrt(p * (1 - p) / got.size) + 1e-12


def test_bernoulli_exp_neg_keeps_the_shape_and_takes_empty_arrays():
    rng = np.random.default_rng(46)
    assert bernoulli_exp_neg(np.zeros((3, 4), dtype=np.int64), 5, rng).shape == (3, 4)
    assert bernoulli_exp_neg(np.zeros(0, dtype=np.int64), 5, rng).shape == (0,)
    assert discrete_laplace(3, 1, 0, rng).shape == (0,)
    assert poisson_rational(1, 2, 0, rng).shape == (0,)


@pytest.mark.parametrize("num,den", [(1, 100_000), (1, 3), (2, 4)])
def test_poisson_below_one_matches_its_exact_pmf(num, den):
    k = es._poisson_below_one(num, den, 400_000, np.random.default_rng(47))
    ks = np.arange(0, 15)
    probs = stats.poisson.pmf(ks, num / den)
    assert _chi2_pvalue(np.bincount(k, minlength=15)[:15], probs / probs.sum()) > 1e-4


def test_the_pmf_test_fails_on_a_laplace_sampler_with_a_broken_exp_coin(monkeypatch):
    # Bernoulli(1/2) in place of Bernoulli(exp(-1)) for the geometric part: the tails are wrong, caught.
    monkeypatch.setattr(es, "_exp_neg1_trials", lambda n, rng: rng.integers(0, 2, size=n) == 1)
    z = discrete_laplace(3, 1, 400_000, np.random.default_rng(48))
    q = math.exp(-1 / 3)
    ks = np.arange(-40, 41)
    probs = (1 - q) / (1 + q) * q ** np.abs(ks)
    counts = np.array([(z == k).sum() for k in ks])
    assert _chi2_pvalue(counts, probs / probs.sum()) < 1e-6


def test_the_pmf_test_fails_on_a_factorial_stop_off_by_one():
    # J with P(J > k) = 1 / (k + 1)! (a threshold table shifted by one) is caught by the same test.
    rng = np.random.default_rng(49)
    j = es._factorial_stops(400_000, rng) - 1
    j = j[j >= 2]
    ks = np.arange(2, 12)
    probs = np.array([1 / math.factorial(k - 1) - 1 / math.factorial(k) for k in ks])
    assert _chi2_pvalue(np.bincount(j, minlength=12)[2:12], probs / probs.sum()) < 1e-6


# -- one test per invalid parameter ---------------------------------------------------------------

def test_discrete_laplace_rejects_a_scale_numerator_beyond_2_50():
    with pytest.raises(ConfigError, match="scale"):
        discrete_laplace((1 << 50) + 1, 1, 10, np.random.default_rng(0))


def test_bernoulli_exp_neg_rejects_a_negative_numerator():
    with pytest.raises(ConfigError, match="num <= den"):
        bernoulli_exp_neg(np.array([-1]), 3, np.random.default_rng(0))


def test_bernoulli_exp_neg_rejects_a_zero_denominator():
    with pytest.raises(ConfigError, match="num <= den"):
        bernoulli_exp_neg(np.array([0]), 0, np.random.default_rng(0))


def test_bernoulli_exp_neg_rational_rejects_a_negative_numerator():
    with pytest.raises(ConfigError, match="num >= 0"):
        bernoulli_exp_neg_rational(np.array([-1]), 3, np.random.default_rng(0))


def test_bernoulli_exp_neg_rational_rejects_a_zero_denominator():
    with pytest.raises(ConfigError, match="den >= 1"):
        bernoulli_exp_neg_rational(np.array([1]), 0, np.random.default_rng(0))


def test_poisson_rational_rejects_a_negative_numerator():
    with pytest.raises(ConfigError, match="poisson"):
        poisson_rational(-1, 3, 5, np.random.default_rng(0))


def test_poisson_rational_rejects_a_denominator_beyond_2_50():
    with pytest.raises(ConfigError, match="poisson"):
        poisson_rational(1, (1 << 50) + 1, 5, np.random.default_rng(0))


def test_discrete_gaussian_rejects_a_clip_beyond_the_integer_range():
    with pytest.raises(ConfigError, match="clip"):
        discrete_gaussian(4, 1 << 30, 10, np.random.default_rng(0))


def test_a_factorial_stop_past_twenty_reads_as_the_spec_says():
    # u64 = 1 makes U(20!) = 0 (Lemire: 1 * 20! < 2^64 and above 2^64 mod 20!); then U(21) from
    # u32 = 1 is 0 (the 1/21 coin passes) and U(22) from u32 = 2^32 - 1 is not: J = 22. The TS device
    # reads the same bytes to the same J (clients/js/test/samplers.test.ts).
    from shoal.common.randomness.device_random import ReplaySource

    source = ReplaySource((1).to_bytes(8, "little") + (1).to_bytes(4, "little") + (2**32 - 1).to_bytes(4, "little"))
    assert es._factorial_stops(1, source.generator()).tolist() == [22]
    assert source.position == 16 and not source.overrun
