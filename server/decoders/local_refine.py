"""Decoding a local refine round (``common/kinds/local_refine.py``): the sum
of the reports' unbiased PrivUnit decodes, then S_j / N_j per block, and for
a split round the candidates' means reduced to the parent's k centers by
weighted k-means. Pure numpy, post-processing of eps-LDP reports."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from shoal.common.kinds.local_refine import (
    LocalRefineConfig,
    decoded_sum,
    refined_centers,
)
from shoal.common.privacy.threats import local_guarantee
from shoal.server.decoders.kmeans import reduce_weighted


class CodebookTotal:
    """The running sum of decoded reports (k (d + 1),) and how many were added:
    linear and mergeable (a report's decode depends on the report alone)."""

    def __init__(self, config: LocalRefineConfig) -> None:
        self.config = config
        self.total = np.zeros(config.privunit.dim)
        self.devices = 0

    def add(self, rows: NDArray[np.uint64]) -> None:
        rows = np.asarray(rows, dtype=np.uint64).reshape(-1, 2)
        self.total += decoded_sum(rows[:, 0], rows[:, 1].astype(np.int64), self.config)
        self.devices += rows.shape[0]

    def add_decoded(self, vectors: NDArray[np.float64]) -> None:
        """Reports already decoded (n, k (d + 1)): the simulator's path
        (``deploy/simulation/fresh_devices.py``, drawn from their distribution)."""
        self.total += vectors.sum(axis=0)
        self.devices += vectors.shape[0]

    def merge(self, other: CodebookTotal) -> None:
        self.total += other.total
        self.devices += other.devices


def local_refine_answer(acc: CodebookTotal, rng: np.random.Generator,
                        shrink: bool = True) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Ball centers, noisy sizes and shrink factors (``refined_centers``), the
    candidates reduced to ``keep`` centers when the round split its parent's."""
    config = acc.config
    means, sizes, lam = refined_centers(acc.total, acc.devices, config, shrink)
    if not config.keep or config.keep >= config.k:
        return means, sizes, lam
    centers, weights = reduce_weighted(means, sizes, config.keep, rng)
    return config.bound.project_ball(centers), weights, lam


def local_refine_statement(config: LocalRefineConfig, parent_privacy: dict[str, Any]) -> dict[str, Any]:
    """The privacy of a local refine round with its parent: every device sends
    one eps-LDP report to the family (fresh devices, enforced by the device's
    ledger), so the family's guarantee is the larger of the two epsilons."""
    parent_eps = parent_privacy.get("device_epsilon")
    eps = config.epsilon if parent_eps is None else max(float(parent_eps), config.epsilon)
    return {
        "model": "local",
        "mechanism": f"codebook PrivUnit (N={config.privunit.candidates}, K={config.privunit.cap}) of each device's "
                     f"(a x, b) block vector in k (d + 1) = {config.privunit.dim} dimensions",
        "device_epsilon": eps,
        "central_epsilon": eps,
        "delta": float(parent_privacy.get("delta") or 0.0),
        "round_epsilon": config.epsilon,
        "composition": "parallel: a device that answered the parent round or another round opened on it refuses "
                       "this one (checked in its ledger), so each device sends one report to the family; a server "
                       "that names a false parent gets at most each device's ledger cap",
        "guarantees": [local_guarantee(config.epsilon)],
        "rounds": [parent_privacy, {"round": config.round_id, "device_epsilon": config.epsilon}],
    }
