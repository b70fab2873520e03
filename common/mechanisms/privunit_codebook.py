"""The public candidates of codebook PrivUnit (``privunit.py``): which N unit
vectors a device scores for its nonce, and how the server regenerates the one
it picked (issue 45, Build 5: a device a phone can run).

Two forms, by dimension (``SHARED_MIN_DIM``; written out in
``docs/protocol/public-randomness.md``, "PrivUnit candidates"):

* **fresh** (d < 16): N candidates per nonce, each from its own SplitMix64
  stream (``candidate_vectors``): i.i.d. uniform on the sphere given the
  nonce, so E[V_J | u] = c u exactly (``privunit``'s decoding argument). A
  report costs N d Gaussians: cheap at small d.
* **shared** (d >= 16): one codebook per round, row j the fresh candidate
  (key, nonce 0, j), derived once and kept (``codebook``), and per nonce a
  signed permutation T (``nonce_transform``): V(nonce, j) = T C_j with
  (T x)_i = s_i x_{pi(i)}. The device's scores <T C_j, u> = <C_j, w> with
  w_{pi(i)} = s_i u_i: one N x d matrix-vector product and d hashes per
  report instead of N d Gaussians (at d = 100, N = 4096: 0.2 ms instead of
  15 ms here). This is Feldman and Talwar's compression (ICML'21) with the
  candidates' shared randomness split into a per-round part and a cheap
  per-report part.

Privacy does not depend on the form: given the nonce the device computes its
cap from candidates it derived itself, and every index keeps probability
p_c / K or (1 - p_c) / (N - K) whatever the codebook is (``privunit``).

Unbiasedness in the shared form holds over the round's seed: the rows of C
are i.i.d. uniform on the sphere, a law no rotation changes, so averaged over
codebooks E[T C_J | u] = c u as in the fresh form. For one fixed codebook
the transform's group (2^d d! signed permutations) is finite and a small
codebook-dependent bias remains: computed exactly over the device's coins
and 2e4 transforms per input (``tests/common/mechanisms/test_privunit_codebook.py``),
the component along u is within 0.2% of c and the orthogonal part within
0.4% of c at d = 16, 32 and 100 (the Monte Carlo error's size), while without
the permutation (signs only) it is 1.2% and 4% at d = 100, and at d = 2 the
8-element group leaves 0.9%: hence fresh candidates below d = 16, where they
are cheap anyway.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from shoal.common.randomness.hashing import mix64
from shoal.common.randomness.public_stream import box_muller

SHARED_MIN_DIM = 16
"""From this dimension on, a round's candidates are one shared codebook under a per-nonce signed permutation."""
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # SplitMix64's gamma
_TRANSFORM_TAG = np.uint64(0xFFFFFFFFFFFFFFFF)  # above every candidate index (< 2^16)


def shared(dim: int) -> bool:
    """Whether candidates of this dimension come from a shared codebook."""
    return dim >= SHARED_MIN_DIM


def candidate_vectors(
    key: int, nonces: NDArray[np.uint64], indices: NDArray[np.int64], dim: int
) -> NDArray[np.float64]:
    """Fresh unit vectors V(key, nonce, index): shape nonces/indices broadcast + (dim,).

    Random access (the server regenerates candidate J alone), specified in
    ``docs/protocol/public-randomness.md``: base = mix64(mix64(nonce XOR key)
    XOR index) with mix64 the SplitMix64 step (``common.randomness.hashing.mix64``: add
    the golden gamma, then its finaliser); the candidate's words are the
    SplitMix64 stream seeded with base, w_j = mix64(base + j gamma) for
    j = 0 .. ceil(dim / 2) - 1; its coordinates are the stream's Box-Muller
    pairs (``public_stream.box_muller``, binary64), the last dropped for odd
    dim, divided by their norm. SplitMix64 rather than SHAKE-256: the audits
    and the server regenerate 10^8 candidates, one random access each.

    No privacy rests on these numbers (module docstring), so a codebook that
    differs by a few ulps in another implementation (``log``/``cos``/``sin``
    are not correctly rounded everywhere) leaves every index's probability
    as it was; the server's decode of it moves by the same few ulps."""
    base = mix64(mix64(np.asarray(nonces, dtype=np.uint64) ^ np.uint64(key)) ^ np.asarray(indices, dtype=np.uint64))
    j = np.arange((dim + 1) // 2, dtype=np.uint64)
    h = mix64(np.asarray(base)[..., None] + j * _GOLDEN)  # uint64 arrays wrap silently
    g = box_muller(h)[..., :dim]
    return np.asarray(g / np.linalg.norm(g, axis=-1, keepdims=True))


@lru_cache(maxsize=8)
def codebook(key: int, candidates: int, dim: int) -> NDArray[np.float64]:
    """The round's shared codebook C (candidates x dim, read-only): row j is the
    fresh candidate (key, nonce 0, j). Derived once per (key, N, d) and kept."""
    out = candidate_vectors(key, np.zeros(1, dtype=np.uint64)[:, None], np.arange(candidates)[None, :], dim)[0]
    out.flags.writeable = False
    return out


def nonce_transform(key: int, nonces: NDArray[np.uint64], dim: int) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """(pi, s) of each nonce: shapes (n, dim). With base = mix64(mix64(nonce XOR
    key) XOR (2^64 - 1)) and w_i = mix64(base + i gamma), s_i = -1 if w_i is
    odd else +1, and pi lists 0 .. dim - 1 in increasing order of (w_i >> 1, i):
    a uniform signed permutation (ties have probability < dim^2 2^-64 and go
    to the lower index)."""
    base = mix64(mix64(np.asarray(nonces, dtype=np.uint64).reshape(-1) ^ np.uint64(key)) ^ _TRANSFORM_TAG)
    w = mix64(base[:, None] + np.arange(dim, dtype=np.uint64) * _GOLDEN)
    signs = 1.0 - 2.0 * (w & np.uint64(1)).astype(np.float64)
    perm = np.argsort(w >> np.uint64(1), axis=1, kind="stable")
    return perm.astype(np.int64), signs


def candidates(key: int, nonces: NDArray[np.uint64], indices: NDArray[np.int64], dim: int,
               n_candidates: int) -> NDArray[np.float64]:
    """V(key, nonce, index) for pairs of equal length (n,) -> (n, dim), in either form."""
    nonces = np.asarray(nonces, dtype=np.uint64).reshape(-1)
    indices = np.asarray(indices, dtype=np.int64).reshape(-1)
    if not shared(dim):
        return candidate_vectors(key, nonces, indices, dim)
    perm, signs = nonce_transform(key, nonces, dim)
    rows = codebook(key, n_candidates, dim)[indices]
    return np.asarray(signs * np.take_along_axis(rows, perm, axis=1))


def scores(key: int, nonces: NDArray[np.uint64], dirs: NDArray[np.float64], n_candidates: int) -> NDArray[np.float64]:
    """<V(key, nonce, j), u> for every candidate j: ``dirs`` (n, h, d) -> (n, h, N).

    Fresh: the N candidates of each nonce, then their inner products. Shared:
    w_{pi(i)} = s_i u_i per direction, then C w (the summation order of an
    inner product is free in the spec: it moves a score by ulps)."""
    n, _, dim = dirs.shape
    nonces = np.asarray(nonces, dtype=np.uint64).reshape(-1)
    if not shared(dim):
        cand = candidate_vectors(key, nonces[:, None], np.arange(n_candidates)[None, :], dim)
        return np.asarray(np.einsum("ncd,nhd->nhc", cand, dirs))
    perm, signs = nonce_transform(key, nonces, dim)
    w = np.empty_like(dirs)
    np.put_along_axis(w, np.broadcast_to(perm[:, None, :], dirs.shape), signs[:, None, :] * dirs, axis=2)
    book = codebook(key, n_candidates, dim)
    if n * dirs.shape[1] > 16:
        return np.asarray(w @ book.T)
    # one device's few directions: einsum, never a BLAS call that may wake threads (8 ms on a busy 2-core machine)
    return np.asarray(np.einsum("cd,nhd->nhc", book, w))
