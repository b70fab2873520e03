"""The budget of a shuffle-model partition stage: a one-bit mean round, the partition
round through that mean, and (optionally) a refine round, all secure sums over the
same devices (``kinds/partition.py``, ``kinds/refine.py``).

Two plans for one total (eps, delta), the better one kept:

- basic: the rounds' (eps, delta) add up (``accounting.split_spend``); each sum takes
  the noise law with the smaller noise at its own (eps, delta);
- zCDP: every sum uses the discrete Gaussian law, round i gets share_i of the
  total's rho (``privacy.zcdp.gaussian_epsilons``) and its failure probability is
  charged at the total eps, so the rounds compose in zCDP within (eps, delta)
  (``accounting.central_guarantee`` states a ``RoundsEvent`` of gaussian sums so).
  The shares are the basic plan's eps shares, read as shares of rho: at eps 1,
  delta 1e-6 a half of rho is a per-round eps of 0.67-0.83 where basic composition
  gives 0.5, about 1.4x less noise.

The zCDP plan is kept when no round's noise sd is larger than under the basic plan
(a probe of two buckets; the sd hardly depends on the length). Measured (issue 41,
``shoal bench --model shuffle``, seeds 0-2, delta 1e-6, shuffle + refine): letter
0.0533 -> 0.0480 at eps 1 and 0.0420 -> 0.0405 at eps 4 (Google's central library
0.0498 / 0.0435); the overlapping-cluster generator 0.0796 -> 0.0785 at eps 1
(``docs/benchmarks/shuffle.md``). Pure math, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from shoal.common.errors import ConfigError
from shoal.common.kinds.partition import mean_budget
from shoal.common.kinds.refine import bucket_sum_params
from shoal.common.mechanisms.secure_sum import DEFAULT_LAW, SumLaw
from shoal.common.privacy.zcdp import gaussian_epsilons


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
    """The rounds of a partition stage and how they compose ("basic" or "zcdp")."""

    mean: RoundBudget
    partition: RoundBudget
    refine: RoundBudget | None
    composition: str

    def __post_init__(self) -> None:
        if self.composition not in ("basic", "zcdp"):
            raise ConfigError(f"a partition plan composes by 'basic' or 'zcdp', got {self.composition!r}")

    @property
    def rounds(self) -> tuple[RoundBudget, ...]:
        return (self.mean, self.partition) + ((self.refine,) if self.refine else ())


def plan_partition_stage(epsilon: float, first: tuple[float, float], refine: tuple[float, float] | None,
                         dim: int, min_devices: int, max_devices: int) -> PartitionPlan:
    """The plan for a total ``epsilon`` split by basic composition into the first stage's
    (eps, delta) and the refine round's (None: no refine round): the mean round takes
    ``partition.MEAN_SHARE`` of the first stage (``mean_budget``). Returns the zCDP plan
    when it gives no round more noise than the basic one (module docstring)."""
    (mean_eps, mean_delta), (part_eps, part_delta) = mean_budget(*first)
    basic = [RoundBudget(mean_eps, mean_delta), RoundBudget(part_eps, part_delta)]
    if refine is not None:
        basic.append(RoundBudget(*refine))
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
    return PartitionPlan(chosen[0], chosen[1], chosen[2] if refine is not None else None, how)
