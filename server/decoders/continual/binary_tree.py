"""The binary-tree mechanism for continual counting, many counters at once
(issue 18, Build 5; seed 001, Sec. B.3.2, after Dwork-Naor-Pitassi-Rothblum
2010 and Chan-Shi-Song 2011).

A stream of integer vectors x_1, x_2, ..., x_T (one entry per counter: a
ball of the greedy's nets, a grid cell) is released as its prefix sums
S_t = x_1 + ... + x_t at every step t. Each dyadic interval of steps
(a node of the binary tree over 1..T) gets one noisy sum, drawn once,
when its last step arrives; S_t is the sum of the noisy nodes of t's
binary decomposition (at most ``height`` of them). A step's value lies
in exactly one completed node per tree level, so it reaches at most
``height = floor(log2 T) + 1`` released nodes: a change of one step's
value by at most w per counter changes the released nodes by at most
``height * w`` in L1 (per counter). The caller states the L1 sensitivity
of everything it feeds (``sensitivity``); the noise per node is discrete
Laplace at scale sensitivity / epsilon (CKS Alg. 2, exact), so the whole
sequence of releases is pure eps-DP for streams whose node vectors differ
by at most that much (event-level DP over the horizon).

``BinaryTreeGaussian`` is the (eps, delta) variant: every node gets the sum
of ``shares`` discrete Gaussians (CKS Alg. 3, exact, each truncated far in
its tail), calibrated to the node vectors' L2 sensitivity by zCDP
(``distributed_noise.gaussian_rho``; Canonne-Kamath-Steinke's conversion);
the truncation's total probability p over every draw of the horizon
adds (1 + e^eps) p to delta (as ``noisy_average.spent_delta``). Its noise grows with sqrt(height) where Laplace's grows
with height.

Memory: two (height, counters) integer tables, whatever T is (the exact
partial sums of the open nodes and their noisy copies): O(log T) per
counter, as the seed says. Pure numpy, private draws from ``rng``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import NDArray

from shoal.common.distributed_noise import (
    gaussian_clip,
    gaussian_rho,
    gaussian_sigma_sq,
    rho_for_tight,
    zcdp_delta_tight,
)
from shoal.common.errors import ConfigError
from shoal.common.exact_sampling import (
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


class BinaryTree:
    """``counters`` continual counters sharing one noise rule, fed one step at a time."""

    def __init__(self, counters: int, noise: BinaryTreeNoise | BinaryTreeGaussian, rng: np.random.Generator) -> None:
        if counters < 1:
            raise ConfigError(f"a binary tree needs at least one counter, got {counters}")
        self.noise, self.rng, self.step_count = noise, rng, 0
        self.exact = np.zeros((noise.height, counters), dtype=np.int64)  # open nodes' exact sums
        self.noisy = np.zeros((noise.height, counters), dtype=np.int64)  # completed nodes' noisy sums

    def step(self, values: NDArray[np.int64]) -> NDArray[np.int64]:
        """Feed step t's values (one per counter); return the noisy prefix sums S_t."""
        if self.step_count >= self.noise.horizon:
            raise ConfigError(f"the stream's horizon is {self.noise.horizon} steps; step {self.step_count + 1} "
                              "is beyond it (a longer stream needs a new round with its own budget)")
        values = np.asarray(values, dtype=np.int64)
        if values.shape != self.exact.shape[1:]:
            raise ConfigError(f"a step feeds {self.exact.shape[1]} counters, got shape {values.shape}")
        self.step_count += 1
        t = self.step_count
        low = (t & -t).bit_length() - 1  # the node completed at t: its level is t's lowest set bit
        self.exact[low] = self.exact[:low].sum(axis=0) + values
        self.exact[:low] = 0
        self.noisy[low] = self.exact[low] + self.noise.draw(values.size, self.rng)
        self.noisy[:low] = 0
        bits = [j for j in range(self.noise.height) if t >> j & 1]
        return self.noisy[bits].sum(axis=0)
