"""Keyed 64-bit hashing of net-tree nodes, vectorised over many nodes.

A node's identity is (level, integer coordinates); DESIGN.md fixes that it is
hashed to 64 bits with a keyed *public* hash. The hash needs no secrecy, only
good mixing, so we use the SplitMix64 finaliser (Steele, Lea, Flood 2014)
on uint64 arrays, with numpy's wrap-around arithmetic.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

U64 = NDArray[np.uint64]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def mix64(x: U64) -> U64:
    """SplitMix64 finaliser applied elementwise (a bijection of uint64).

    Computed on a 1-D view: numpy wraps uint64 array arithmetic silently and
    warns only for scalars, so no ``errstate`` context is needed (a device
    calls this ~20 times per report: the context cost more than the hash)."""
    a = np.asarray(x, dtype=np.uint64)
    z = a.reshape(-1) + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return (z ^ (z >> np.uint64(31))).reshape(a.shape)


def node_keys(level_key: np.uint64 | int, coords: NDArray[np.int64]) -> U64:
    """Hash nodes of one level to 64-bit keys.

    ``coords`` is (n,) for a binary LSH prefix or (n, d') for lattice nodes;
    ``level_key`` is the round's public key for that level, so equal
    coordinates on different levels (or rounds) get unrelated keys.
    """
    c = np.asarray(coords, dtype=np.int64)
    if c.ndim == 1:
        c = c[:, None]
    h = np.full(c.shape[0], np.uint64(level_key), dtype=np.uint64)
    steps = np.arange(c.shape[1], dtype=np.uint64) * _GOLDEN  # j gamma mod 2^64 (uint64 arrays wrap silently)
    cols = c.astype(np.uint64) + steps
    for j in range(c.shape[1]):
        h = mix64(h ^ cols[:, j])
    return h


def bucket_hash(seeds: U64, keys: U64, buckets: int) -> NDArray[np.int64]:
    """Local-hashing bucket of each key under each seed (broadcasting).

    ``seeds`` and ``keys`` broadcast against each other; the result is in
    ``[0, buckets)``. Used by the OLH frequency oracle (Wang et al. 2017)
    with a public pool of seeds.
    """
    h = mix64(np.asarray(seeds, dtype=np.uint64) ^ np.asarray(keys, dtype=np.uint64))
    return (h % np.uint64(buckets)).astype(np.int64)
