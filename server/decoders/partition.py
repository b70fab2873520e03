"""Decoding a partition round (``common/kinds/partition.py``): the kept buckets'
means clustered by weighted k-means, and the round's privacy statement. Pure numpy."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from shoal.common.kinds.partition import PartitionConfig, bucket_means
from shoal.common.privacy.accounting import central_guarantee
from shoal.common.privacy.events import RoundsEvent
from shoal.common.privacy.threats import secure_sum_guarantee
from shoal.server.decoders.kmeans import reduce_weighted


def partition_statement(config: PartitionConfig, mean: PartitionConfig | None = None) -> dict[str, Any]:
    """The round's statement; with ``mean`` (the one-bit round whose released mean is
    ``config.center``) the two rounds' composition over the same devices (basic, or zCDP
    when both sums are discrete Gaussian and that is smaller: ``accounting.central_guarantee``)."""
    s = config.secure_sum
    eps, delta = central_guarantee(RoundsEvent((mean.event, config.event)) if mean else config.event)
    how = ("zCDP" if mean and mean.secure_sum.noise == s.noise == "gaussian" and eps < mean.secure_sum.epsilon + s.epsilon
           else "basic")
    where = (f"hyperplanes through the released mean of a one-bit partition round at (eps {mean.secure_sum.epsilon:.4g}, "
             f"delta {mean.secure_sum.delta:.3g}), {how} composition" if mean else "hyperplanes through the ball's centre"
             if not config.center else "hyperplanes through the round's public center")
    return {
        "model": "shuffle",
        "mechanism": f"secure summation (split-and-mix) of per-bucket counts and sums over a public LSH partition "
                     f"({config.buckets} buckets; {where}), distributed discrete {s.noise.capitalize()} noise",
        "central_epsilon": eps,
        "delta": delta,
        "device_epsilon": None,
        "device_epsilon_note": "no local guarantee: its privacy relies on the shuffler not colluding with the server",
        "guarantees": [secure_sum_guarantee(eps, delta, s.min_devices)],
    }


def partition_centers(total: NDArray[np.float64], config: PartitionConfig,
                      rng: np.random.Generator) -> tuple[NDArray[np.float64], NDArray[np.float64], int]:
    """k centers of the kept buckets' means (weighted by their noisy counts), their
    weights, and how many buckets were kept; no bucket kept: the origin."""
    means, counts = bucket_means(total, config)
    if means.shape[0] == 0:
        return np.zeros((config.k, config.dim)), np.zeros(config.k), 0
    centers, sizes = reduce_weighted(means, counts, config.k, rng)
    return centers, sizes, int(means.shape[0])
