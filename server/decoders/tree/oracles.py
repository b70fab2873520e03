"""Frequency and vector-sum oracles over the accumulated tables.

Every estimate is scaled by the level-sampling rate, so it estimates the
population's count (or vector sum) of the node, and comes with the
variance of its noise, which tree building and the consistency step use.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from shoal.common.kinds.tree_randomness import PublicRandomness
from shoal.common.mechanisms.hadamard import fwht, fwht_in_place
from shoal.common.mechanisms.local_hashing import LocalHashingParams, estimate_counts
from shoal.common.randomness.hashing import bucket_hash
from shoal.server.decoders.tree.accumulate import LevelAccumulator


class FrequencyOracle:
    """OLH counts of nodes at each level (seed 004, Thm. 12 role)."""

    HEAVY = 16

    def __init__(self, acc: LevelAccumulator, public: PublicRandomness) -> None:
        self.n = acc.n_devices
        self.params: LocalHashingParams | None = acc.config.hist_params
        self.table = acc.hist
        self.level_n = acc.hist_n
        self.seeds = public.hist_seeds

    def counts(self, level: int, keys: NDArray[np.uint64]) -> tuple[NDArray[np.float64], float]:
        """Population-scaled count estimates of nodes and their noise variance."""
        if level == 0:
            return np.full(keys.shape[0], float(self.n)), 0.0
        nj = int(self.level_n[level])
        if self.params is None or self.table is None or nj == 0:
            return np.zeros(keys.shape[0]), float("inf")
        g = self.params.buckets
        support = np.zeros(keys.shape[0])
        table = self.table[level]
        pool = np.arange(self.seeds.shape[0])
        for lo in range(0, keys.shape[0], 2048):
            kk = keys[lo : lo + 2048]
            b = bucket_hash(self.seeds[None, :], kk[:, None], g)
            support[lo : lo + 2048] = table[pool[None, :], b].sum(axis=1)
        scale = self.n / nj
        est = estimate_counts(support, nj, self.params)
        est = self._correct_heavy_collisions(keys, est)
        var = scale * scale * nj * self.params.per_report_variance()
        return est * scale, var

    def _correct_heavy_collisions(
        self, keys: NDArray[np.uint64], est: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        """Remove the bias that the heaviest queried nodes cause through the finite pool.

        With a pool of P seeds, nodes u and v collide in a fraction F_uv of the
        seeds, not exactly 1/g, which shifts v's estimate by
        c * n_u * (F_uv - 1/g), c = (p - q) / (p - 1/g) (Wang et al.'s GRR
        probabilities). The shift grows with n_u, so for the H heaviest
        queried nodes we compute F exactly (H x P hashes) and subtract it.
        """
        assert self.params is not None
        g = self.params.buckets
        h = min(self.HEAVY, keys.shape[0])
        if h == 0:
            return est
        heavy = np.argsort(-est, kind="stable")[:h]
        heavy = heavy[est[heavy] > 0]
        if heavy.size == 0:
            return est
        p = self.params.keep_probability
        q = (1 - p) / (g - 1)
        c = (p - q) / (p - 1.0 / g)
        hb = bucket_hash(self.seeds[None, :], keys[heavy][:, None], g)
        out = est.copy()
        # First the heavy nodes among themselves (one fixed-point step), then all.
        base = est[heavy].copy()
        for rows in (heavy, None):
            idx = np.arange(keys.shape[0]) if rows is None else rows
            for lo in range(0, idx.shape[0], 1024):
                part = idx[lo : lo + 1024]
                b = bucket_hash(self.seeds[None, :], keys[part][:, None], g)
                frac = (b[:, None, :] == hb[None, :, :]).mean(axis=2) - 1.0 / g
                frac[part[:, None] == heavy[None, :]] = 0.0
                out[part] = est[part] - c * frac @ base
            if rows is not None:
                base = np.maximum(out[heavy], 0.0)
        return out


class VectorOracle:
    """Hadamard-bound PrivUnit sums of nodes at each level (seed 004, Lemma 13 role)."""

    def __init__(self, acc: LevelAccumulator, in_place: bool = False) -> None:
        """``in_place``: transform the accumulator's vector table itself, level
        by level, and mark it consumed (a decode then holds one table, not two;
        the service's decode owns its accumulator)."""
        self.n = acc.n_devices
        self.dim = acc.config.dim
        self.log2m = acc.config.vec_columns_log2
        self.level_n = acc.vec_n
        self.level_sq = acc.vec_sq
        if acc.vec is None:
            self.transformed = None
        elif in_place:
            acc.consume()
            self.transformed = [fwht_in_place(t) for t in acc.vec]
        else:
            self.transformed = [fwht(t) for t in acc.vec]

    @property
    def available(self) -> bool:
        return self.transformed is not None

    def sums(self, level: int, keys: NDArray[np.uint64]) -> tuple[NDArray[np.float64], float]:
        """Population-scaled vector sums of nodes and the per-coordinate noise variance."""
        nj = int(self.level_n[level])
        if self.transformed is None or nj == 0:
            return np.zeros((keys.shape[0], self.dim)), float("inf")
        cols = (keys >> np.uint64(64 - self.log2m)).astype(np.int64)
        scale = self.n / nj
        var = scale * scale * float(self.level_sq[level]) / self.dim
        return self.transformed[level][cols] * scale, var
