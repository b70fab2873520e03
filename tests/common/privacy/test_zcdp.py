"""zCDP composition (common/privacy/zcdp.py): discrete-Gaussian releases add their rho, and a
plan hands out shares of one rho so that the releases compose within the request; the stated
composition of a ``RoundsEvent`` (``accounting.central_guarantee``) takes it where it is smaller."""

from __future__ import annotations

import math

import pytest

from shoal.common.errors import ConfigError, PrivacyError
from shoal.common.kinds.base import secure_sum_event
from shoal.common.kinds.refine import bucket_sum_params
from shoal.common.mechanisms.secure_sum import SumLaw
from shoal.common.privacy.accounting import central_guarantee
from shoal.common.privacy.events import RoundsEvent, SecureSumEvent
from shoal.common.privacy.zcdp import (
    composed_epsilon,
    gaussian_epsilons,
    rho_for_tight,
    zcdp_delta_tight,
)

GAUSSIAN = SumLaw("gaussian")


def _sum(eps: float, delta: float, d: int = 16, law: SumLaw = GAUSSIAN):
    return bucket_sum_params(64, d, eps, delta, 20_000, 40_000, law)


def test_the_composed_epsilon_meets_delta_and_is_the_smallest_that_does():
    rho, failure, delta = 2 * rho_for_tight(0.5, 0.25e-6), 1e-9, 1e-6
    eps = composed_epsilon(rho, failure, delta, 1.0)
    assert zcdp_delta_tight(rho, eps) + (1 + math.exp(eps)) * failure <= delta
    below = eps * (1 - 1e-6)
    assert zcdp_delta_tight(rho, below) + (1 + math.exp(below)) * failure > delta
    assert 0.6 < eps < 0.75  # two releases at eps 0.5 each: 0.70, not 1.0


def test_a_failure_probability_costs_epsilon():
    rho = 0.01
    assert composed_epsilon(rho, 4e-7, 1e-6, 5.0) > composed_epsilon(rho, 0.0, 1e-6, 5.0)


def test_no_epsilon_up_to_the_cap_is_infinity():
    assert composed_epsilon(1.0, 0.0, 1e-6, 0.5) == math.inf
    assert composed_epsilon(0.01, 1e-6, 1e-6, 5.0) == math.inf  # the failures alone exceed delta


def test_a_plans_rhos_add_up_to_at_most_the_totals():
    deltas, shares = (0.05e-6, 0.94e-6, 0.01e-6), (0.025, 0.475, 0.5)
    eps_i = gaussian_epsilons(1.0, deltas, shares)
    rhos = [rho_for_tight(e, d / 2) for e, d in zip(eps_i, deltas, strict=True)]  # what a gaussian sum derives
    assert math.fsum(rhos) <= rho_for_tight(1.0, math.fsum(deltas) / 2)
    assert all(abs(r / (s * rho_for_tight(1.0, 0.5e-6)) - 1) < 1e-5 for r, s in zip(rhos, shares, strict=True))
    assert eps_i[1] > 0.475 and eps_i[2] > 0.5  # each more than its basic-composition share


@pytest.mark.parametrize("deltas,shares", [
    ((1e-6,), (0.5, 0.5)),  # one share per release
    ((1e-6, 1e-6), (0.5, 0.0)),  # positive shares
    ((1e-6, 1e-6), (0.6, 0.5)),  # summing to <= 1
    ((), ()),  # at least one release
])
def test_a_plan_rejects_invalid_shares(deltas, shares):
    with pytest.raises(ConfigError, match="one positive share per release"):
        gaussian_epsilons(1.0, deltas, shares)


def test_rounds_of_gaussian_sums_are_stated_in_zcdp_when_that_is_smaller():
    a, b = secure_sum_event(_sum(0.5, 0.5e-6)), secure_sum_event(_sum(0.5, 0.5e-6))
    eps, delta = central_guarantee(RoundsEvent((a, b)))
    assert delta == 1e-6 and eps == composed_epsilon(a.rho + b.rho, a.failure + b.failure, 1e-6, 1.0) < 0.75


def test_laplace_sums_and_a_single_gaussian_sum_compose_by_adding_up():
    lap = secure_sum_event(_sum(0.5, 0.5e-6, d=2, law=SumLaw("laplace")))
    gau = secure_sum_event(_sum(0.5, 0.5e-6))
    assert lap.rho == 0 and central_guarantee(RoundsEvent((lap, lap))) == (1.0, 1e-6)
    assert central_guarantee(RoundsEvent((lap, gau))) == (1.0, 1e-6)


def test_nested_rounds_are_flattened_before_the_gaussian_sums_compose():
    a = secure_sum_event(_sum(0.5, 0.25e-6))
    flat = central_guarantee(RoundsEvent((a, a, a)))
    assert central_guarantee(RoundsEvent((RoundsEvent((a, a)), a))) == flat and flat[0] < 1.5 * 0.75


def test_a_planned_stage_composes_within_the_request():
    deltas, shares = (0.05e-6, 0.94e-6, 0.01e-6), (0.025, 0.475, 0.5)
    events = [secure_sum_event(_sum(e, d, law=SumLaw("gaussian", 1.0)))
              for e, d in zip(gaussian_epsilons(1.0, deltas, shares), deltas, strict=True)]
    eps, delta = central_guarantee(RoundsEvent(tuple(events)))
    assert eps <= 1.0 and delta <= 1e-6 and sum(e.epsilon for e in events) > 1.6  # basic would state 1.6+


@pytest.mark.parametrize("kw", [
    {"noise": "laplace", "rho": 0.1},  # rho belongs to the gaussian law
    {"noise": "gaussian", "rho": 0.0},  # ... and a gaussian sum has one
    {"noise": "gaussian", "rho": 0.1, "failure": -1e-9},  # a probability
])
def test_a_secure_sum_event_rejects_an_invalid_rho_or_failure(kw):
    with pytest.raises(PrivacyError, match="belongs to the gaussian law"):
        SecureSumEvent(1.0, 1e-6, 100, 3, **kw)


def test_the_smallest_epsilon_is_found_where_the_failures_charge_rules_out_the_cap():
    # at eps 20 the failure alone, (1 + e^20) 1e-9, is far above delta: the eps that meet delta end below it
    eps = composed_epsilon(0.01, 1e-9, 1e-6, 20.0)
    assert eps < 2.0 and zcdp_delta_tight(0.01, eps) + (1 + math.exp(eps)) * 1e-9 <= 1e-6
