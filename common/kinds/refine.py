"""The ``refine`` round: one Lloyd step on the devices, summed securely.

After a tree round (seed 004, Alg. 3-4) is decoded, the server publishes
its k centers (in the unit ball of the original space). Each device assigns
itself to its nearest center and contributes, to that center's bucket only,
its ball point and a count of 1: a vector of k x (d + 1) numbers of which
d + 1 are non-zero (L1 norm <= sqrt(d) + 1, entries in [-1, 1]). The sums go
through ``secure_sum`` (split-and-mix in the shuffle model, distributed
discrete Laplace or, when its noise is smaller (d >= 8 at delta = 1e-8:
the bucket's L2 norm is sqrt(2) against an L1 norm of sqrt(d) + 1),
distributed discrete Gaussian), so each new center sum / count has near-central error:
this is the "bucketized vector summation" step of seed 004 (Sec. 4, Thm. 22
with the shuffle-model aggregation of Thm. 2 / Appendix C), run as a second
round on the parent's centers instead of the tree's nodes.

Split candidates (``split`` > 1): each parent center c becomes ``split``
candidates c + eta u_i (eta = ``SPLIT_STEP``, u_i public unit directions
from the round's seed; for split = 2, u and -u), devices take the Lloyd
step against the candidates, and the server reduces the candidates' noisy
means to the parent's k centers by weighted k-means (post-processing).
Why: a parent center that sits between two tight clusters (a partition
round's bucket holding both, ``kinds/partition.py``) is a fixed point of a
Lloyd step, but its two clusters lie on opposite sides of every hyperplane
through it, so the split separates them exactly (seed 001, Sec. 2: take
k' > k centers, then reduce). Measured (numpy model, central eps 0.5 +
0.5): tight clusters (3,000 devices, d = 10, k = 5, 300 seeds), rounds
above 0.1 x one center 53% -> 5% (split 2) / 1% (split 3), mean cost
0.114 -> 0.022 / 0.016; letter (30 seeds) 0.0569 -> 0.0538 / 0.0552.
Partition rounds' refines split in 2 by default; tree rounds' do not (a
split triples the refine's noise in a recombined center, and the tree
locates clusters).

Privacy: the refine round is (eps, delta)-DP on its own (``SecureSumEvent``);
with its parent it composes sequentially (``RoundsEvent``). Pure math, no I/O.

Over 300 lines: besides the round, it holds the one-slot bucket sum that
partition rounds reuse and the public rules (``first_round``,
``refine_share``) that decide when a shuffle run refines; each rule reads
the others' constants, so they stay together.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shoal.common.bounds import PublicBound, published, unpublished
from shoal.common.clipping import clip_to_ball
from shoal.common.errors import ConfigError
from shoal.common.kinds.base import SharesRound, shares_kind
from shoal.common.kinds.tree import derive_config
from shoal.common.mechanisms.secure_sum import DEFAULT_LAW, SecureSumParams, SumLaw
from shoal.common.privacy.accounting import split_spend
from shoal.common.randomness import public_stream

NAME = "refine"
NOISE_GATE = 3.0  # a bucket whose noisy count is below this many noise sds keeps the parent's center
MAX_SPLIT = 4  # candidates per parent center at most
SPLIT_STEP = 1e-6  # how far a candidate sits from its parent center (unit ball)

SPLIT_LABEL = "shoal/v1/refine/split-directions"


@dataclass(frozen=True)
class RefineConfig(SharesRound):
    """Public parameters of a refine round: the parent's centers and the secure sum."""

    round_id: str
    parent_id: str
    k: int
    dim: int
    bound: PublicBound
    centers: tuple[tuple[float, ...], ...]
    secure_sum: SecureSumParams
    keep: int = 0  # > 0: the decode reduces the k candidates to this many centers (split rounds)

    def __post_init__(self) -> None:
        check_centers("refine", self.k, self.dim, self.keep, self.centers)
        s = self.secure_sum
        if s.length != self.k * (self.dim + 1):
            raise ConfigError(f"secure sum length {s.length} != k (d + 1) = {self.k * (self.dim + 1)}")
        check_bucket_sum(s, self.dim)
        self.bound.check_dim(self.dim)


    @property
    def center_array(self) -> NDArray[np.float64]:
        return np.asarray(self.centers, dtype=np.float64)



def check_centers(what: str, k: int, dim: int, keep: int, centers: tuple[tuple[float, ...], ...]) -> None:
    """The parent-centers part of a refine kind's config: k, d >= 1, 0 <= keep
    <= k, and k finite centers of the unit ball in d dimensions."""
    if k < 1 or dim < 1:
        raise ConfigError(f"{what} needs k >= 1 and dim >= 1, got k={k}, dim={dim}")
    if isinstance(keep, bool) or not isinstance(keep, int) or not 0 <= keep <= k:
        raise ConfigError(f"{what} keep must be in [0, k={k}], got {keep}")
    c = np.asarray(centers, dtype=np.float64)
    if c.shape != (k, dim):
        raise ConfigError(f"{what} centers have shape {c.shape}, expected ({k}, {dim})")
    if not np.all(np.isfinite(c)) or np.any(np.linalg.norm(c, axis=1) > 1 + 1e-9):
        raise ConfigError(f"{what} centers must be finite points of the unit ball")


def derive_refine(
    parent_id: str,
    ball_centers: NDArray[np.float64],
    bound: PublicBound,
    epsilon: float,
    delta: float,
    min_devices: int,
    max_devices: int | None = None,
    round_id: str = "refine",
    split: int = 1,
    seed: int = 0,
    law: SumLaw = DEFAULT_LAW,
) -> RefineConfig:
    """A refine round on the parent's centers (k, d) in the unit ball; with
    ``split`` > 1 on ``split`` candidates per center (module docstring);
    ``law``: the secure sum's calibration (``SumLaw``)."""
    c = clip_to_ball(np.asarray(ball_centers, dtype=np.float64))
    k, d = c.shape
    candidates = split_candidates(c, split, seed)
    params = bucket_sum_params(candidates.shape[0], d, epsilon, delta, min_devices, max_devices, law)
    return RefineConfig(round_id, parent_id, candidates.shape[0], d, bound, tuple(map(tuple, candidates.tolist())),
                        params, keep=k if split > 1 else 0)


def split_candidates(centers: NDArray[np.float64], split: int, seed: int,
                     label: str = SPLIT_LABEL) -> NDArray[np.float64]:
    """(split k, d): every center moved ``SPLIT_STEP`` along ``split`` public unit
    directions from the stream (``seed``, ``label``) (u and -u for split = 2), clipped
    into the ball; split = 1 gives the centers themselves. A caller that splits more than
    once per seed names each split's stream (the central partition stage's second split)."""
    if isinstance(split, bool) or not (isinstance(split, int) and 1 <= split <= MAX_SPLIT):
        raise ConfigError(f"refine split must be an integer in [1, {MAX_SPLIT}], got {split!r}")
    c = np.asarray(centers, dtype=np.float64)
    if split == 1:
        return c
    # public: the stream (seed, label) (common/randomness/public_stream.py); the config carries the result
    u = public_stream.unit_rows(public_stream.gaussians(int(seed), label, (split if split > 2 else 1,) + c.shape))
    if split == 2:
        u = np.concatenate([u, -u])
    return clip_to_ball((c[None] + SPLIT_STEP * u).reshape(-1, c.shape[1]))


def bucket_sum_params(buckets: int, dim: int, epsilon: float, delta: float, min_devices: int,
                      max_devices: int | None, law: SumLaw = DEFAULT_LAW) -> SecureSumParams:
    """The secure sum of ``buckets`` slots of (ball point, 1), one slot per device
    (refine and partition rounds): L1 sqrt(d) + 1, L2 sqrt(2), d + 1 non-zeros;
    ``law`` its calibration (the noise law, default the smaller)."""
    return SecureSumParams.derive(
        buckets * (dim + 1),
        l1_norm=math.sqrt(dim) * (1 + 1e-9) + 1,  # margin for float rounding of unit-norm points
        max_abs=1.0,
        max_nonzero=dim + 1,
        epsilon=epsilon,
        delta=delta,
        min_devices=min_devices,
        max_devices=max_devices,
        noise=law.noise,
        l2_norm=math.sqrt(2) * (1 + 1e-9),
        aligned=True,  # two buckets' inner product is |x.x'| + 1 >= 0 in one bucket, 0 across
        failure_epsilon=law.failure_epsilon,
    )


def check_bucket_sum(s: SecureSumParams, dim: int) -> None:
    """Whether a secure sum's bounds cover one slot of (ball point, 1) (``bucket_sum_params``)."""
    if s.noise == "gaussian" and (s.l2_norm < math.sqrt(2) or not s.aligned):
        raise ConfigError(f"secure sum l2_norm {s.l2_norm} (aligned={s.aligned}) does not cover a ball point "
                          "and a count (sqrt(2), aligned)")
    if s.max_nonzero < dim + 1 or s.l1_norm < math.sqrt(dim) + 1 or s.max_abs < 1:
        raise ConfigError(f"secure sum bounds (l1 {s.l1_norm}, max_abs {s.max_abs}, non-zeros {s.max_nonzero}) "
                          f"do not cover a ball point and a count (l1 sqrt(d) + 1, {dim + 1} non-zeros)")


def bucket_slots(x: NDArray[np.float64], labels: NDArray[np.int64], buckets: int) -> NDArray[np.float64]:
    """(n, buckets (d + 1)): each ball point and a 1 in its bucket's slot, zeros elsewhere."""
    n, d = x.shape
    out = np.zeros((n, buckets, d + 1))
    rows = np.arange(n)
    out[rows, labels, :d] = x
    out[rows, labels, d] = 1.0
    return out.reshape(n, -1)


# The refine round's share of a shuffle round's central eps (``refine_share``):
# the largest candidate whose tree round still locates the clusters.
REFINE_SHARES: tuple[float, ...] = (0.2, 0.5, 0.7)
# Predicted squared center error (unit ball) below which the tree round is
# taken to have located the clusters, so the refine round's noise, not the
# tree, limits the answer.
TREE_LOCATED = 0.01
# A refine round's share of the total delta (its eps share is ``refine_share``'s).
REFINE_DELTA_SHARE = 0.01


# The refine round's share after a partition round (``first_round``): letter (n = 2e4, d = 16, k = 26,
# central eps 1, seeds 0-2) gave 0.065 / 0.062 / 0.059 / 0.060 / 0.059 at shares 0.2 / 0.3 / 0.4 / 0.5 / 0.6.
PARTITION_REFINE_SHARE = 0.5
# The central eps (of the tree round and its refine, the refine at its smallest share) at which
# ``first_round`` predicts whether the tree locates the clusters, whatever eps the round has.
FIRST_ROUND_EPS = 0.5


def first_round(n: int, dim: int, k: int, delta: float, min_batch: int | None = None) -> str:
    """The shuffle model's first round, from public parameters only: the tree
    round ("tree") when its vector reports are predicted to locate the
    clusters (center error <= ``TREE_LOCATED``) or when its positions come
    from the lattice alone; otherwise a ``partition`` round, whose noise is
    central: per-bucket secure sums over a public partition (issue 15:
    letter's shuffle tree round answered near the one-center cost,
    0.094-0.097, where a partition round gave 0.065 and, with a refine
    round, 0.059).

    The prediction is made at ``FIRST_ROUND_EPS``, not at the round's eps, so
    the protocol does not change with eps (issue 41, Build 3): each protocol
    gets better with more budget, but a switch from partition to tree as eps
    grows made the objective worse: a 7-feature held-back set 0.0324 at
    eps 1 -> 0.0357 at eps 4, the overlapping-cluster generator (n = 23,000,
    d = 6, k = 5; 3 seeds, shuffle + refine) partition 0.0895 at eps 0.5,
    tree 0.101 / 0.094 / 0.091 at eps 1 / 2 / 4, where partition gives
    0.085 / 0.085 / 0.083 (``tests/bench/results/first_round.md``). The tree's
    prediction is a noise figure: it says whether the tree could locate
    clusters as tight as its own noise, not whether the data's clusters are
    broad; the tree round wins where it locates at small budgets (the paper
    generator at n = 1e6, d = 100: 1.0e-4 either way, with 1/1800 of the
    partition round's bytes per device; Uber in d = 2)."""
    tree_eps = split_spend(FIRST_ROUND_EPS, min(REFINE_SHARES))[0]
    cfg = derive_config(n, dim, k, tree_eps, model="shuffle", delta=delta, min_batch=int(min_batch or n), seed=0)
    error = cfg.predicted_center_error
    return "partition" if not math.isnan(error) and error > TREE_LOCATED else "tree"


def refine_share(n: int, dim: int, k: int, epsilon: float, delta: float, min_batch: int | None = None) -> float:
    """How much of a shuffle model's central (epsilon, delta) a refine round
    should get, from public parameters only (issue 15, item 5).

    The tree round must locate the clusters; past that, budget spent on it
    is wasted and the refine round's secure-sum noise (per center
    d sigma^2 / n_c^2, sigma ~ 1 / eps_refine) dominates. So: the largest
    share in ``REFINE_SHARES`` whose tree round (``derive_config`` at
    (1 - share) epsilon, in the shuffle model, with its chosen encoder)
    predicts a center error of at most ``TREE_LOCATED``; the smallest share
    when the tree's positions come from the lattice alone (no vector
    report, so no prediction); ``PARTITION_REFINE_SHARE``
    when not even the tree at the smallest share locates the clusters
    (``first_round`` is then a partition round).

    Measured (central eps=1, delta=1e-6, seed 0, discrete Gaussian refine):
    the paper generator (n=1e6, d=100, k=8; predicted error 0.003 at every
    share) gives 1.25e-4 / 1.04e-4 / 1.02e-4 at shares 0.2 / 0.5 / 0.7;
    letter (n=2e4, d=16, k=26; predicted 0.4-0.9) gives 0.079 / 0.086 at
    0.2 / 0.35 over 3 seeds, and is best at 0.2; Uber (nettree, lattice
    positions) is flat (0.0020 at 0.2 and 0.5).
    """
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ConfigError(f"epsilon must be finite and > 0, got {epsilon}")
    batch = int(min_batch or n)
    # The tree round's (eps, delta) as the split gives them (``accounting.split_spend``, rounded toward
    # less spend, as ``deploy/simulation/simulate.round_budget`` splits): the probe is the round that will run.
    tree_delta = split_spend(delta, REFINE_DELTA_SHARE)[0]
    if first_round(n, dim, k, tree_delta, batch) == "partition":
        return PARTITION_REFINE_SHARE
    for share in sorted(REFINE_SHARES, reverse=True):
        cfg = derive_config(n, dim, k, split_spend(epsilon, share)[0], model="shuffle", delta=tree_delta,
                            min_batch=batch, seed=0)
        if cfg.predicted_center_error <= TREE_LOCATED:
            return share
    return min(REFINE_SHARES)


def contributions(points: NDArray[np.float64], config: RefineConfig) -> NDArray[np.float64]:
    """What each device feeds into the secure sum: (n, k (d + 1)), its ball
    point and a 1 in the bucket of its nearest center, zeros elsewhere."""
    x = config.bound.to_ball(points)
    if x.shape[1] != config.dim:
        raise ConfigError(f"points have {x.shape[1]} features, the round has {config.dim}")
    c = config.center_array
    d2 = (x * x).sum(1)[:, None] - 2 * x @ c.T + (c * c).sum(1)[None, :]
    return bucket_slots(x, np.argmin(d2, axis=1), config.k)


def refined_centers(total: NDArray[np.float64], config: RefineConfig) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Ball centers and noisy sizes from the decoded sum (k (d + 1),).

    A bucket with a noisy count below ``NOISE_GATE`` noise sds keeps the
    parent's center (a mean of noise would be worse); means are clipped into
    the bound's domain (``PublicBound.project_ball``)."""
    t = np.asarray(total, dtype=np.float64).reshape(config.k, config.dim + 1)
    sums, counts = t[:, : config.dim], t[:, config.dim]
    ok = kept_buckets(total, config)
    means = np.where(ok[:, None], sums / np.where(ok, counts, 1.0)[:, None], config.center_array)
    return config.bound.project_ball(means), np.maximum(counts, 0.0)


def kept_buckets(total: NDArray[np.float64], config: RefineConfig) -> NDArray[np.bool_]:
    """The buckets whose noisy count clears ``NOISE_GATE`` noise sds (and 1): those whose
    mean ``refined_centers`` takes; the others keep the parent's center."""
    counts = np.asarray(total, dtype=np.float64).reshape(config.k, config.dim + 1)[:, config.dim]
    return np.asarray(counts > max(NOISE_GATE * config.secure_sum.noise_std, 1.0))


def centers_config_to_dict(config: Any, name: str) -> dict[str, Any]:
    """A published config that carries its parent's centers (refine kinds)."""
    out = published(config, name)
    out["centers"] = [list(c) for c in config.centers]
    return out


def centers_config_from_dict(data: dict[str, Any], cls: Any, nested: str, nested_cls: Any, what: str) -> Any:
    """Inverse of ``centers_config_to_dict`` for ``cls`` whose field ``nested``
    is a ``nested_cls``; validates everything again (devices call it)."""
    try:
        fields, bound = unpublished(data)
        centers = tuple(tuple(float(v) for v in c) for c in fields.pop("centers"))
        inner = nested_cls(**fields.pop(nested))
        return cls(bound=bound, centers=centers, **{nested: inner}, **fields)
    except (KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"not a {what} config: {exc}") from exc


def refine_to_dict(config: RefineConfig) -> dict[str, Any]:
    """The published config of a refine round (``kind`` tells it from a tree round)."""
    return centers_config_to_dict(config, NAME)


def refine_from_dict(data: dict[str, Any]) -> RefineConfig:
    """Inverse of ``refine_to_dict``; validates everything again (devices call it)."""
    config: RefineConfig = centers_config_from_dict(data, RefineConfig, "secure_sum", SecureSumParams, "refine")
    return config


# The shared half of the refine kind (``common/kinds/__init__.py``).
KIND = shares_kind(NAME, refine_from_dict, refine_to_dict)
