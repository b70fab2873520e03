"""Private maximum coverage (seed 003, Alg. 1; seed 000, Alg. 2's inner loop).

A curator holds a private set R of points and a public family of sets
(balls around candidate centers, or grid cells with their cover radius).
Each step picks one set by the exponential mechanism with weight
exp(eps' * |S cap R_i|), where R_i are the points not yet covered, then
removes the points it covers. The gain of a set changes by at most one
when one point is added or removed, so each step is 2 eps'-DP on its own
(``exponential_mechanism.choose`` at epsilon 2 eps', sensitivity 1); seed
003's Lemma 6 (after Gupta et al., SODA 2010, unweighted set cover) shows
that the whole greedy, over every step and every radius, is (eps_s,
delta_s)-DP for eps' = eps_s / (2 ln(e / delta_s)): a point's privacy is
spent only until it is covered. The round's privacy statement (the
central kind) uses that lemma; basic composition (2 m eps' for m steps)
is the weaker bound the tests audit.

``empty_sets``: sets outside the incidence matrix that cover no point
of R (seed 000's astronomically many empty grid cells); a pick among them
is returned as -1 and covers nothing (the caller may draw which one).

Gains are kept for every set and updated after each pick from the newly
covered points alone (a sparse column slice), so a run costs one
mat-vec plus the incidence of the covered points. Pure numpy/scipy, no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import sparse

from shoal.common.errors import ConfigError
from shoal.common.kinds.central import greedy_step as step_epsilon  # noqa: F401 (the rule lives with the spec)
from shoal.common.mechanisms.exponential_mechanism import choose


@dataclass(frozen=True)
class Coverage:
    """The result of one greedy run: the picked sets in order (-1: an empty set) and
    which points of R they cover."""

    picked: NDArray[np.int64]
    covered: NDArray[np.bool_]


def private_max_coverage(
    incidence: sparse.spmatrix,
    active: NDArray[np.bool_],
    steps: int,
    step_eps: float,
    rng: np.random.Generator,
    empty_sets: int = 0,
) -> Coverage:
    """``steps`` picks over the sets (rows of ``incidence``, sets x points, non-zero
    where a set covers a point) of the points ``active`` (R; others are ignored)."""
    if steps < 0:
        raise ConfigError(f"max coverage: steps must be >= 0, got {steps}")
    if not (math.isfinite(step_eps) and step_eps > 0):
        raise ConfigError(f"max coverage: step_eps must be finite and > 0, got {step_eps}")
    if empty_sets < 0:
        raise ConfigError(f"max coverage: empty_sets must be >= 0, got {empty_sets}")
    rows = sparse.csr_matrix(incidence, dtype=np.int64, copy=True)  # a copy: the caller's matrix is not touched
    rows.data[:] = 1
    cols = rows.tocsc()
    active = np.asarray(active, dtype=bool)
    if active.shape != (rows.shape[1],):
        raise ConfigError(f"max coverage: active has shape {active.shape}, expected ({rows.shape[1]},)")
    if rows.shape[0] == 0 and empty_sets == 0:
        raise ConfigError("max coverage: no sets to pick from")
    left = active.copy()
    gains = np.asarray(rows @ left.astype(np.int64)).ravel()
    picked = np.full(steps, -1, dtype=np.int64)
    for i in range(steps):  # one exponential mechanism per step (m ~ 2 k ln(1/a)), over the distinct gains
        j = _pick(gains, empty_sets, step_eps, rng)
        if j < 0:
            continue  # a set that covers nothing new
        picked[i] = j
        newly = rows.indices[rows.indptr[j]:rows.indptr[j + 1]]
        newly = newly[left[newly]]
        if newly.size == 0:
            continue
        left[newly] = False
        gains -= np.asarray(cols[:, newly].sum(axis=1)).ravel().astype(np.int64)
    return Coverage(picked, active & ~left)


def uniform_below(total: int, rng: np.random.Generator) -> int:
    """A uniform integer in [0, total) for any Python int total >= 1 (rejection on whole bytes)."""
    nbytes = (total.bit_length() + 7) // 8 + 1
    limit = (1 << (8 * nbytes)) // total * total
    while True:
        v = int.from_bytes(rng.bytes(nbytes), "little")
        if v < limit:
            return v % total


def _pick(gains: NDArray[np.int64], empty_sets: int, step_eps: float, rng: np.random.Generator) -> int:
    """One step: the exponential mechanism over the sets' gains, exactly.

    Sets of equal gain are one group of that many (``choose``'s counts): the
    group is drawn by its total weight, then a member uniformly, which is the
    mechanism's law. Gain-0 sets and the empty ones are the block, whose
    member is drawn uniformly too: a row of the matrix (a set whose points are
    all covered), or -1 for one of the ``empty_sets`` (the caller draws which,
    uniformly). Either way the pick covers nothing new."""
    hist = np.bincount(gains) if gains.size else np.zeros(1, dtype=np.int64)
    values = np.flatnonzero(hist[1:]) + 1
    zero = int(hist[0]) + int(empty_sets)
    block = (zero, 0) if zero else None
    g = choose(values, 2 * step_eps, rng, block=block, counts=hist[values])
    if g == values.size:  # the block: a gain-0 set, matrix row or empty, uniformly
        j = uniform_below(zero, rng)
        return int(np.flatnonzero(gains == 0)[j]) if j < hist[0] else -1
    members = np.flatnonzero(gains == values[g])
    return int(members[rng.integers(members.size)])
