"""zCDP conversions and composition (the accounting of the discrete Gaussian's sums).

A mechanism that is rho-zCDP is (eps, delta)-DP for every eps > rho with
delta from Bun-Steinke (TCC'16, Prop. 1.3; ``zcdp_delta``) or, tighter,
Canonne-Kamath-Steinke (NeurIPS'20, Cor. 13; ``zcdp_delta_tight``); rho adds
up under composition, adaptive included (Bun-Steinke Lemma 2.3). So k
Gaussian releases at rho / k each are as private as one at rho, where
(eps, delta) composition would give each eps / k: at eps = 1, delta = 1e-6,
two releases get 1.96 x the rho each (``composed_epsilon`` is how a
``RoundsEvent`` of discrete-Gaussian secure sums is stated). Pure math.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from shoal.common.errors import ConfigError


def rho_for(epsilon: float, delta: float) -> float:
    """The largest rho whose rho-zCDP gives (epsilon, delta)-DP by Bun-Steinke:
    eps = rho + 2 sqrt(rho ln(1/delta)), so sqrt(rho) = sqrt(L + eps) - sqrt(L)."""
    if not (math.isfinite(epsilon) and epsilon > 0) or not 0 < delta < 1:
        raise ConfigError(f"zCDP conversion needs eps > 0 and delta in (0, 1), got {epsilon}, {delta}")
    big_l = -math.log(delta)
    return (epsilon / (math.sqrt(big_l + epsilon) + math.sqrt(big_l))) ** 2


def zcdp_delta(rho: float, epsilon: float) -> float:
    """delta of rho-zCDP at epsilon (Bun-Steinke Prop. 1.3); 1 if eps <= rho."""
    if rho <= 0:
        return 0.0
    if epsilon <= rho:
        return 1.0
    return math.exp(-((epsilon - rho) ** 2) / (4 * rho))


def zcdp_delta_tight(rho: float, epsilon: float) -> float:
    """delta of rho-zCDP at epsilon by Canonne, Kamath, Steinke (NeurIPS'20,
    Cor. 13): inf over alpha > 1 of exp((alpha - 1)(alpha rho - eps)) / (alpha - 1)
    (1 - 1/alpha)^alpha. Every alpha gives a valid bound, so the infimum is
    taken over a log-spaced grid of alpha in (1, 10^6] (a grid point can only
    overstate delta); never above Bun-Steinke's ``zcdp_delta``."""
    if rho <= 0:
        return 0.0
    alpha = 1.0 + np.geomspace(1e-4, 1e6, 4000)
    log_d = (alpha - 1) * (alpha * rho - epsilon) - np.log(alpha - 1) + alpha * np.log1p(-1 / alpha)
    return float(min(zcdp_delta(rho, epsilon), math.exp(min(0.0, float(log_d.min())))))


@lru_cache(maxsize=4096)  # pure; every derive of a gaussian law asks it again (issue 41's property test)
def rho_for_tight(epsilon: float, delta: float) -> float:
    """The largest rho (to 1e-9 relative) with ``zcdp_delta_tight(rho, eps) <= delta``;
    at least ``rho_for``'s (about 1.4x it at eps ~ 1, delta = 1e-6)."""
    lo = rho_for(epsilon, delta)
    hi = 4 * lo
    while zcdp_delta_tight(hi, epsilon) <= delta:
        lo, hi = hi, 2 * hi
    while hi - lo > 1e-9 * lo:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if zcdp_delta_tight(mid, epsilon) <= delta else (lo, mid)
    return lo


@lru_cache(maxsize=4096)
def composed_epsilon(rho: float, failure: float, delta: float, most: float) -> float:
    """The smallest eps in (0, ``most``] (bisection, the answer checked; when ``most``
    itself fails, the start of the range that meets delta on a grid of 512 log-spaced
    points first) with zcdp_delta_tight(rho, eps) + (1 + e^eps) failure
    <= delta: the (eps, delta) of releases whose ideal mechanisms add up to rho-zCDP and
    whose real protocols differ from them with probability at most ``failure`` in all (a
    view within total variation ``failure`` of an (eps, delta_g)-DP one is (eps, delta_g +
    (1 + e^eps) failure)-DP, as ``secure_sum``'s module docstring derives for one
    release). The first term falls with eps and the second grows, so the eps that meet
    delta form a range that may end below ``most``: the grid finds its start.
    ``math.inf`` when no eps up to ``most`` meets delta (the caller keeps basic composition)."""
    def meets(eps: float) -> bool:
        charged = 0.0 if not failure else math.inf if eps > 700 else (1 + math.exp(eps)) * failure
        return zcdp_delta_tight(rho, eps) + charged <= delta

    if not (rho > 0 and 0 < delta < 1 and failure >= 0 and most > 0):
        return math.inf
    if meets(most):  # the usual case (failures far below delta): bisect the whole range
        lo, hi = 0.0, most
    else:  # the failure term rules out ``most``: find where the range that meets delta starts
        grid = [float(e) for e in np.geomspace(most * 1e-4, most, 512)]
        first = next((i for i, e in enumerate(grid) if meets(e)), None)
        if first is None:
            return math.inf
        lo, hi = (grid[first - 1] if first else 0.0), grid[first]
    while hi - lo > 1e-10 * hi:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if meets(mid) else (mid, hi)
    return hi


PLAN_MARGIN = 1e-6  # a zCDP plan hands out this much less than the total's rho (the rounds' own searches overshoot by ~1e-9)


def gaussian_epsilons(epsilon: float, deltas: tuple[float, ...], shares: tuple[float, ...]) -> tuple[float, ...]:
    """The eps_i of gaussian releases planned to compose in zCDP within (epsilon, sum of
    ``deltas``): release i gets ``shares[i]`` of rho = rho_for_tight(epsilon, D / 2), D the
    deltas' sum (less ``PLAN_MARGIN``), and eps_i is where that rho meets delta_i / 2, the
    point from which a gaussian secure sum derives its rho (``rho_for_tight(eps_i, delta_i
    / 2)``). The other half of D is the releases' failures', so each must be charged at
    ``epsilon`` (``SumLaw.failure_epsilon``): then the composition meets (epsilon, D)."""
    if len(deltas) != len(shares) or not shares or any(s <= 0 for s in shares) or math.fsum(shares) > 1:
        raise ConfigError(f"a zCDP plan needs one positive share per release, summing to <= 1; got {shares}")
    total = rho_for_tight(epsilon, math.fsum(deltas) / 2) * (1 - PLAN_MARGIN)
    out = tuple(composed_epsilon(s * total, 0.0, d / 2, min(64 * epsilon, 700.0)) for s, d in zip(shares, deltas, strict=True))
    if not all(math.isfinite(e) for e in out):
        raise ConfigError(f"no eps gives rho shares {shares} of eps {epsilon} at deltas {deltas}")
    return out
