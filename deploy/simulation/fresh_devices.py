"""In-process simulation of the local model's two-round plan: a tree round on
part of the population, then a local refine round (``common/kinds/local_refine.py``)
on the fresh rest. The same math as the services, with the PrivUnit
reports drawn from their decoded distribution (``privunit.sample_decoded``,
simulation only): a device's codebook draw is equivalent in law and 10^3
times cheaper to simulate at k (d + 1) = 808 dimensions."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shoal.common.bounds import PublicBound
from shoal.common.kinds.local_refine import block_vectors, derive_local_refine
from shoal.common.mechanisms.privunit import sample_decoded
from shoal.server.decoders.kmeans import kmeans_cost
from shoal.server.decoders.local_refine import (
    CodebookTotal,
    local_refine_answer,
    local_refine_statement,
)

CHUNK = 20_000


def local_refine_in_process(points: NDArray[np.float64], parent_ball_centers: NDArray[np.float64],
                            bound: PublicBound, epsilon: float, seed: int = 0, shrink: bool = True) -> dict[str, Any]:
    """A local refine round on ``points`` (the fresh devices): ball centers,
    noisy sizes, the config and the seconds it took."""
    cfg = derive_local_refine("parent", parent_ball_centers, bound, epsilon, seed=int(seed) % (1 << 63))
    rng = np.random.default_rng(np.random.SeedSequence([seed, 23]))
    acc = CodebookTotal(cfg)
    t = time.perf_counter()
    for lo in range(0, points.shape[0], CHUNK):
        acc.add_decoded(sample_decoded(block_vectors(points[lo : lo + CHUNK], cfg), cfg.privunit, rng))
    centers, sizes, lam = local_refine_answer(acc, np.random.default_rng([seed, 29]), shrink)
    return {"ball_centers": centers, "sizes": sizes, "shrink": lam, "config": cfg, "devices": acc.devices,
            "seconds": time.perf_counter() - t}


def split_population(n: int, share: float, seed: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Which simulated devices answer the tree round and which the refine round:
    a uniformly random ``share`` of them (rounded down) is kept fresh."""
    perm = np.random.default_rng(np.random.SeedSequence([seed, 31])).permutation(n)
    fresh = int(share * n)
    return np.sort(perm[fresh:]), np.sort(perm[:fresh])


def with_local_refine(out: dict[str, Any], points: NDArray[np.float64], fresh: NDArray[np.float64],
                      bound: PublicBound, epsilon: float, seed: int) -> dict[str, Any]:
    """``out`` (the tree round's simulate result on the other devices) updated
    with the refine round's centers, privacy and objective on all ``points``."""
    ref = local_refine_in_process(fresh, np.asarray(out["ball_centers"]), bound, epsilon, seed)
    ball = bound.to_ball(points)
    n = points.shape[0]
    centers = np.asarray(ref["ball_centers"])
    out.update(
        tree_objective=kmeans_cost(ball, np.asarray(out["ball_centers"])) / n,
        normalized_objective=kmeans_cost(ball, centers) / n,
        ball_centers=centers.tolist(),
        centers=bound.from_ball(centers).tolist(),
        refine={"epsilon": epsilon, "devices": ref["devices"], "share": ref["devices"] / n,
                "seconds": ref["seconds"], "mechanism": "local", "block_dim": ref["config"].privunit.dim},
        privacy=local_refine_statement(ref["config"], out["privacy"]),
    )
    return out
