"""Weighted k-means (k-means++ seeding, Lloyd refinement, restarts) in numpy.

Clustering the private coreset is post-processing (seed 004, Alg. 4 line 5:
any non-private approximation algorithm A); Arthur and Vassilvitskii's
k-means++ gives the O(log k) guarantee and Lloyd improves it.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray


def sq_dist(x: NDArray[np.float64], c: NDArray[np.float64]) -> NDArray[np.float64]:
    """Squared distances (n, k) between rows of x and rows of c."""
    d = (x * x).sum(1)[:, None] - 2 * x @ c.T + (c * c).sum(1)[None, :]
    return np.maximum(d, 0.0)


def kmeans_cost(x: NDArray[np.float64], c: NDArray[np.float64], w: NDArray[np.float64] | None = None) -> float:
    """Sum over points of (weight x) squared distance to the nearest center (chunked)."""
    total = 0.0
    for lo in range(0, x.shape[0], 65536):
        d = sq_dist(x[lo : lo + 65536], c).min(axis=1)
        total += float(d.sum() if w is None else (w[lo : lo + 65536] * d).sum())
    return total


def assign(x: NDArray[np.float64], c: NDArray[np.float64]) -> NDArray[np.int64]:
    out = np.empty(x.shape[0], dtype=np.int64)
    for lo in range(0, x.shape[0], 65536):
        out[lo : lo + 65536] = sq_dist(x[lo : lo + 65536], c).argmin(axis=1)
    return out


def _plusplus(x: NDArray[np.float64], w: NDArray[np.float64], k: int, rng: np.random.Generator) -> NDArray[np.float64]:
    n = x.shape[0]
    first = rng.choice(n, p=w / w.sum())
    centers = [x[first]]
    d = sq_dist(x, x[first][None, :])[:, 0]
    for _ in range(1, k):
        p = w * d
        tot = p.sum()
        idx = rng.choice(n, p=p / tot) if tot > 0 else rng.choice(n, p=w / w.sum())
        centers.append(x[idx])
        d = np.minimum(d, sq_dist(x, x[idx][None, :])[:, 0])
    return np.array(centers)


def weighted_kmeans(
    x: NDArray[np.float64],
    w: NDArray[np.float64],
    k: int,
    rng: np.random.Generator,
    restarts: int = 5,
    iterations: int = 50,
) -> NDArray[np.float64]:
    """Best of ``restarts`` runs of k-means++ then Lloyd on weighted points.

    Returns min(k, #points with positive weight) centers.
    """
    keep = w > 0
    x, w = x[keep], w[keep]
    if x.shape[0] == 0:
        raise ValueError("weighted_kmeans needs at least one point with positive weight")
    k = min(k, x.shape[0])
    best, best_cost = None, np.inf
    for _ in range(restarts):
        c = _plusplus(x, w, k, rng)
        for _ in range(iterations):
            lab = assign(x, c)
            mass = np.bincount(lab, weights=w, minlength=k)
            sums = np.zeros_like(c)
            np.add.at(sums, lab, x * w[:, None])
            new = np.where(mass[:, None] > 0, sums / np.maximum(mass, 1e-300)[:, None], c)
            if np.allclose(new, c, atol=1e-12):
                break
            c = new
        cost = kmeans_cost(x, c, w)
        if best is None or cost < best_cost:  # a non-finite cost still yields centers
            best, best_cost = c, cost
    assert best is not None
    return best


def reduce_weighted(
    x: NDArray[np.float64], w: NDArray[np.float64], k: int, rng: np.random.Generator
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Exactly k centers of weighted points and the weight each one takes.

    Negative weights (noisy counts) count as 0; with no positive weight every
    point weighs the same. Fewer distinct points than k: the heaviest center
    is repeated, with size 0 (a partition round with few buckets, a split
    refine round whose candidates were mostly gated)."""
    w = np.maximum(np.asarray(w, dtype=np.float64), 0.0)
    if not np.any(w > 0):
        w = np.ones_like(w)
    centers = weighted_kmeans(x, w, k, rng)
    sizes = np.bincount(assign(x, centers), weights=w, minlength=centers.shape[0]).astype(np.float64)
    if centers.shape[0] < k:
        pad = k - centers.shape[0]
        centers = np.vstack([centers, np.repeat(centers[[int(np.argmax(sizes))]], pad, axis=0)])
        sizes = np.concatenate([sizes, np.zeros(pad)])
    return centers, sizes
