"""The partition stage's budget (common/kinds/partition_plan.py): the zCDP plan where it gives no
round more noise than basic composition, within the request either way; a refine chain of
Su et al.'s count of rounds, its budget split evenly; one test per invalid parameter."""

from __future__ import annotations

import math

import pytest

from shoal.common.errors import ConfigError
from shoal.common.kinds.base import secure_sum_event
from shoal.common.kinds.partition import MEAN_SHARE
from shoal.common.kinds.partition_plan import (
    CHAIN_STEP_NOISE,
    REFINE_MAX_ROUNDS,
    PartitionPlan,
    RoundBudget,
    chain_noise,
    even_split,
    plan_partition_stage,
    plan_refine_chain,
)
from shoal.common.kinds.refine import bucket_sum_params
from shoal.common.mechanisms.secure_sum import SumLaw
from shoal.common.privacy.accounting import central_guarantee, spend_left, split_spend
from shoal.common.privacy.events import RoundsEvent


def _plan(eps: float, d: int, refine: bool = True, refines: int = 1) -> PartitionPlan:
    rest, part = split_spend(1e-6, 0.01)
    first = (spend_left(eps, eps / 2), rest) if refine else (eps, 1e-6)
    return plan_partition_stage(eps, first, (eps / 2, part) if refine else None, d, 20_000, 40_000, refines)


def _composed(plan: PartitionPlan, d: int) -> tuple[float, float]:
    events = [secure_sum_event(bucket_sum_params(2, d, b.epsilon, b.delta, 20_000, 40_000, b.law)) for b in plan.rounds]
    return central_guarantee(RoundsEvent(tuple(events)))


@pytest.mark.parametrize("eps", [0.5, 1.0, 4.0])
def test_letter_sized_stages_compose_in_zcdp_with_more_per_round_and_within_the_request(eps):
    plan = _plan(eps, 16)
    assert plan.composition == "zcdp" and all(b.law == SumLaw("gaussian", eps) for b in plan.rounds)
    assert plan.partition.epsilon > eps / 2 * (1 - MEAN_SHARE) and len(plan.refines) == 1
    assert plan.refines[0].epsilon > eps / 2
    eps_c, delta_c = _composed(plan, 16)
    assert eps_c <= eps and delta_c <= 1e-6


def test_where_the_gaussian_law_is_noisier_the_basic_plan_stays():
    plan = _plan(4.0, 1)  # one feature: the laplace law's L1 sensitivity is the smaller
    assert plan.composition == "basic" and all(b.law == SumLaw() for b in plan.rounds)
    assert math.fsum(b.epsilon for b in plan.rounds) <= 4.0 and _composed(plan, 1)[0] <= 4.0


def test_without_a_refine_round_the_mean_and_partition_rounds_share_the_request():
    plan = _plan(1.0, 16, refine=False)
    assert plan.refines == () and len(plan.rounds) == 2 and plan.composition == "zcdp"
    assert _composed(plan, 16)[0] <= 1.0


@pytest.mark.parametrize("eps,d", [(1.0, 16), (4.0, 6), (4.0, 1)])
def test_a_refine_chain_splits_the_refine_budget_evenly_and_composes_within_the_request(eps, d):
    one, chain = _plan(eps, d), _plan(eps, d, refines=3)
    assert len(chain.refines) == 3 and len(chain.rounds) == 5 and chain.composition == one.composition
    assert chain.mean == one.mean and chain.partition == one.partition  # the first stage's budget is unchanged
    if chain.composition == "zcdp":  # a third of the refine round's rho each: eps_i below its whole eps
        assert all(r.epsilon < one.refines[0].epsilon for r in chain.refines)
    else:
        assert math.fsum(r.epsilon for r in chain.refines) <= one.refines[0].epsilon
    assert math.fsum(r.delta for r in chain.refines) <= one.refines[0].delta
    eps_c, delta_c = _composed(chain, d)
    assert eps_c <= eps and delta_c <= 1e-6


def _chain(eps: float, n: int, d: int, k: int) -> PartitionPlan:
    rest, part = split_spend(1e-6, 0.01)
    return plan_refine_chain(eps, (spend_left(eps, eps / 2), rest), (eps / 2, part), d, k, n, n, 100 * n)


@pytest.mark.parametrize("eps,rounds", [(0.5, 1), (1.0, 1), (2.0, 2), (4.0, 4)])
def test_letter_sized_chains_take_as_many_rounds_as_keep_a_cluster_s_mean_within_the_noise_rule(eps, rounds):
    plan = _chain(eps, 20_000, 16, 26)  # 770 devices per cluster in 16 dimensions: the noise decides
    assert len(plan.refines) == rounds
    assert chain_noise(plan, 16, 20_000, 26, 20_000, 2_000_000) <= CHAIN_STEP_NOISE or rounds == 1
    if rounds < REFINE_MAX_ROUNDS:  # one more round would pass the rule
        longer = _plan_with(eps, 16, rounds + 1)
        assert chain_noise(longer, 16, 20_000, 26, 20_000, 2_000_000) > CHAIN_STEP_NOISE


def _plan_with(eps: float, d: int, refines: int) -> PartitionPlan:
    rest, part = split_spend(1e-6, 0.01)
    return plan_partition_stage(eps, (spend_left(eps, eps / 2), rest), (eps / 2, part), d, 20_000, 2_000_000, refines)


@pytest.mark.parametrize("eps", [0.5, 4.0])
def test_broad_clusters_of_many_devices_take_the_longest_chain(eps):
    plan = _chain(eps, 23_000, 6, 5)  # the overlapping-cluster generator's shape: 4,600 devices per cluster
    assert len(plan.refines) == REFINE_MAX_ROUNDS and len(plan.rounds) == 2 + REFINE_MAX_ROUNDS


def test_without_a_refine_round_there_is_no_chain_noise():
    assert chain_noise(_plan(1.0, 16, refine=False), 16, 20_000, 26, 20_000, 40_000) == 0.0


@pytest.mark.parametrize("total,parts", [(1.0, 3), (0.7, 7), (1e-6 * 0.01, 3), (4.0 / 3, 4)])
def test_an_even_split_never_adds_up_to_more_than_its_total(total, parts):
    got = even_split(total, parts)
    assert len(got) == parts and math.fsum(got) <= total and min(got) > 0
    assert max(got) - min(got) <= 1e-12 * total


def test_an_even_split_rejects_zero_parts():
    with pytest.raises(ConfigError, match="at least one part"):
        even_split(1.0, 0)


def test_a_plan_rejects_an_unknown_composition():
    b = RoundBudget(0.5, 1e-7)
    with pytest.raises(ConfigError, match="'basic' or 'zcdp'"):
        PartitionPlan(b, b, (), "advanced")


def test_a_plan_rejects_a_longer_chain_than_the_cap():
    b = RoundBudget(0.5, 1e-7)
    with pytest.raises(ConfigError, match=f"at most {REFINE_MAX_ROUNDS} refine rounds"):
        PartitionPlan(b, b, (b,) * (REFINE_MAX_ROUNDS + 1), "basic")


@pytest.mark.parametrize("eps,delta", [(0.0, 1e-6), (1.0, 0.0), (1.0, 1.0)])
def test_a_round_budget_rejects_invalid_parameter(eps, delta):
    with pytest.raises(ConfigError, match="eps > 0 and delta in"):
        RoundBudget(eps, delta)
