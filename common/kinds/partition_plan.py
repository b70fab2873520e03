"""The budget of a shuffle-model partition stage: a one-bit mean round, the partition
round through that mean, and (optionally) a chain of refine rounds, all secure sums
over the same devices (``kinds/partition.py``, ``kinds/refine.py``).

The refine chain (issue 41): the first refine round splits each center in two
(``partition.REFINE_SPLIT``), each later one is a Lloyd step on the last one's
centers, combined with them by their noise variance (``decoders/refine.py``,
``decoders/combined_steps.py``: where Lloyd has converged the rounds average,
as precise as one round of their whole budget); the refine budget is split
evenly between them. How many: ``plan_refine_chain``, the most rounds (at
most ``REFINE_MAX_ROUNDS``) whose noise on an average cluster's mean,
sqrt(d) sd / (n / k) in the unit ball, stays within ``CHAIN_STEP_NOISE``
(the first round, which must still tell clusters apart, gets a T-th of the
budget). Broad, overlapping clusters converge over several Lloyd steps and
one step from the buckets' centers left them short. Measured through
``simulate_rounds`` (shuffle + refine, delta 1e-6, refine share 0.5, zCDP
plan), one refine round -> the chain the rule takes:
- the overlapping-cluster generator (d = 6, k = 5, n = 23,000, 4 rounds; 10
  data seeds x 3 draws): 0.0791 / 0.0782 / 0.0775 / 0.0773 -> 0.0773 / 0.0764
  / 0.0759 / 0.0759 at eps 0.5 / 1 / 2 / 4 (a chain replacing centers
  instead of combining: 0.0771 / 0.0762 / 0.0758 / 0.0758);
- letter (d = 16, k = 26, n = 20,000; 1 / 1 / 2 / 4 rounds; 6 draws): eps 2
  0.0439 -> 0.0415, eps 4 0.0408 -> 0.0388 (the noise at 2 rounds: 0.187 /
  0.097 / 0.051 / 0.027 at eps 0.5 / 1 / 2 / 4);
- the paper generator's tight clusters (n = 1e4, d = 3 / 6 / 16, 3 seeds x 2
  draws) at eps 1: 0.0024 / 0.00087 / 0.0023 -> 0.00055 / 0.00093 / 0.0019,
  at eps 4 0.00043 / 0.00021 / 0.00036 -> 0.00014 / 0.00018 / 0.00028. A
  chain replacing centers instead of combining them left every tight
  cluster with a T-th of the budget's noise: d = 6, eps 1: 0.00225.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from shoal.common.errors import ConfigError
from shoal.common.kinds.partition import mean_budget
from shoal.common.kinds.refine import bucket_sum_params
from shoal.common.mechanisms.secure_sum import DEFAULT_LAW, SumLaw
from shoal.common.privacy.accounting import spend_left
from shoal.common.privacy.zcdp import gaussian_epsilons

REFINE_MAX_ROUNDS = 4  # the refine chain's rounds at most (``plan_refine_chain``): each asks every device again
CHAIN_STEP_NOISE = 0.06  # a chain's round at most this noise on an average cluster's mean (``plan_refine_chain``)


@dataclass(frozen=True)
class RoundBudget:
    """One secure-sum round's (eps, delta) and calibration."""

    epsilon: float
    delta: float
    law: SumLaw = DEFAULT_LAW

    def __post_init__(self) -> None:
        if not (self.epsilon > 0 and 0 < self.delta < 1):
            raise ConfigError(f"a round's budget needs eps > 0 and delta in (0, 1), got {self.epsilon}, {self.delta}")


@dataclass(frozen=True)
class PartitionPlan:
    """The rounds of a partition stage (its refine chain: ``refines``, in order, empty for
    none) and how they compose ("basic" or "zcdp")."""

    mean: RoundBudget
    partition: RoundBudget
    refines: tuple[RoundBudget, ...]
    composition: str

    def __post_init__(self) -> None:
        if self.composition not in ("basic", "zcdp"):
            raise ConfigError(f"a partition plan composes by 'basic' or 'zcdp', got {self.composition!r}")
        if len(self.refines) > REFINE_MAX_ROUNDS:
            raise ConfigError(f"a partition plan has at most {REFINE_MAX_ROUNDS} refine rounds, got {len(self.refines)}")

    @property
    def rounds(self) -> tuple[RoundBudget, ...]:
        return (self.mean, self.partition, *self.refines)


def even_split(total: float, parts: int) -> tuple[float, ...]:
    """``parts`` shares of ``total``, equal but for the last, which is what is left
    (``accounting.spend_left``): their sum never exceeds ``total``, in floating point."""
    if parts < 1:
        raise ConfigError(f"a budget splits into at least one part, got {parts}")
    head = (total / parts,) * (parts - 1)
    return (*head, spend_left(total, *head))


def plan_partition_stage(epsilon: float, first: tuple[float, float], refine: tuple[float, float] | None,
                         dim: int, min_devices: int, max_devices: int, refines: int = 1) -> PartitionPlan:
    """The plan for a total ``epsilon`` split by basic composition into the first stage's
    (eps, delta) and the refine chain's (None: no refine round), that split evenly between
    its ``refines`` rounds (``even_split``): the mean round takes ``partition.MEAN_SHARE``
    of the first stage (``mean_budget``). Returns the zCDP plan when it gives no round
    more noise than the basic one (module docstring)."""
    (mean_eps, mean_delta), (part_eps, part_delta) = mean_budget(*first)
    basic = [RoundBudget(mean_eps, mean_delta), RoundBudget(part_eps, part_delta)]
    if refine is not None:
        basic += [RoundBudget(e, d) for e, d in zip(even_split(refine[0], refines), even_split(refine[1], refines),
                                                    strict=True)]
    deltas = tuple(b.delta for b in basic)
    shares = tuple(b.epsilon / epsilon for b in basic)
    law = SumLaw("gaussian", epsilon)
    zcdp = [RoundBudget(e, b.delta, law) for e, b in zip(gaussian_epsilons(epsilon, deltas, shares), basic, strict=True)]

    def noise(b: RoundBudget) -> float:
        try:
            return bucket_sum_params(2, dim, b.epsilon, b.delta, min_devices, max_devices, b.law).noise_std
        except ConfigError:  # no gaussian law fits (the exact sampler's cap): this plan is out
            return float("inf")

    better = all(noise(z) <= noise(b) for z, b in zip(zcdp, basic, strict=True))
    chosen, how = (zcdp, "zcdp") if better else (basic, "basic")
    return PartitionPlan(chosen[0], chosen[1], tuple(chosen[2:]), how)


def chain_noise(plan: PartitionPlan, dim: int, n: int, k: int, min_devices: int, max_devices: int) -> float:
    """The noise a refine round of ``plan`` leaves on an average cluster's mean (n / k devices),
    sqrt(d) sd / (n / k) in the unit ball, sd its sums' per-coordinate noise (the noisiest round's);
    0 without a refine round. Public parameters only."""
    if not plan.refines:
        return 0.0
    sd = max(bucket_sum_params(2, dim, b.epsilon, b.delta, min_devices, max_devices, b.law).noise_std
             for b in plan.refines)
    return math.sqrt(dim) * sd / (max(n, 1) / max(k, 1))


def plan_refine_chain(epsilon: float, first: tuple[float, float], refine: tuple[float, float], dim: int, k: int,
                      n: int, min_devices: int, max_devices: int) -> PartitionPlan:
    """``plan_partition_stage`` with the longest refine chain (at most ``REFINE_MAX_ROUNDS``) whose
    ``chain_noise`` stays within ``CHAIN_STEP_NOISE``, one round at least (module docstring)."""
    best = plan_partition_stage(epsilon, first, refine, dim, min_devices, max_devices, refines=1)
    for rounds in range(2, REFINE_MAX_ROUNDS + 1):
        plan = plan_partition_stage(epsilon, first, refine, dim, min_devices, max_devices, refines=rounds)
        if chain_noise(plan, dim, n, k, min_devices, max_devices) > CHAIN_STEP_NOISE:
            break
        best = plan
    return best
