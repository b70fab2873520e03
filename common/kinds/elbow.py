"""The ``elbow`` round: every k' cost of an ordered answer, summed securely.

Seed 001 (La Tour, Henzinger, Saulpic, Sec. 2 and Lemma 2.5) orders its
centers so that the first k' answer k' for every k' <= k; the operator
who does not know k reads the cost of each k' (the elbow curve). A tree
round decoded with ``tree.centers = "greedy"`` gets an elbow from its
coreset for free, but that curve is the coreset's (each node at its
lattice point), not the data's cost: measured at n = 1e6 it is 0.5-0.8 x
the data's cost below the true k and 1.1-5 x above it (README, seed 001).

This round measures the data's cost itself, with the curator elbow's
mechanism (``server/decoders/central/greedy.py``) moved to the shuffle
model. After a round with ordered centers is decoded, the server
publishes them; each device computes its costs c_1 >= ... >= c_k to the
first k' centers (in the unit ball, z = 2 for k-means, 1 for k-median) and
contributes the drops (c_1 - c_2, ..., c_{k-1} - c_k, c_k)
(``common/cost_drops.py``): k non-negative numbers summing to c_1 <= D^z
(D = 2), so L1 <= D^z, every entry <= D^z, L2 <= L1 = D^z, and any two
devices' vectors have a non-negative inner product. They go through
``secure_sum`` (split-and-mix with distributed discrete Laplace noise: the
L2 bound equals the L1 bound, since one coordinate may hold all of c_1, so
the Gaussian law never has less noise; ``SecureSumParams.derive(noise=
"auto")`` picked Laplace at every eps in 0.05-8 and k in 2-64, at
aligned L2 sensitivity). The server adds the released drops
from k' on to get cost(k') (post-processing). The decoder
(``server/decoders/elbow.py``) gives the curve, a band that covers every
k' at once with probability 0.95, and the suggested k'.

Privacy: (eps, delta)-DP on its own (``SecureSumEvent``, shuffle model, a
shuffler that does not collude with the server); with its parent and the
parent's other child rounds it composes sequentially (``RoundsEvent``).
Pure math, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shoal.common.bounds import PublicBound
from shoal.common.clipping import clip_to_ball
from shoal.common.cost_drops import DIAMETER, Z_OF, point_drops
from shoal.common.errors import ConfigError
from shoal.common.kinds.base import SharesRound, shares_kind
from shoal.common.kinds.refine import (
    centers_config_from_dict,
    centers_config_to_dict,
    check_centers,
)
from shoal.common.mechanisms.secure_sum import SecureSumParams
from shoal.common.privacy.accounting import split_spend

NAME = "elbow"
MARGIN = 1 + 1e-9  # on the L1 bound, for float rounding of drops that telescope to c_1 <= D^z
# The share of a shuffle-model budget (central eps and delta) that ``shoal bench --greedy --model shuffle``
# and ``shoal simulate --elbow auto`` give the elbow round; the tree round gets the rest. Measured on the
# paper generator (n = 1e6, k = 16, central eps 1, seeds 0-2): the suggested k' is 8 on every seed at
# shares 0.1 and 0.2 (the drop into k' = 8 is ~1e3 noise deviations), so the tree keeps 90%.
ELBOW_SHARE = 0.1
ELBOW_DELTA_SHARE = 0.01


def elbow_budget(epsilon: float, delta: float) -> tuple[tuple[float, float], tuple[float, float]]:
    """((tree eps, tree delta), (elbow eps, elbow delta)) of a total (epsilon,
    delta): ``ELBOW_SHARE`` and ``ELBOW_DELTA_SHARE`` to the elbow round, the
    rest to the tree round, rounded toward less spend (``accounting.split_spend``:
    the two rounds' composed (eps, delta) is <= the total exactly, where
    epsilon (1 - share) + epsilon share may round above epsilon)."""
    (tree_eps, elbow_eps), (tree_delta, elbow_delta) = split_spend(epsilon, ELBOW_SHARE), split_spend(delta, ELBOW_DELTA_SHARE)
    return (tree_eps, tree_delta), (elbow_eps, elbow_delta)


@dataclass(frozen=True)
class ElbowConfig(SharesRound):
    """Public parameters of an elbow round: the parent's ordered centers, the
    objective whose costs are summed, and the secure sum."""

    round_id: str
    parent_id: str
    k: int
    dim: int
    bound: PublicBound
    centers: tuple[tuple[float, ...], ...]
    objective: str
    secure_sum: SecureSumParams

    def __post_init__(self) -> None:
        check_centers("elbow", self.k, self.dim, 0, self.centers)
        if self.objective not in Z_OF:
            raise ConfigError(f"elbow objective must be one of {sorted(Z_OF)}, got {self.objective!r}")
        s = self.secure_sum
        if s.length != self.k:
            raise ConfigError(f"elbow secure sum length {s.length} != k = {self.k} (one drop per k')")
        check_drop_sum(s, self.k, self.z)
        self.bound.check_dim(self.dim)

    @property
    def z(self) -> int:
        return Z_OF[self.objective]

    @property
    def center_array(self) -> NDArray[np.float64]:
        return np.asarray(self.centers, dtype=np.float64)




def drop_sum_params(k: int, z: int, epsilon: float, delta: float, min_devices: int,
                    max_devices: int | None, scale: int = 1 << 16) -> SecureSumParams:
    """The secure sum of one device's k drops (module docstring): L1 and every
    entry <= D^z, k non-zeros, discrete Laplace noise. ``scale``: the fixed
    point (tests use a coarse one so the rounding is visible)."""
    top = DIAMETER**z
    return SecureSumParams.derive(k, l1_norm=top * MARGIN, max_abs=top, max_nonzero=k, epsilon=epsilon,
                                  delta=delta, min_devices=min_devices, max_devices=max_devices, scale=scale)


def check_drop_sum(s: SecureSumParams, k: int, z: int) -> None:
    """Whether a secure sum's public bounds cover every device's drops (``drop_sum_params``)."""
    top = DIAMETER**z
    if s.noise != "laplace":
        raise ConfigError(f"an elbow round sums with the laplace law (module docstring), got {s.noise!r}")
    if s.l1_norm < top or s.max_abs < top or s.max_nonzero < k:
        raise ConfigError(f"secure sum bounds (l1 {s.l1_norm}, max_abs {s.max_abs}, non-zeros {s.max_nonzero}) "
                          f"do not cover a device's cost drops (l1 and entries D^z = {top:g}, {k} non-zeros)")


def derive_elbow(parent_id: str, ball_centers: NDArray[np.float64], bound: PublicBound, objective: str,
                 epsilon: float, delta: float, min_devices: int, max_devices: int | None = None,
                 round_id: str = "elbow") -> ElbowConfig:
    """An elbow round on the parent's ordered centers (k, d) in the unit ball."""
    if objective not in Z_OF:
        raise ConfigError(f"elbow objective must be one of {sorted(Z_OF)}, got {objective!r}")
    c = clip_to_ball(np.asarray(ball_centers, dtype=np.float64))
    if c.ndim != 2 or c.shape[0] < 1:
        raise ConfigError(f"an elbow round needs the parent's centers as a (k, d) array, got shape {c.shape}")
    k, d = c.shape
    params = drop_sum_params(k, Z_OF[objective], epsilon, delta, min_devices, max_devices)
    return ElbowConfig(round_id, parent_id, k, d, bound, tuple(map(tuple, c.tolist())), objective, params)


def contributions(points: NDArray[np.float64], config: ElbowConfig) -> NDArray[np.float64]:
    """What each device feeds into the secure sum: (n, k), its cost drops to the
    parent's ordered centers (``cost_drops.point_drops``) in the unit ball."""
    x = config.bound.to_ball(points)
    if x.shape[1] != config.dim:
        raise ConfigError(f"points have {x.shape[1]} features, the round has {config.dim}")
    return point_drops(x, config.center_array, config.z)


def elbow_to_dict(config: ElbowConfig) -> dict[str, Any]:
    """The published config of an elbow round (``kind`` tells it from the others)."""
    return centers_config_to_dict(config, NAME)


def elbow_from_dict(data: dict[str, Any]) -> ElbowConfig:
    """Inverse of ``elbow_to_dict``; validates everything again (devices call it)."""
    config: ElbowConfig = centers_config_from_dict(data, ElbowConfig, "secure_sum", SecureSumParams, "elbow")
    return config


# The shared half of the elbow kind (``common/kinds/__init__.py``).
KIND = shares_kind(NAME, elbow_from_dict, elbow_to_dict)
