"""Continual rounds (issue 18, Build 5; seed 001, Sec. B.3.2): public parameters and privacy.

A continual round runs in the curator model over a stream of T steps:
devices insert their point (sealed to the server) and later delete it;
after every step the server releases k ordered centers and an elbow curve
for the population of that moment (``server/decoders/continual/``). This
module is what devices, the shuffler and the server share: the round's
public parameters, the three binary-tree counter families they imply
(``continual_noise.py``), the event record and the statement built from it.

Families (``continual_families``), split by basic composition:

- values (VALUE_SHARE of eps, and of delta): seed 001's generalized sums
  over the greedy's nets, one counter per cell of every level (a dense
  domain: noise on empty balls too, which is why the round is for low
  dimension, ``MAX_COUNTERS``). One item moves ``levels`` counters by at
  most Q at its insertion and at its deletion, each reaching ``height``
  released nodes: L1 sensitivity 2 height L Q (squared L2 2 height L Q^2).
- counts (COUNT_SHARE): points per finest cell (the elbow's coreset): 2 height.
- mean (the rest): coordinate sums in fixed point 2^-MEAN_BITS and the
  count, one (d + 1)-vector: L1 2 height (ceil(sqrt(d) 2^b) + d + 2^b).

Neighbouring streams differ by one item's insertion and its later
deletion: one device's point over the round (event-level DP over the
horizon); a device that inserts m items over the round is covered by group
privacy at m eps (``ContinualConfig.device_guarantee``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, TypeAlias

from shoal.common.bounds import PublicBound, published, unpublished
from shoal.common.errors import ConfigError
from shoal.common.kinds.base import ConfigKind, Mixing
from shoal.common.kinds.central import GREEDY_SIDE, OBJECTIVES, greedy_radii
from shoal.common.mechanisms.continual_noise import BinaryTreeGaussian, BinaryTreeNoise, tree_height
from shoal.common.privacy.threats import continual_guarantee as continual_guarantee_words

NAME = "continual"
Q = 16  # a point's weight in a ball, in units of 1 / Q (as the curator greedy's GREEDY_Q)
MEAN_BITS = 8  # the mean's coordinate sums in units of 2^-MEAN_BITS
VALUE_SHARE, COUNT_SHARE = 0.6, 0.2  # of epsilon (and delta); the mean takes the rest
MAX_COUNTERS = 1 << 22  # cells over all levels (dense domain: every cell gets noise at every node)
MAX_DIM = 8
MAX_HORIZON = 1 << 20  # steps; the truncation of Gaussian nodes is budgeted over all of them
DEFAULT_LEVELS = 6
Family: TypeAlias = BinaryTreeNoise | BinaryTreeGaussian


@dataclass(frozen=True)
class ContinualParams:
    """A continual stream: dimension, k, event-level epsilon, horizon T, net levels, objective, public seed."""

    dim: int
    k: int
    epsilon: float
    horizon: int
    levels: int = DEFAULT_LEVELS
    objective: str = "kmeans"
    seed: int = 0
    delta: float = 0.0  # 0: pure eps (Laplace nodes); > 0: (eps, delta) with discrete Gaussian nodes

    def __post_init__(self) -> None:
        if not 1 <= self.dim <= MAX_DIM:
            raise ConfigError(f"a continual round keeps a dense net per level: dim must be in [1, {MAX_DIM}], "
                              f"got {self.dim}")
        if self.k < 1:
            raise ConfigError(f"k must be >= 1, got {self.k}")
        if not (math.isfinite(self.epsilon) and self.epsilon > 0):
            raise ConfigError(f"epsilon must be > 0, got {self.epsilon}")
        if not 1 <= self.horizon <= MAX_HORIZON:
            raise ConfigError(f"the horizon must be in [1, {MAX_HORIZON}] steps, got {self.horizon}")
        if not 1 <= self.levels <= 12:
            raise ConfigError(f"levels must be in [1, 12], got {self.levels}")
        if not 0 <= self.delta < 1:
            raise ConfigError(f"delta must be in [0, 1), got {self.delta}")
        if self.objective not in OBJECTIVES:
            raise ConfigError(f"objective must be one of {sorted(OBJECTIVES)}, got {self.objective!r}")
        if self.counters() > MAX_COUNTERS:
            raise ConfigError(f"{self.levels} levels in dimension {self.dim} need {self.counters()} counters, more "
                              f"than {MAX_COUNTERS}: use fewer levels")

    def cells(self) -> tuple[int, ...]:
        """Cells per level, coarse to fine: the level's grid of side GREEDY_SIDE r / sqrt(d)
        over [-1, 1]^d has floor(2 / side) + 2 cells per axis (``central/grids.Grid``)."""
        sides = (GREEDY_SIDE * r / math.sqrt(self.dim) for r in greedy_radii(self.levels))
        return tuple((math.floor(2.0 / side) + 2) ** self.dim for side in sides)

    def counters(self) -> int:
        return sum(self.cells())


def continual_families(params: ContinualParams) -> tuple[Family, Family, Family]:
    """The (values, counts, mean) counter families' noise (module docstring)."""
    h, unit, d = tree_height(params.horizon), 1 << MEAN_BITS, params.dim
    shares = (VALUE_SHARE, COUNT_SHARE, 1 - VALUE_SHARE - COUNT_SHARE)
    a: Family
    b: Family
    c: Family
    if params.delta == 0:  # pure eps: L1 of one item's two events over its ``h`` nodes each
        l1 = (params.levels * Q, 1, math.ceil(math.sqrt(d) * unit) + d + unit)
        a, b, c = (BinaryTreeNoise(params.horizon, 2 * h * r, share * params.epsilon)
                   for r, share in zip(l1, shares, strict=True))
        return a, b, c
    # (eps, delta): squared L2 of one event's leaf (a node holding both events moves by less)
    l2_sq = (params.levels * Q**2, 1, math.ceil((unit + math.sqrt(d)) ** 2) + unit**2)
    widths = (params.counters(), params.cells()[-1], d + 1)
    a, b, c = (BinaryTreeGaussian(params.horizon, 2 * h * r, share * params.epsilon, share * params.delta, w)
               for r, share, w in zip(l2_sq, shares, widths, strict=True))
    return a, b, c


@dataclass(frozen=True)
class ContinualEvent:
    """The round's randomiser: three binary-tree counter families, by basic composition."""

    epsilon: float
    horizon: int
    families: tuple[Family, ...]


def continual_guarantee(event: object) -> tuple[float, float]:
    """The event-level (epsilon, delta) of the whole release sequence, by basic
    composition of the families; unknown records raise."""
    if not isinstance(event, ContinualEvent):
        raise ConfigError(f"no continual privacy rule for {event!r}")
    return math.fsum(f.epsilon for f in event.families), math.fsum(f.delta for f in event.families)


def continual_statement(event: object) -> dict[str, Any]:
    """What a continual round promises, from its event record (unknown records raise)."""
    eps, delta = continual_guarantee(event)
    assert isinstance(event, ContinualEvent)
    names = ("values", "counts", "mean")
    return {
        "model": "central", "observation": "continual",
        "epsilon": eps, "central_epsilon": eps, "delta": delta, "horizon": event.horizon,
        "device_epsilon": None,
        "device_epsilon_note": "central model: the curator sees raw points; no local guarantee",
        "guarantees": [continual_guarantee_words(eps, delta, event.horizon)],
        "level": "event-level: streams that differ by one item's insertion and its later deletion "
                 "(one device's point over the round); a device that inserts m points is covered by group "
                 "privacy at m eps",
        "covers": "everyone who sees the releases (all T steps together); not the curator, which sees raw points",
        "parts": {name: _part(f) for name, f in zip(names, event.families, strict=True)},
        "composition": "basic, over the values, counts and mean families",
    }


def _part(f: Family) -> dict[str, Any]:
    if isinstance(f, BinaryTreeNoise):
        return {"mechanism": "binary-tree mechanism, discrete Laplace per dyadic node", "epsilon": f.epsilon,
                "delta": 0.0, "l1_sensitivity": f.sensitivity, "tree_height": f.height}
    return {"mechanism": f"binary-tree mechanism, {f.shares} discrete Gaussian(s) per dyadic node (zCDP)",
            "epsilon": f.epsilon, "delta": f.delta, "l2_sensitivity": math.sqrt(f.l2_sq), "tree_height": f.height}


@dataclass(frozen=True)
class ContinualConfig:
    """A continual round: devices seal insertions (their point, clipped into the
    bound and mapped into the unit ball, under an item token of their own) and
    deletions (the token) to the server, the curator, which closes steps."""

    round_id: str
    bound: PublicBound
    params: ContinualParams

    def __post_init__(self) -> None:
        self.bound.check_dim(self.params.dim)

    @property
    def k(self) -> int:
        return self.params.k

    @property
    def dim(self) -> int:
        return self.params.dim

    @property
    def event(self) -> ContinualEvent:
        return ContinualEvent(self.params.epsilon, self.params.horizon, continual_families(self.params))

    def decode_bytes(self) -> int:
        """The curator's state: two (height, counters) int64 tables, the cells' centers and one step's leaves."""
        counters, h = self.params.counters(), tree_height(self.params.horizon)
        return 8 * counters * (2 * h + self.params.dim + 4)

    def device_guarantee(self) -> tuple[float, float]:
        """(eps, delta) for one device's item (its insertion and deletion)."""
        return continual_guarantee(self.event)


def derive_continual_round(dim: int, k: int, epsilon: float, delta: float, bound: PublicBound, horizon: int,
                           levels: int = DEFAULT_LEVELS, objective: str = "kmeans", seed: int = 0,
                           round_id: str = NAME) -> ContinualConfig:
    """A continual round's config from an operator's request (all public numbers)."""
    return ContinualConfig(round_id, bound, ContinualParams(dim, k, epsilon, horizon, levels, objective, seed, delta))


def continual_to_dict(config: ContinualConfig) -> dict[str, Any]:
    out = published(config, NAME)
    out["params"] = asdict(config.params)
    out["k"], out["dim"] = config.k, config.dim  # as every kind's config says them (devices check points' dim)
    return out


def continual_from_dict(data: dict[str, Any]) -> ContinualConfig:
    """Inverse of ``continual_to_dict``; validates everything again (devices call it)."""
    try:
        fields, bound = unpublished(data)
        k, dim = fields.pop("k"), fields.pop("dim")
        config = ContinualConfig(bound=bound, params=ContinualParams(**dict(fields.pop("params"))), **fields)
    except (KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"not a continual config: {exc}") from exc
    if (k, dim) != (config.k, config.dim):
        raise ConfigError(f"continual config says k={k}, dim={dim} but its params k={config.k}, dim={config.dim}")
    return config


# The shared half of the continual kind (``common/kinds/__init__.py``). The shuffler only
# carries the sealed events (it cannot read them); no mixing rule protects them.
# A device submits twice: its insertion, and later its withdrawal.
KIND = ConfigKind(NAME, parse=lambda data: continual_from_dict(dict(data)), dump=continual_to_dict,
                  event=lambda config: config.event, mixing=lambda config: Mixing(0, True, 1, 2))
