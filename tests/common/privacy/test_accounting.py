"""Amplification by shuffling (FMT'21): formula, exactness of the numerical bound, monotonicity, inverse."""

import math

import numpy as np
import pytest
from scipy import stats

from shoal.common.errors import PrivacyError
from shoal.common.privacy.accounting import (
    central_epsilon,
    closed_form_epsilon,
    closed_form_max_eps0,
    max_local_epsilon,
    numerical_delta,
    numerical_epsilon,
)


def test_closed_form_reproduces_the_authors_published_value():
    # The README of the code accompanying FMT'21 (apple/ml-shuffling-amplification,
    # arXiv:2012.12803 Appendix E) publishes, for n=1e5, eps0=4, delta=1e-6:
    # "according to our closed form analysis ... eps is at most 0.5378040242374512".
    assert closed_form_epsilon(4.0, 100_000, 1e-6) == pytest.approx(0.5378040242374512, abs=1e-9)
    assert closed_form_max_eps0(100_000, 1e-6) == pytest.approx(math.log(100_000 / (16 * math.log(4 / 1e-6))))


def test_numerical_bound_lies_in_the_authors_published_bracket():
    # Same source and parameters: the numerical analysis (10 bisection steps,
    # step 100) gives eps "between 0.1675385583317841 and 0.172790550755978".
    # Our evaluation is exact to 1e-6, so it must fall inside that bracket.
    eps = numerical_epsilon(4.0, 100_000, 1e-6)
    assert 0.1675385583317841 <= eps <= 0.172790550755978


def test_closed_form_is_never_below_the_focs_eq_2():
    # The corrected statement only enlarges FOCS'21 Eq. (2)'s factor (e^eps0-1)/(e^eps0+1).
    for eps0, n, d in [(1.0, 10_000, 1e-6), (2.0, 100_000, 1e-6), (5.0, 1_000_000, 1e-8)]:
        e0 = math.exp(eps0)
        eq2 = math.log(1 + (e0 - 1) / (e0 + 1) * (8 * math.sqrt(e0 * math.log(4 / d)) / math.sqrt(n) + 8 * e0 / n))
        assert closed_form_epsilon(eps0, n, d) >= eq2


def test_closed_form_refuses_eps0_outside_its_range():
    with pytest.raises(PrivacyError, match="closed form needs"):
        closed_form_epsilon(6.0, 10_000, 1e-6)


def _delta_by_enumeration(eps0, n, eps):
    """The hockey-stick divergence of Theorem 3.2's P and Q summed over every (c, a)."""
    p, q, ee = math.exp(-eps0), math.exp(eps0) / (math.exp(eps0) + 1), math.exp(eps)
    total = 0.0
    for c in range(n):
        wc = stats.binom.pmf(c, n - 1, p)
        b = stats.binom.pmf(np.arange(-1, c + 2), c, 0.5)  # Bin(c, 1/2) at a-1 for a = 0..c+1, then at a
        prev, cur = b[:-1], b[1:]
        pa = q * prev + (1 - q) * cur
        qa = (1 - q) * prev + q * cur
        total += wc * np.maximum(pa - ee * qa, 0).sum()
    return total


@pytest.mark.parametrize("eps0,eps", [(1.0, 0.3), (2.0, 0.8), (3.0, 1.5), (4.0, 3.9)])
def test_numerical_delta_equals_the_exact_sum_over_all_counts(eps0, eps):
    assert numerical_delta(eps0, 300, eps) == pytest.approx(_delta_by_enumeration(eps0, 300, eps), rel=1e-9, abs=1e-15)


def test_numerical_delta_near_eps0_is_the_all_clones_on_one_side_event():
    # Just below eps0 only a = c + 1 counts, so delta = (q - e^eps (1 - q)) E[2^-C]
    # with E[2^-C] = (1 - p/2)^(n-1): the probability that every clone sides with device 1.
    eps0, n, eps = 6.0, 10_000, 5.7
    p, q = math.exp(-eps0), math.exp(eps0) / (math.exp(eps0) + 1)
    expected = (q - math.exp(eps) * (1 - q)) * (1 - p / 2) ** (n - 1)
    assert numerical_delta(eps0, n, eps) == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("n", [10_000, 100_000, 1_000_000])
@pytest.mark.parametrize("eps0", [0.5, 1.0, 2.0, 3.0])
def test_numerical_bound_is_below_the_closed_form(n, eps0):
    if eps0 > closed_form_max_eps0(n, 1e-6):
        pytest.skip("outside the closed form's range")
    assert numerical_epsilon(eps0, n, 1e-6) < closed_form_epsilon(eps0, n, 1e-6)


def test_central_epsilon_grows_with_eps0_and_shrinks_with_n_and_delta():
    e = [numerical_epsilon(e0, 100_000, 1e-6) for e0 in (0.5, 1, 2, 4, 6, 8)]
    assert all(a < b for a, b in zip(e, e[1:], strict=False))
    e = [numerical_epsilon(4.0, n, 1e-6) for n in (10_000, 100_000, 1_000_000)]
    assert all(a > b for a, b in zip(e, e[1:], strict=False))
    e = [numerical_epsilon(4.0, 100_000, d) for d in (1e-4, 1e-6, 1e-8)]
    assert all(a < b for a, b in zip(e, e[1:], strict=False))
    assert numerical_epsilon(4.0, 100_000, 1e-6) < 4.0  # amplification happens


@pytest.mark.parametrize("bound", ["fmt21-numerical", "fmt21-closed-form"])
@pytest.mark.parametrize("eps,n", [(0.5, 1_000_000), (1.0, 1_000_000), (2.0, 100_000), (1.0, 20_000)])
def test_inverse_gives_the_largest_eps0_to_1e3(bound, eps, n):
    e0 = max_local_epsilon(eps, 1e-6, n, bound)
    assert e0 >= eps
    assert central_epsilon(e0, n, 1e-6, bound) <= eps + 2e-6  # numerical_epsilon bisects to 1e-6
    if bound == "fmt21-numerical" or e0 + 1e-3 <= closed_form_max_eps0(n, 1e-6):
        assert central_epsilon(e0 + 1e-3, n, 1e-6, bound) > eps


def test_unknown_bound_raises():
    with pytest.raises(PrivacyError, match="unknown amplification bound"):
        central_epsilon(1.0, 1000, 1e-6, "renyi-guess")


@pytest.mark.parametrize("kw", [{"eps0": 0.0}, {"eps0": float("inf")}, {"n": 1}])
def test_invalid_local_parameters_raise(kw):
    args = {"eps0": 1.0, "n": 1000} | kw
    with pytest.raises(PrivacyError):
        numerical_epsilon(args["eps0"], args["n"], 1e-6)


@pytest.mark.parametrize("delta", [0.0, 1.0, -1e-6])
def test_invalid_delta_raises(delta):
    with pytest.raises(PrivacyError, match="delta"):
        numerical_epsilon(1.0, 1000, delta)


def test_a_choice_of_reports_costs_its_largest_option():
    from shoal.common.privacy.events import ChoiceEvent, ComposedEvent, NoReportEvent, PrivUnitEvent
    from shoal.common.privacy.events import local_epsilon as eps_of
    big = ComposedEvent((PrivUnitEvent(2.0, 4, 8, 2, 1),))
    small = ComposedEvent((PrivUnitEvent(0.5, 4, 8, 2, 1), NoReportEvent()))
    assert eps_of(ChoiceEvent((big, small), (0.2, 0.8))) == 2.0
    assert eps_of(ChoiceEvent((big, small), (0.0, 1.0))) == 0.5  # an option never taken costs nothing


@pytest.mark.parametrize(("options", "probabilities"), [((1,), (0.5,)), ((1, 2), (0.5,)), ((1, 2), (0.7, 0.7)), ((1, 2), (-0.1, 1.1))])
def test_choice_probabilities_must_be_a_distribution(options, probabilities):
    from shoal.common.privacy.events import ChoiceEvent
    with pytest.raises(PrivacyError):
        ChoiceEvent(options, probabilities)
