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
counter, as the seed says. Pure numpy, private draws from ``rng``. The
node noise families (``BinaryTreeNoise``, ``BinaryTreeGaussian``) live in
``common/mechanisms/continual_noise.py``: a continual round's published config and
event record are built from them.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from shoal.common.errors import ConfigError
from shoal.common.mechanisms.continual_noise import BinaryTreeGaussian, BinaryTreeNoise


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
