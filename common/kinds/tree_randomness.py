"""Public randomness of a tree round, derived deterministically from its config.

Every object a device and the server must agree on (projection matrix,
lattice shifts, SimHash planes, node-hash keys, the OLH seed pool, the
PrivUnit codebook key) is read from the round's public stream
(``common/randomness/public_stream.py``: SHAKE-256 of the protocol version, the seed
and a domain label per object, labels in ``LABELS``), so a device in any
language derives them from the signed config (issue 45, Build 1;
``docs/protocol/public-randomness.md``). Device-private randomness never
comes from here (see ``client.encoder``).

The JL projection has Gaussian entries g * a, and the SimHash planes are
Gaussian (Charikar 2002: P[different sign] = angle / pi needs a rotation-
invariant plane; random sign planes fail it badly in low dimension), both
from the stream's Box-Muller, whose few-ulp tolerance only moves which node
a point on a cell's or plane's edge falls in: a deterministic function of
the device's own point, before any randomiser, so no privacy property
depends on it. The projection was Rademacher (+-a, exact) for a while:
on the paper mixture (n = 1e5, d = 100 -> d' = 6, eps 8) it lost a
cluster on 5 of 21 public seeds, against 1 of 21 for numpy's Gaussian
before the stream and 2 of 21 for these stream Gaussians
(``tests/bench/results/public_randomness.md``; one-sided Fisher p = 0.09,
so not proven, but the Gaussian is the law the nettree was tuned with).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from shoal.common.kinds.tree import RoundConfig
from shoal.common.randomness import public_stream

LABELS = {
    "projection": "shoal/v1/tree/projection",  # Gaussians, (proj_dim, dim) row-major
    "shifts": "shoal/v1/tree/lattice-shifts",  # uniforms, (levels + 1, proj_dim)
    "planes": "shoal/v1/tree/simhash-planes",  # Gaussians, (levels, dim)
    "level_keys": "shoal/v1/tree/node-keys",  # words, levels + 1
    "hist_seeds": "shoal/v1/tree/olh-seeds",  # words, hist_pool
    "vec_key": "shoal/v1/tree/privunit-key",  # one word
}


def projection_scale(proj_dim: int) -> float:
    """a = (1 / sqrt(d')) / (1 + sqrt(2 / d')), in this order of binary64 operations.

    1 / sqrt(d') makes E||Px||^2 = ||x||^2; the shrink keeps most points in
    the ball before clipping (relative spread of ||Px|| ~ sqrt(2 / d'))."""
    return 1.0 / math.sqrt(proj_dim) / (1.0 + math.sqrt(2.0 / proj_dim))


@dataclass(frozen=True, eq=False)
class PublicRandomness:
    """The public objects of one round (read-only arrays)."""

    projection: NDArray[np.float64] | None
    shifts: NDArray[np.float64]
    planes: NDArray[np.float64]
    level_keys: NDArray[np.uint64]
    hist_seeds: NDArray[np.uint64]
    vec_key: int  # the PrivUnit codebook's key (``privunit_codebook``)

    @staticmethod
    def from_config(config: RoundConfig) -> PublicRandomness:
        return _derive(config)


@lru_cache(maxsize=32)
def _derive(cfg: RoundConfig) -> PublicRandomness:
    projection = None
    if cfg.encoder == "nettree" and not cfg.identity_projection:
        g = public_stream.gaussians(cfg.seed, LABELS["projection"], (cfg.proj_dim, cfg.dim))
        projection = g * projection_scale(cfg.proj_dim)
    t = cfg.levels
    shifts = np.zeros((t + 1, cfg.proj_dim))
    if cfg.encoder == "nettree":
        u = public_stream.uniforms(cfg.seed, LABELS["shifts"], (t + 1, cfg.proj_dim))
        shifts = u * lattice_spacing(np.arange(t + 1))[:, None]  # powers of two: exact
    planes = np.zeros((t, cfg.dim))
    if cfg.encoder == "lsh" and t > 0:
        planes = public_stream.gaussians(cfg.seed, LABELS["planes"], (t, cfg.dim))
    level_keys = public_stream.words(cfg.seed, LABELS["level_keys"], t + 1)
    hist_seeds = public_stream.words(cfg.seed, LABELS["hist_seeds"], cfg.hist_pool)
    for a in (shifts, planes, level_keys, hist_seeds):
        a.setflags(write=False)
    if projection is not None:
        projection.setflags(write=False)
    return PublicRandomness(
        projection=projection,
        shifts=shifts,
        planes=planes,
        level_keys=level_keys,
        hist_seeds=hist_seeds,
        vec_key=public_stream.key64(cfg.seed, LABELS["vec_key"]),
    )


def lattice_spacing(level: NDArray[np.int64] | int) -> NDArray[np.float64]:
    """Spacing 2^(2-i) of the level-i lattice: level 1 has 2 cells per axis over [-1, 1].

    Each level halves the spacing, so the Voronoi cube of a level-i point holds
    exactly 2 points of level i+1 per axis: 2^d' children (DESIGN.md nettree).
    """
    return np.power(2.0, 2 - np.asarray(level, dtype=np.float64))
