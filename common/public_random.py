"""Public randomness of a round, derived deterministically from its config.

Every object a device and the server must agree on (projection matrix,
lattice shifts, SimHash planes, node-hash keys, the OLH seed pool) comes from
``numpy.random.SeedSequence([seed, tag])`` with a fixed tag per object, so
the same ``RoundConfig`` always yields the same objects on every machine.
Device-private randomness never comes from here (see ``client.encoder``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from shoal.common.tree_round import RoundConfig

_TAGS = {"projection": 1, "shifts": 2, "planes": 3, "level_keys": 4, "hist_seeds": 5, "vec_key": 6}


def _rng(seed: int, tag: str) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, _TAGS[tag]])))


@dataclass(frozen=True, eq=False)
class PublicRandomness:
    """The public objects of one round (read-only arrays)."""

    projection: NDArray[np.float64] | None
    shifts: NDArray[np.float64]
    planes: NDArray[np.float64]
    level_keys: NDArray[np.uint64]
    hist_seeds: NDArray[np.uint64]
    vec_key: int  # the PrivUnit codebook's key (``privunit.candidate_vectors``)

    @staticmethod
    def from_config(config: RoundConfig) -> PublicRandomness:
        return _derive(config)


@lru_cache(maxsize=32)
def _derive(cfg: RoundConfig) -> PublicRandomness:
    projection = None
    if cfg.encoder == "nettree" and not cfg.identity_projection:
        g = _rng(cfg.seed, "projection").standard_normal((cfg.proj_dim, cfg.dim))
        # JL map scaled so E||Px||^2 = ||x||^2, shrunk so that most points stay
        # in the ball before clipping (relative spread of ||Px|| ~ sqrt(2/d')).
        projection = g / math.sqrt(cfg.proj_dim) / (1 + math.sqrt(2 / cfg.proj_dim))
    t = cfg.levels
    shifts = np.zeros((t + 1, cfg.proj_dim))
    if cfg.encoder == "nettree":
        u = _rng(cfg.seed, "shifts").random((t + 1, cfg.proj_dim))
        shifts = u * lattice_spacing(np.arange(t + 1))[:, None]
    planes = np.zeros((t, cfg.dim))
    if cfg.encoder == "lsh" and t > 0:
        planes = _rng(cfg.seed, "planes").standard_normal((t, cfg.dim))
    level_keys = _rng(cfg.seed, "level_keys").integers(0, 2**63, size=t + 1, dtype=np.int64)
    hist_seeds = _rng(cfg.seed, "hist_seeds").integers(0, 2**63, size=cfg.hist_pool, dtype=np.int64)
    for a in (shifts, planes, level_keys, hist_seeds):
        a.setflags(write=False)
    if projection is not None:
        projection.setflags(write=False)
    return PublicRandomness(
        projection=projection,
        shifts=shifts,
        planes=planes,
        level_keys=level_keys.astype(np.uint64),
        hist_seeds=hist_seeds.astype(np.uint64),
        vec_key=int(_rng(cfg.seed, "vec_key").integers(0, 2**63)),
    )


def lattice_spacing(level: NDArray[np.int64] | int) -> NDArray[np.float64]:
    """Spacing 2^(2-i) of the level-i lattice: level 1 has 2 cells per axis over [-1, 1].

    Each level halves the spacing, so the Voronoi cube of a level-i point holds
    exactly 2 points of level i+1 per axis: 2^d' children (DESIGN.md nettree).
    """
    return np.power(2.0, 2 - np.asarray(level, dtype=np.float64))
