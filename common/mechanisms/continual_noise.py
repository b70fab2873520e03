"""The binary-tree mechanism's node noise, one family of counters at a time
(issue 18, Build 5; seed 001, Sec. B.3.2): the public half of
``server/decoders/continual/binary_tree.py``, kept here because a
continual round's config and event record (``kinds/continual.py``),
which devices and the shuffler parse, are built from these records.

``BinaryTreeNoise``: discrete Laplace per dyadic node (CKS Alg. 2, exact),
calibrated to the L1 sensitivity of the node vectors: pure eps over the
whole release sequence. ``BinaryTreeGaussian``: the sum of ``shares``
discrete Gaussians per node (CKS Alg. 3, exact, truncated far in the
tail), calibrated by zCDP to the L2 sensitivity; the truncation's total
probability p over every draw of the horizon adds (1 + e^eps) p to delta.
Pure numpy; private draws from the caller's generator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import NDArray

from shoal.common.errors import ConfigError
from shoal.common.mechanisms.distributed_noise import (
    gaussian_clip,
    gaussian_rho,
    gaussian_sigma_sq,
    rho_for_tight,
    zcdp_delta_tight,
)
from shoal.common.mechanisms.exact_sampling import (
    MAX_GAUSSIAN_SIGMA_SQ,
    discrete_gaussian,
    discrete_gaussian_tail,
    discrete_laplace,
    discrete_laplace_variance,
    laplace_scale_fraction,
)


def tree_height(horizon: int) -> int:
    """Levels of the binary tree over 1..horizon: the nodes one step's value lies in."""
    return int(horizon).bit_length()


@dataclass(frozen=True)
class BinaryTreeNoise:
    """One counter family's noise: horizon T, the L1 sensitivity of its node
    vectors (integers), epsilon; the node noise is discrete Laplace t / s."""

    horizon: int
    sensitivity: int
    epsilon: float

    def __post_init__(self) -> None:
        if self.horizon < 1:
            raise ConfigError(f"a binary tree needs a horizon >= 1, got {self.horizon}")
        if self.sensitivity < 1:
            raise ConfigError(f"a binary tree needs an L1 sensitivity >= 1, got {self.sensitivity}")
        if not (math.isfinite(self.epsilon) and self.epsilon > 0):
            raise ConfigError(f"a binary tree needs epsilon > 0, got {self.epsilon}")

    @property
    def height(self) -> int:
        return tree_height(self.horizon)

    @property
    def scale(self) -> tuple[int, int]:
        return laplace_scale_fraction(self.sensitivity, self.epsilon)

    @property
    def node_variance(self) -> float:
        return discrete_laplace_variance(*self.scale)

    @property
    def delta(self) -> float:
        return 0.0

    def prefix_variance(self, step: int) -> float:
        """Var of the release at ``step``: one node per set bit of the step."""
        return bin(int(step)).count("1") * self.node_variance

    def gate(self, step: int, counters: int, false_rate: float) -> float:
        """A value a noise-only counter passes with probability about false_rate / counters
        (the Laplace tail at one node, widened by the sqrt of the nodes summed)."""
        t, s = self.scale
        return math.sqrt(bin(int(step)).count("1")) * (t / s) * math.log(2 * counters / false_rate)

    def draw(self, size: int, rng: np.random.Generator) -> NDArray[np.int64]:
        return discrete_laplace(*self.scale, size, rng)


TRUNCATION_SHARE = 0.1  # of delta: every draw's truncation, over the whole horizon


@dataclass(frozen=True)
class BinaryTreeGaussian:
    """The (eps, delta) family: horizon T, the squared L2 sensitivity of the node
    vectors (an integer), eps, delta, and how many counters draw (for the truncation)."""

    horizon: int
    l2_sq: int
    epsilon: float
    delta_target: float
    counters: int

    def __post_init__(self) -> None:
        if self.horizon < 1 or self.l2_sq < 1 or self.counters < 1:
            raise ConfigError(f"a Gaussian binary tree needs horizon, L2^2 sensitivity and counters >= 1, got "
                              f"{self.horizon}, {self.l2_sq}, {self.counters}")
        if not (math.isfinite(self.epsilon) and self.epsilon > 0) or not 0 < self.delta_target < 1:
            raise ConfigError(f"a Gaussian binary tree needs epsilon > 0 and delta in (0, 1), got "
                              f"{self.epsilon}, {self.delta_target}")

    @property
    def height(self) -> int:
        return tree_height(self.horizon)

    @cached_property
    def rho_target(self) -> float:
        return rho_for_tight(self.epsilon, (1 - TRUNCATION_SHARE) * self.delta_target)

    @cached_property
    def shares(self) -> int:
        """Discrete Gaussians summed per node: each keeps its variance parameter under 2^20."""
        return max(1, math.ceil(self.l2_sq / (2 * self.rho_target) / (0.9 * MAX_GAUSSIAN_SIGMA_SQ)))

    @cached_property
    def sigma_sq(self) -> int:
        return gaussian_sigma_sq(math.sqrt(self.l2_sq), self.rho_target, self.counters, self.shares, self.shares)

    @cached_property
    def clip(self) -> int:
        draws = self.horizon * self.counters * self.shares
        return gaussian_clip(self.sigma_sq, TRUNCATION_SHARE * self.delta_target
                             / (2 * draws * (1 + math.exp(self.epsilon))))

    @cached_property
    def delta(self) -> float:
        """What the family spends at its epsilon: the zCDP conversion plus every draw's truncation.
        The truncated release is within total variation p (the chance any draw would have
        left the clip) of the untruncated one on each input, so delta grows by (1 + e^eps) p."""
        rho = gaussian_rho(math.sqrt(self.l2_sq), self.sigma_sq, self.counters, self.shares, self.shares)
        p = 2 * self.horizon * self.counters * self.shares * discrete_gaussian_tail(self.sigma_sq, self.clip)
        return zcdp_delta_tight(rho, self.epsilon) + (1 + math.exp(self.epsilon)) * p

    @property
    def node_variance(self) -> float:
        return float(self.shares * self.sigma_sq)  # the discrete Gaussian's variance is below S: a safe band

    def prefix_variance(self, step: int) -> float:
        return bin(int(step)).count("1") * self.node_variance

    def gate(self, step: int, counters: int, false_rate: float) -> float:
        """A value a noise-only counter passes with probability about false_rate / counters."""
        return math.sqrt(2 * self.prefix_variance(step) * math.log(counters / false_rate))

    def draw(self, size: int, rng: np.random.Generator) -> NDArray[np.int64]:
        s, clip = self.sigma_sq, self.clip
        return discrete_gaussian(s, clip, size * self.shares, rng).reshape(self.shares, size).sum(axis=0)
