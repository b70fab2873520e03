"""The points a simulation runs on, read a block at a time, and the objectives it reports.

Split from ``simulate.py`` (which runs the rounds): these read a user's
points without an n x d temporary (issue 42: a read-only mapping of the
.npy file whose pages each pass gives back, ``blocks``) and score centers
in the unit-ball scale: the private answer's and the one-center objective
(``evaluate``), the fraction the public bound moved (``clipped_fraction``)
and the non-private reference (``nonprivate_objective``, only when asked).
"""

from __future__ import annotations

import mmap
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shoal.common.bounds import PublicBound, parse_box
from shoal.common.clipping import block_rows
from shoal.common.errors import ConfigError
from shoal.server.decoders.kmeans import assign, kmeans_cost, weighted_kmeans


def open_points(path: str | Path) -> NDArray[np.float64]:
    """A user's (n, d) points for the simulator: a read-only mapping of a C-order
    float64 .npy file (the pages a pass has read are given back by ``blocks``,
    so the input does not stay resident), else ``datasets.load_points``'
    in-memory array, which also says what is wrong with a bad file."""
    from shoal.deploy.simulation.datasets import load_points

    try:
        head = np.load(Path(path), mmap_mode="r", allow_pickle=False)
        ok = (isinstance(head, np.memmap) and head.dtype == np.float64 and head.ndim == 2 and head.shape[0] >= 1
              and head.flags.c_contiguous)
        shape, offset = head.shape, int(head.offset) if ok else 0
        del head
    except (OSError, ValueError):
        ok = False
    if not ok:
        return load_points(path)
    with open(path, "rb") as f:
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    return np.ndarray(shape, dtype=np.float64, buffer=mapped, offset=offset)


def drop_pages(points: NDArray[Any], lo: int, hi: int) -> None:
    """Give back the pages of rows lo:hi of an ``open_points`` mapping (a no-op
    for an array in memory). They are clean file pages: a later read faults
    them in again from the page cache."""
    mapped = points.base
    if not isinstance(mapped, mmap.mmap) or hi <= lo or not points.flags.c_contiguous:
        return
    start = points.ctypes.data - np.frombuffer(mapped, dtype=np.uint8).ctypes.data + lo * points.strides[0]
    end = start + (hi - lo) * points.strides[0]
    start -= start % mmap.PAGESIZE
    mapped.madvise(mmap.MADV_DONTNEED, start, min(end, len(mapped)) - start)


def blocks(points: NDArray[np.float64], rows: int) -> Iterator[tuple[int, NDArray[np.float64]]]:
    """(lo, points[lo:lo + rows]) for consecutive blocks, each block's mapped
    pages given back once the consumer asks for the next one."""
    for lo in range(0, points.shape[0], rows):
        hi = min(points.shape[0], lo + rows)
        yield lo, points[lo:hi]
        drop_pages(points, lo, hi)


def evaluate(points: NDArray[np.float64], bound: PublicBound,
             centers: list[NDArray[np.float64]]) -> tuple[list[float], float]:
    """(cost / n of each set of unit-ball ``centers``, the one-center cost / n)
    on the ball image of ``points``, in one pass over blocks: no n x d image.
    The one-center cost combines per-block means and squared deviations
    (Chan et al.), so it is exact up to rounding without a second pass."""
    n = points.shape[0]
    costs = [0.0] * len(centers)
    seen, mean, m2 = 0, np.zeros(points.shape[1]), 0.0
    for _, raw in blocks(points, block_rows(points.shape[1])):
        ball = bound.to_ball(raw)
        for i, c in enumerate(centers):
            costs[i] += kmeans_cost(ball, c)
        nb = ball.shape[0]
        mb = ball.mean(axis=0)
        ball -= mb
        delta = mb - mean
        m2 += float(np.einsum("ij,ij->", ball, ball)) + float(delta @ delta) * seen * nb / (seen + nb)
        mean += delta * (nb / (seen + nb))
        seen += nb
    return [c / n for c in costs], m2 / n


def clipped_fraction(points: NDArray[np.float64], bound: PublicBound) -> float:
    """The share of ``points`` the bound moves (``PublicBound.outside``), by blocks."""
    moved = sum(int(np.count_nonzero(bound.outside(b))) for _, b in blocks(points, block_rows(points.shape[1])))
    return moved / points.shape[0]


def ball_image(points: NDArray[np.float64], bound: PublicBound) -> NDArray[np.float64]:
    """``bound.to_ball(points)`` by blocks (an ``open_points`` input's pages
    given back as they are read): the one n x d output."""
    out = np.empty(points.shape)
    for lo, b in blocks(points, block_rows(points.shape[1])):
        out[lo:lo + b.shape[0]] = bound.to_ball(b)
    return out


def reference_objective(points: NDArray[np.float64], bound: PublicBound, k: int, seed: int = 0) -> float:
    """``nonprivate_objective`` of the points' ball image (the one n x d
    array the simulator then holds)."""
    return nonprivate_objective(ball_image(points, bound), k, seed)


def _lloyd(x: NDArray[np.float64], c: NDArray[np.float64], steps: int = 5) -> NDArray[np.float64]:
    for _ in range(steps):
        lab = assign(x, c)
        cnt = np.bincount(lab, minlength=c.shape[0])
        sums = np.zeros_like(c)
        np.add.at(sums, lab, x)
        c = np.where(cnt[:, None] > 0, sums / np.maximum(cnt, 1)[:, None], c)
    return c


def nonprivate_objective(x: NDArray[np.float64], k: int, seed: int = 0) -> float:
    """The non-private reference, cost / n: the better of shoal's weighted k-means
    (k-means++, 3 restarts) and, when installed (the ``dev`` extra; never a
    runtime dependency), scikit-learn's ``KMeans`` (k-means++, n_init=10),
    each fitted on (a 50k sample of) the true points, then 5 Lloyd steps on
    all. Issue 15: shoal's alone was 8% above scikit-learn's on a 2-D set
    (0.01442 against 0.01332), which flattered every ratio to it."""
    rng = np.random.default_rng(seed)
    sample = x if x.shape[0] <= 50_000 else x[rng.choice(x.shape[0], 50_000, replace=False)]
    best = kmeans_cost(x, _lloyd(x, weighted_kmeans(sample, np.ones(sample.shape[0]), k, rng, restarts=3)))
    try:
        from sklearn.cluster import KMeans
    except ImportError:
        return best / x.shape[0]
    km = KMeans(n_clusters=min(k, sample.shape[0]), n_init=10, random_state=seed).fit(sample)
    return min(best, kmeans_cost(x, _lloyd(x, np.asarray(km.cluster_centers_, dtype=np.float64)))) / x.shape[0]


def cli_bound(radius: float | None, box: str | None, points: Any, prog: str) -> Any:
    """The public bound a verb was given (--radius or --box), or radius 1 with
    a line on stderr that says so and how many points it clips (issue 16:
    silent clipping to the unit ball misled a user). The fraction is of the
    user's own file, computed here, never published."""
    if radius is not None and box is not None:
        raise ConfigError("give --radius or --box, not both")
    if box is not None:
        return parse_box(box, points.shape[1])
    bound = PublicBound(radius=1.0 if radius is None else radius)
    if radius is None:
        frac = clipped_fraction(points, bound)
        print(f"{prog}: no --radius or --box given: using radius 1, which clips {frac:.1%} of the points. "
              "Give the data's public range.", file=sys.stderr)
    return bound
