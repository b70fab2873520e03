"""The partition stage's budget (common/kinds/partition_plan.py): the zCDP plan where it gives no
round more noise than basic composition, within the request either way; one test per invalid
parameter."""

from __future__ import annotations

import math

import pytest

from shoal.common.errors import ConfigError
from shoal.common.kinds.base import secure_sum_event
from shoal.common.kinds.partition import MEAN_SHARE
from shoal.common.kinds.partition_plan import PartitionPlan, RoundBudget, plan_partition_stage
from shoal.common.kinds.refine import bucket_sum_params
from shoal.common.mechanisms.secure_sum import SumLaw
from shoal.common.privacy.accounting import central_guarantee, spend_left, split_spend
from shoal.common.privacy.events import RoundsEvent


def _plan(eps: float, d: int, refine: bool = True) -> PartitionPlan:
    rest, part = split_spend(1e-6, 0.01)
    first = (spend_left(eps, eps / 2), rest) if refine else (eps, 1e-6)
    return plan_partition_stage(eps, first, (eps / 2, part) if refine else None, d, 20_000, 40_000)


def _composed(plan: PartitionPlan, d: int) -> tuple[float, float]:
    events = [secure_sum_event(bucket_sum_params(2, d, b.epsilon, b.delta, 20_000, 40_000, b.law)) for b in plan.rounds]
    return central_guarantee(RoundsEvent(tuple(events)))


@pytest.mark.parametrize("eps", [0.5, 1.0, 4.0])
def test_letter_sized_stages_compose_in_zcdp_with_more_per_round_and_within_the_request(eps):
    plan = _plan(eps, 16)
    assert plan.composition == "zcdp" and all(b.law == SumLaw("gaussian", eps) for b in plan.rounds)
    assert plan.partition.epsilon > eps / 2 * (1 - MEAN_SHARE) and plan.refine is not None
    assert plan.refine.epsilon > eps / 2
    eps_c, delta_c = _composed(plan, 16)
    assert eps_c <= eps and delta_c <= 1e-6


def test_where_the_gaussian_law_is_noisier_the_basic_plan_stays():
    plan = _plan(4.0, 1)  # one feature: the laplace law's L1 sensitivity is the smaller
    assert plan.composition == "basic" and all(b.law == SumLaw() for b in plan.rounds)
    assert math.fsum(b.epsilon for b in plan.rounds) <= 4.0 and _composed(plan, 1)[0] <= 4.0


def test_without_a_refine_round_the_mean_and_partition_rounds_share_the_request():
    plan = _plan(1.0, 16, refine=False)
    assert plan.refine is None and len(plan.rounds) == 2 and plan.composition == "zcdp"
    assert _composed(plan, 16)[0] <= 1.0


def test_a_plan_rejects_an_unknown_composition():
    b = RoundBudget(0.5, 1e-7)
    with pytest.raises(ConfigError, match="'basic' or 'zcdp'"):
        PartitionPlan(b, b, None, "advanced")


@pytest.mark.parametrize("eps,delta", [(0.0, 1e-6), (1.0, 0.0), (1.0, 1.0)])
def test_a_round_budget_rejects_invalid_parameter(eps, delta):
    with pytest.raises(ConfigError, match="eps > 0 and delta in"):
        RoundBudget(eps, delta)
