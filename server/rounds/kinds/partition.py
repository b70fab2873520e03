"""The partition kind on the server (``common/kinds/partition.py``): a
shuffle-model first round whose noise is central. Devices send secure-sum
shares of their bucket's (point, 1) through the shuffler; the server
decodes the noisy bucket sums and clusters the bucket means (weighted
k-means, post-processing), and reports every device's mean (``diagnostics.mean``:
a one-bit round's is the ``tuning.center`` of the next). Refinable: a refine round takes a Lloyd step
from its centers."""

from __future__ import annotations

import secrets
from typing import Any

import numpy as np

from shoal.common.errors import ConfigError
from shoal.common.kinds.partition import (
    NAME,
    REFINE_SPLIT,
    PartitionConfig,
    derive_partition,
    mean_of,
)
from shoal.server.decoders.partition import partition_centers, partition_statement
from shoal.server.decoders.shares import ShareTotal
from shoal.server.rounds.kinds.base import RoundRequest, RoundsView
from shoal.server.rounds.kinds.shares import SharesOnly


class PartitionServer(SharesOnly):
    name = NAME
    encoders: tuple[str, ...] = ("partition",)
    refinable = True
    refine_split = REFINE_SPLIT  # a bucket may hold two tight clusters: split its center
    what = "a partition round"

    def derive(self, request: RoundRequest, round_id: str) -> PartitionConfig:
        if request.model != "shuffle" or not request.delta or not request.min_batch:
            raise ConfigError("a partition round sums shares through the shuffler: it needs model 'shuffle', "
                              "delta and min_batch (the fewest devices whose noise shares give the guarantee)")
        tuning = dict(request.tuning)
        if tuning.get("center") is not None:
            at = np.asarray(tuning.pop("center"), dtype=np.float64)
            if at.shape != (request.dim,) or not np.all(np.isfinite(at)):
                raise ConfigError(f"tuning.center must be {request.dim} finite numbers (the round's features), "
                                  f"got {at.shape[0]}")
            tuning["center"] = request.bound.to_ball(at[None])[0]  # a point outside the bound is clipped into it
        return derive_partition(request.n_expected, request.dim, request.k, request.epsilon, request.delta,
                                request.bound, request.min_batch, seed=secrets.randbits(31), round_id=round_id,
                                **tuning)

    def decode(self, config: PartitionConfig, acc: ShareTotal, rounds: RoundsView, round_id: str) -> dict[str, Any]:
        sums, devices = acc.decode()
        centers, sizes, kept = partition_centers(sums, config, np.random.default_rng(secrets.randbits(128)))
        centers = config.bound.project_ball(centers)
        mean = mean_of(sums, config)
        return {
            "round_id": round_id,
            "centers": config.bound.from_ball(centers).tolist(),
            "ball_centers": centers.tolist(),
            "sizes": [float(s) for s in sizes],
            "privacy": partition_statement(config),
            "diagnostics": {"devices": devices, "shares": acc.shares, "buckets": config.buckets,
                            "buckets_kept": kept, "noise_std": config.secure_sum.noise_std,
                            "mean": None if mean is None else config.bound.from_ball(mean[None])[0].tolist()},
        }

    def privacy(self, config: PartitionConfig) -> tuple[object, dict[str, Any]]:
        return config.event, partition_statement(config)


KIND = PartitionServer()
