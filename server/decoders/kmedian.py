"""Weighted k-median (D-sampling seeding, Lloyd-style alternation with
Weiszfeld's geometric median, restarts) in numpy: seed 003's black box for
the k-median objective (Alg. 2, last line: any non-private k-median
algorithm on the Laplace-noised proxy set; post-processing).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from shoal.server.decoders.kmeans import assign, sq_dist


def kmedian_cost(x: NDArray[np.float64], c: NDArray[np.float64], w: NDArray[np.float64] | None = None) -> float:
    """Sum over points of (weight x) distance to the nearest center (chunked)."""
    total = 0.0
    for lo in range(0, x.shape[0], 65536):
        d = np.sqrt(sq_dist(x[lo:lo + 65536], c).min(axis=1))
        total += float(d.sum() if w is None else (w[lo:lo + 65536] * d).sum())
    return total


def geometric_median(x: NDArray[np.float64], w: NDArray[np.float64], iterations: int = 100) -> NDArray[np.float64]:
    """Weiszfeld's iteration from the weighted mean (a point landing on a data point keeps it)."""
    y = (x * w[:, None]).sum(0) / w.sum()
    for _ in range(iterations):
        d = np.linalg.norm(x - y, axis=1)
        if np.any(d < 1e-12):
            return y
        inv = w / d
        new = (x * inv[:, None]).sum(0) / inv.sum()
        if np.linalg.norm(new - y) < 1e-10:
            return new
        y = new
    return y


def weighted_kmedian(x: NDArray[np.float64], w: NDArray[np.float64], k: int, rng: np.random.Generator,
                     restarts: int = 5, iterations: int = 30) -> NDArray[np.float64]:
    """Best of ``restarts`` runs of D-sampling (k-means++ with distances, not their
    squares) then alternating assignment and per-cluster geometric medians."""
    keep = w > 0
    x, w = x[keep], w[keep]
    if x.shape[0] == 0:
        raise ValueError("weighted_kmedian needs at least one point with positive weight")
    k = min(k, x.shape[0])
    best, best_cost = None, np.inf
    for _ in range(restarts):
        c = [x[rng.choice(x.shape[0], p=w / w.sum())]]
        d = np.sqrt(sq_dist(x, c[0][None, :])[:, 0])
        for _ in range(1, k):
            p = w * d
            c.append(x[rng.choice(x.shape[0], p=p / p.sum() if p.sum() > 0 else w / w.sum())])
            d = np.minimum(d, np.sqrt(sq_dist(x, c[-1][None, :])[:, 0]))
        centers = np.array(c)
        for _ in range(iterations):
            lab = assign(x, centers)
            new = np.array([geometric_median(x[lab == j], w[lab == j]) if np.any(lab == j) else centers[j]
                            for j in range(k)])
            if np.allclose(new, centers, atol=1e-12):
                break
            centers = new
        cost = kmedian_cost(x, centers, w)
        if cost < best_cost:
            best, best_cost = centers, cost
    assert best is not None
    return best
