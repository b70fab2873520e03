"""Data the project generates, and loaders for the real datasets.

The repository never ships data: tests and the demo use the generators;
benchmarks read the real datasets from a ``--data-dir`` (default
``../shared/data``) and skip them with a clear message when absent. Each
dataset comes with its *public* bound, never read from the data.
"""

from __future__ import annotations

import csv
import gzip
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from shoal.common.bounds import PublicBound
from shoal.common.clipping import clip_to_ball
from shoal.common.errors import ConfigError


@dataclass(frozen=True)
class Dataset:
    name: str
    points: NDArray[np.float64]
    k: int
    bound: PublicBound


def paper_mixture(n: int, d: int = 100, k: int = 8, r: float = 100.0, seed: int = 0,
                  sample_seed: int | None = None) -> Dataset:
    """Seed 004, Sec. 5: k centers uniform on the sphere of radius 1 - 1/r,
    Gaussian offsets of expected norm 1/r, points projected into the unit ball.
    ``sample_seed``: other devices of the same population (same centers)."""
    rng = np.random.default_rng(seed)
    c = rng.standard_normal((k, d))
    c *= (1 - 1 / r) / np.linalg.norm(c, axis=1)[:, None]
    if sample_seed is not None:
        rng = np.random.default_rng([seed, sample_seed])
    lab = rng.integers(0, k, size=n)
    x = c[lab] + rng.standard_normal((n, d)) / (r * np.sqrt(d))
    return Dataset(f"paper-mixture-n{n}-d{d}-k{k}", clip_to_ball(x), k, PublicBound(radius=1.0))


def city_locations(n: int, k: int = 6, seed: int = 0, sample_seed: int | None = None) -> Dataset:
    """2-D "city" pickups: k hot spots of different sizes and spreads inside a
    public box of [0, 100] km on each side (the demo's built-in dataset).
    ``sample_seed``: other devices of the same city (same hot spots)."""
    rng = np.random.default_rng(seed)
    hubs = rng.uniform(15, 85, size=(k, 2))
    spread = rng.uniform(2, 6, size=k)
    share = rng.dirichlet(np.full(k, 3.0))
    if sample_seed is not None:
        rng = np.random.default_rng([seed, sample_seed])
    lab = rng.choice(k, size=n, p=share)
    x = hubs[lab] + rng.standard_normal((n, 2)) * spread[lab][:, None]
    return Dataset(f"city-n{n}-k{k}", np.clip(x, 0, 100), k, PublicBound(low=(0.0, 0.0), high=(100.0, 100.0)))


def skewed_box(n: int, d: int = 7, k: int = 5, face: float = 0.02, seed: int = 0) -> Dataset:
    """Medium-dimension data with long tails clipped to a public box (issue 15).

    k log-normal clusters (log-means N(0, 1), log-sds U(0.5, 1.5) per
    feature, Dirichlet(2) weights). The public box is [0, q] per feature
    with q the (1 - face) quantile of a *reference* sample of the same
    generator (another seed, so never read from the data): about ``face``
    of each feature's values land on the box face. Most mass sits near
    the box's low corner, so the one-center cost in the unit ball is small
    (about 0.1) and the private mean's noise is not: the regime where a
    decoder without a structural safety net returned 1.3-1.6x the
    one-center cost."""
    def draw(m: int, rng: np.random.Generator) -> NDArray[np.float64]:
        lab = rng.choice(k, size=m, p=weights)
        return np.asarray(np.exp(mu[lab] + sig[lab] * rng.standard_normal((m, d))))

    shape = np.random.default_rng(np.random.SeedSequence([seed, 0]))
    mu = shape.normal(0.0, 1.0, (k, d))
    sig = shape.uniform(0.5, 1.5, (k, d))
    weights = shape.dirichlet(np.full(k, 2.0))
    high = np.round(np.quantile(draw(100_000, np.random.default_rng(np.random.SeedSequence([seed, 1]))), 1 - face, axis=0), 2)
    x = np.clip(draw(n, np.random.default_rng(np.random.SeedSequence([seed, 2]))), 0.0, high)
    return Dataset(f"skewed-box-n{n}-d{d}-k{k}", x, k, PublicBound(low=(0.0,) * d, high=tuple(float(h) for h in high)))


def overlapping_mixture(n: int = 23_000, d: int = 6, k: int = 5, face: float = 0.01, seed: int = 0) -> Dataset:
    """Broad, overlapping clusters of correlated features (issue 41, Build 2).

    k Gaussians with means uniform in [3, 7]^d (typical gap between two means
    about 1.6 sqrt(d / 6) x 2.5), each with covariance R diag(s^2) R^T for a
    random rotation R and axis scales s ~ U(0.6, 2.0): clusters as wide as the
    gaps between them, elongated along random directions, so features are
    correlated within a cluster; Dirichlet(3) weights. The regime of a real set
    (2.3e4 rows, 6 continuous features) where a noisy Lloyd beat shoal's grid
    cells. The public box is [0, q] per feature, q the (1 - face) quantile of a
    *reference* sample of the same generator (another seed: never read from
    the data), rounded up to one decimal; values beyond it are clipped."""
    shape = np.random.default_rng(np.random.SeedSequence([seed, 41, 0]))
    means = shape.uniform(3.0, 7.0, (k, d))
    rotations = np.linalg.qr(shape.standard_normal((k, d, d)))[0]
    scales = shape.uniform(0.6, 2.0, (k, d))
    factors = rotations * scales[:, None, :]  # R diag(s): offset = factor @ z
    weights = shape.dirichlet(np.full(k, 3.0))

    def draw(m: int, rng: np.random.Generator) -> NDArray[np.float64]:
        lab = rng.choice(k, size=m, p=weights)
        x = rng.standard_normal((m, d))
        for c in range(k):  # one matrix product per cluster
            sel = lab == c
            x[sel] = means[c] + x[sel] @ factors[c].T
        return x

    reference = draw(100_000, np.random.default_rng(np.random.SeedSequence([seed, 41, 1])))
    high = np.ceil(np.quantile(reference, 1 - face, axis=0) * 10) / 10
    x = np.clip(draw(n, np.random.default_rng(np.random.SeedSequence([seed, 41, 2]))), 0.0, high)
    return Dataset(f"overlap-n{n}-d{d}-k{k}", x, k, PublicBound(low=(0.0,) * d, high=tuple(float(h) for h in high)))


def balcan_mixture(n: int = 50_000, d: int = 100, k: int = 64, seed: int = 0) -> Dataset:
    """Seed 000's synthetic set "as in Balcan et al. 2017": 50,000 points from a
    mixture of 64 Gaussians in R^100. The papers give no more than that, so this
    is our reading: means uniform in the ball of radius 0.7, equal weights,
    spherical offsets of expected norm 0.1; public bound: the unit ball."""
    rng = np.random.default_rng([seed, 64])
    means = rng.standard_normal((k, d))
    means *= (0.7 * rng.uniform(size=(k, 1)) ** (1 / d)) / np.linalg.norm(means, axis=1, keepdims=True)
    lab = rng.integers(0, k, size=n)
    x = means[lab] + rng.standard_normal((n, d)) * (0.1 / np.sqrt(d))
    return Dataset(f"balcan-mixture-n{n}-d{d}-k{k}", clip_to_ball(x), k, PublicBound(radius=1.0))


def load_letter(data_dir: Path) -> Dataset:
    """UCI Letter Recognition: 20000 x 16 integer features in 0..15, k = 26."""
    path = Path(data_dir) / "letter-recognition.csv.gz"
    with gzip.open(path, "rt") as f:
        rows = list(csv.reader(f))
    x = np.array([[float(v) for v in r[1:]] for r in rows[1:]])
    return Dataset("letter", x, 26, PublicBound(low=(0.0,) * 16, high=(15.0,) * 16))


def load_uber(data_dir: Path) -> Dataset:
    """Uber NYC pickups (Apr 2014, ~100k rows): (lat, lon), k = 10, public box
    lat 40.4..41.2, lon -74.4..-73.6."""
    path = Path(data_dir) / "uber-pickups-apr14.csv.gz"
    with gzip.open(path, "rt") as f:
        rows = list(csv.reader(f))
    x = np.array([[float(r[1]), float(r[2])] for r in rows[1:]])
    return Dataset("uber", x, 10, PublicBound(low=(40.4, -74.4), high=(41.2, -73.6)))


def load_points(path: str | Path) -> NDArray[np.float64]:
    """A user's (n, d) points from a .npy file, or a ConfigError that says
    what is wrong with it (issue 16: a typo ended in a traceback)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"no such data file: {p} (a built-in dataset name, or an .npy file of shape (n, d))")
    try:
        x = np.load(p, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{p} is not a readable .npy array: {exc}") from None
    if x.ndim != 2 or x.shape[0] < 1 or not np.issubdtype(x.dtype, np.number):
        raise ConfigError(f"{p} must hold a non-empty numeric (n, d) array, got shape {x.shape} of {x.dtype}")
    return np.asarray(x, dtype=np.float64)
