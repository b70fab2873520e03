"""The ``partition`` round: cluster means over a public partition, summed securely.

A first round with central noise for the shuffle model (issue 15): the
round's seed fixes ``bits`` random hyperplanes through the centre of the
unit ball; a device's bucket is its point's sign pattern (an LSH code, as
seed 004's lsh tree at one level). Each device adds its ball point and a
count of 1 to its bucket's slot of a vector of 2^bits (d + 1) numbers and
sends it through ``secure_sum`` (split-and-mix, distributed discrete
Gaussian or Laplace noise), exactly as a refine round does for its
nearest center (``kinds/refine.py``; same bounds: L1 sqrt(d) + 1, L2
sqrt(2), d + 1 non-zeros). The server gets every bucket's noisy count and
sum, keeps the buckets whose count clears the noise, and clusters their
means (weighted k-means): the coreset of a Lloyd-free first round whose
noise is central, not local. A refine round then takes a Lloyd step from
its centers.

Why (issue 15, letter, n = 20,000, d = 16, k = 26, central eps 1): the
shuffle-model tree round's answer is near the one-center cost (0.094-0.097
at eps 0.8), and no refine round can repair that (six exact Lloyd steps
reach 0.056-0.061). A numpy model of this round at eps 0.5 with 2^6
buckets, then one refine step at eps 0.5, gave 0.0516 (5 seeds; 7 and 8
bits: 0.056). ``bucket_bits`` sizes the partition so an average bucket
holds ``BUCKET_SDS`` noise sds of devices.

Known weakness (measured 2026-11-24, numpy model of this round, 400 public
seeds, 3,000 devices, d = 10, five tight clusters on the unit sphere at
67-133 degrees, central eps 1, one exact Lloyd step after it): hyperplanes
through the centre separate two clusters at angle a with probability a/pi
each, so some pair often shares a bucket, and no Lloyd step undoes that
merge. Share of rounds above 0.1 x the one-center cost, by bits (noise-free
in brackets): 4: 0.57 (0.57), 5: 0.27, 6: 0.16 (0.16), 7: 0.11, 8: 0.07,
9: 0.05; worst 0.62 x one center. Random offsets made it worse (0.68 at 4
bits); two or three 4-bit partitions with the devices split between them
(0.22, 0.20) did no better than one partition with as many buckets. On diffuse
data (letter) 6 bits beat 7 and 8, which is why the floor stays at
log2 k + 1. Splitting a merged bucket needs more than counts and sums
(next step: a second moment per bucket to find the merges).

Hyperplanes through a released mean (``center``, issue 41). Through the
ball's centre they miss data that sits off it: a public box from domain
knowledge rarely has the data's mean at its middle. Letter in its box
[0, 15]^16: the mean lies 0.32 from the ball's centre with a spread of 0.30
around it, so at eps 0.5 74% of the devices fell in two of the 64 buckets
and 18 buckets cleared the noise gate; through the data's mean, 56. The
stage that runs a partition round (``shoal simulate``, the estimator, the
benchmarks: ``deploy/simulation/simulate.partition_in_process``) first runs a
one-bit partition round at ``MEAN_SHARE`` of its (eps, delta) and centres the
partition at that round's mean (``mean_of``, post-processing); the budget is
split by ``mean_budget``, and the rounds (the refine round's too) compose in
zCDP where their sums are discrete Gaussian (``kinds/partition_plan.py``). Measured (shuffle + refine, central
eps 1 and 4, delta 1e-6, seeds 0-2, ``simulate_rounds``): letter 0.0570 ->
0.0533 at eps 1 and 0.0469 -> 0.0420 at eps 4 (shares 0.1 / 0.2: 0.0537 /
0.0588 and 0.0427 / 0.0436); the overlapping-cluster generator (centred in
its box; seeds 0-4) 0.0794 / 0.0785 / 0.0764 -> 0.0793 / 0.0781 / 0.0770 at
eps 0.5 / 1 / 4 (within its seeds' spread). Whitening the hyperplanes by the
data's covariance (an oracle, no noise) did worse on letter (0.0570 at 6 bits,
0.0619 at 7), as did more bits through the mean (7: 0.0570, 8: 0.0590).

Privacy: the round is one secure sum (``SecureSumEvent``); the partition is
public (its hyperplanes from the seed, its center a released value), so
where a device falls costs nothing beyond its contribution. Pure math, no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shoal.common.bounds import PublicBound, published, unpublished
from shoal.common.errors import ConfigError
from shoal.common.kinds.base import SharesRound, shares_kind
from shoal.common.kinds.refine import bucket_slots, bucket_sum_params, check_bucket_sum
from shoal.common.kinds.tree import MAX_EPSILON
from shoal.common.mechanisms.secure_sum import DEFAULT_LAW, SecureSumParams, SumLaw
from shoal.common.privacy.accounting import split_spend
from shoal.common.randomness import public_stream

NAME = "partition"
MAX_BITS = 10
MAX_LENGTH = 8192  # 2^bits (d + 1) at most: every device sends shares of this many numbers
BUCKET_SDS = 24.0  # an average bucket holds at least this many noise sds of devices (``bucket_bits``)
MAX_DEVICES_FACTOR = 2  # default max_devices: this many times n_expected (``derive_partition``)
REFINE_SPLIT = 2  # a refine round on a partition round splits each center in two (``kinds/refine.py``)
NOISE_GATE = 3.0  # a bucket whose noisy count is below this many noise sds is left out
MEAN_SHARE = 0.05  # of a partition stage's (eps, delta): the one-bit round whose mean centers the hyperplanes

HYPERPLANE_LABEL = "shoal/v1/partition/hyperplanes"


@dataclass(frozen=True)
class PartitionConfig(SharesRound):
    """Public parameters of a partition round: the hyperplanes' seed and the secure sum."""

    round_id: str
    k: int
    dim: int
    bound: PublicBound
    bits: int
    seed: int
    secure_sum: SecureSumParams
    center: tuple[float, ...] = ()  # the hyperplanes' common point in the unit ball; () is the ball's centre

    def __post_init__(self) -> None:
        if self.k < 1 or self.dim < 1:
            raise ConfigError(f"partition needs k >= 1 and dim >= 1, got k={self.k}, dim={self.dim}")
        check_center(self.center, self.dim)
        if not 1 <= self.bits <= MAX_BITS:
            raise ConfigError(f"partition bits must be in [1, {MAX_BITS}], got {self.bits}")
        s = self.secure_sum
        if s.length != self.buckets * (self.dim + 1):
            raise ConfigError(f"secure sum length {s.length} != 2^bits (d + 1) = {self.buckets * (self.dim + 1)}")
        check_bucket_sum(s, self.dim)
        self.bound.check_dim(self.dim)

    @property
    def buckets(self) -> int:
        return 1 << self.bits

    @property
    def center_array(self) -> NDArray[np.float64]:
        """The point every hyperplane passes through (the origin when ``center`` is empty)."""
        return np.asarray(self.center, dtype=np.float64) if self.center else np.zeros(self.dim)

    @property
    def hyperplanes(self) -> NDArray[np.float64]:
        """(dim, bits) public normals: the Gaussians of the public stream (seed,
        "shoal/v1/partition/hyperplanes"), (bits, dim) row-major, transposed
        (``common/randomness/public_stream.py``; Gaussian for SimHash's angle property)."""
        return hyperplanes(self.seed, self.bits, self.dim)


def check_center(center: tuple[float, ...], dim: int) -> None:
    """A partition's center: empty (the ball's centre), or ``dim`` finite numbers of norm <= 1."""
    if not isinstance(center, tuple) or not all(isinstance(v, float) for v in center):
        raise ConfigError(f"partition center must be a tuple of floats, got {center!r}")
    if not center:
        return
    c = np.asarray(center, dtype=np.float64)
    if c.shape != (dim,):
        raise ConfigError(f"partition center has {c.shape[0]} coordinates, the round has {dim} features")
    if not np.all(np.isfinite(c)) or float(np.linalg.norm(c)) > 1 + 1e-9:
        raise ConfigError("partition center must be a finite point of the unit ball")


@lru_cache(maxsize=8)
def hyperplanes(seed: int, bits: int, dim: int) -> NDArray[np.float64]:
    """(dim, bits) public normals from the round's seed, derived once per round (a device
    answering several reports, or a simulation, reuses them), read-only. The central model's
    partition stage draws its hyperplanes the same way (``kinds/central.py``)."""
    h = public_stream.gaussians(seed, HYPERPLANE_LABEL, (bits, dim))
    h.flags.writeable = False
    return h.T




def check_epsilon(epsilon: float) -> None:
    """A partition round's (or stage's) central epsilon: finite, > 0 and <= ``MAX_EPSILON``."""
    if not (math.isfinite(epsilon) and 0 < epsilon <= MAX_EPSILON):
        raise ConfigError(f"epsilon must be finite, > 0 and <= {MAX_EPSILON:g} (MAX_EPSILON), got {epsilon}")


def mean_budget(epsilon: float, delta: float, share: float = MEAN_SHARE) -> tuple[tuple[float, float], tuple[float, float]]:
    """((mean eps, mean delta), (partition eps, partition delta)) of a partition stage's budget: the
    one-bit mean round gets ``share`` of both, the centred round what is left, rounded toward less
    spend (``accounting.split_spend``): the two compose by basic composition to at most the stage's."""
    check_epsilon(epsilon)
    (rest_eps, mean_eps), (rest_delta, mean_delta) = split_spend(epsilon, share), split_spend(delta, share)
    return (mean_eps, mean_delta), (rest_eps, rest_delta)


def bucket_bits(n: int, dim: int, k: int, noise_std: float) -> int:
    """The most bits with n / 2^bits >= BUCKET_SDS noise sds and 2^bits (d + 1) <= MAX_LENGTH,
    but at least log2 k + 1 (two buckets per cluster) when the length allows it."""
    most = max(1, min(MAX_BITS, int(math.log2(MAX_LENGTH / (dim + 1))) if dim + 1 <= MAX_LENGTH / 2 else 1))
    fit = int(math.floor(math.log2(max(n / (BUCKET_SDS * max(noise_std, 1e-9)), 2.0))))
    least = min(most, math.ceil(math.log2(max(k, 1))) + 1)
    return max(least, min(most, fit))


def derive_partition(n_expected: int, dim: int, k: int, epsilon: float, delta: float, bound: PublicBound,
                     min_devices: int, max_devices: int | None = None, seed: int = 0, round_id: str = "partition",
                     bits: int | None = None, center: NDArray[np.float64] | None = None,
                     law: SumLaw = DEFAULT_LAW) -> PartitionConfig:
    """A partition round for about n_expected devices (public) at central (epsilon, delta);
    ``center`` (a released point of the unit ball, e.g. ``mean_of``'s) is where the hyperplanes meet;
    ``law`` the secure sum's calibration (``SumLaw``).

    At most ``max_devices`` are decoded (the secure sum's overflow bound);
    by default ``MAX_DEVICES_FACTOR`` x n_expected (at least min_devices):
    the server holds every device's shares while it decodes, and sizes that
    memory by this bound before it opens the round."""
    if n_expected < 1 or dim < 1 or k < 1:
        raise ConfigError(f"partition needs n_expected, dim, k >= 1; got {n_expected}, {dim}, {k}")
    check_epsilon(epsilon)
    if max_devices is None:
        max_devices = max(min_devices, MAX_DEVICES_FACTOR * n_expected)
    if bits is None:
        probe = bucket_sum_params(2, dim, epsilon, delta, min_devices, max_devices, law)
        bits = bucket_bits(n_expected, dim, k, probe.noise_std)
    params = bucket_sum_params(1 << bits, dim, epsilon, delta, min_devices, max_devices, law)
    at = () if center is None else tuple(float(v) for v in np.asarray(center, dtype=np.float64).reshape(-1))
    return PartitionConfig(round_id, k, dim, bound, int(bits), int(seed), params, at)


def codes(ball: NDArray[np.float64], config: PartitionConfig) -> NDArray[np.int64]:
    """Each ball point's bucket: its sign pattern against the public hyperplanes through ``center``."""
    return sign_codes(ball, config.hyperplanes, config.center_array if config.center else None)


def sign_codes(ball: NDArray[np.float64], normals: NDArray[np.float64],
               center: NDArray[np.float64] | None = None) -> NDArray[np.int64]:
    """Each point's sign pattern against the hyperplanes of ``normals`` (dim, bits) through
    ``center`` (None: the origin), as an integer in [0, 2^bits)."""
    x = np.asarray(ball, dtype=np.float64)
    signs = ((x - center if center is not None else x) @ normals) > 0
    return (signs.astype(np.int64) << np.arange(normals.shape[1], dtype=np.int64)).sum(axis=1)


def contributions(points: NDArray[np.float64], config: PartitionConfig) -> NDArray[np.float64]:
    """What each device feeds into the secure sum: (n, 2^bits (d + 1)), its ball
    point and a 1 in its bucket's slot, zeros elsewhere."""
    x = config.bound.to_ball(np.asarray(points, dtype=np.float64))
    if x.ndim != 2 or x.shape[1] != config.dim:
        raise ConfigError(f"points have shape {x.shape}, the round has {config.dim} features")
    return bucket_slots(x, codes(x, config), config.buckets)


def bucket_means(total: NDArray[np.float64], config: PartitionConfig) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The buckets whose noisy count clears ``NOISE_GATE`` noise sds: their means (clipped
    into the ball) and counts. Post-processing of the decoded sum (2^bits (d + 1),)."""
    t = np.asarray(total, dtype=np.float64).reshape(config.buckets, config.dim + 1)
    sums, counts = t[:, : config.dim], t[:, config.dim]
    ok = counts > max(NOISE_GATE * config.secure_sum.noise_std, 1.0)
    means = sums[ok] / counts[ok, None]
    norms = np.linalg.norm(means, axis=1, keepdims=True)
    return means / np.maximum(norms, 1.0), counts[ok]


def mean_of(total: NDArray[np.float64], config: PartitionConfig) -> NDArray[np.float64] | None:
    """The mean of every device's ball point from the decoded sum: all buckets' sums over all their
    counts, clipped into the ball; None when the total count does not clear ``NOISE_GATE`` noise
    sds of the summed counts. Post-processing: a partition round with one bit is a private mean."""
    t = np.asarray(total, dtype=np.float64).reshape(config.buckets, config.dim + 1)
    count = float(t[:, config.dim].sum())
    if count <= max(NOISE_GATE * config.secure_sum.noise_std * math.sqrt(config.buckets), 1.0):
        return None
    mean = t[:, : config.dim].sum(axis=0) / count
    return np.asarray(mean / max(float(np.linalg.norm(mean)), 1.0))


def partition_to_dict(config: PartitionConfig) -> dict[str, Any]:
    """The published config; ``center`` only when it is not the ball's centre (a device that
    predates it reads every config without one as before, and refuses one with it)."""
    out = published(config, NAME)
    if not config.center:
        del out["center"]
    else:
        out["center"] = list(config.center)
    return out


def partition_from_dict(data: dict[str, Any]) -> PartitionConfig:
    """Inverse of ``partition_to_dict``; validates everything again (devices call it)."""
    try:
        fields, bound = unpublished(data)
        params = SecureSumParams(**fields.pop("secure_sum"))
        if "center" in fields and not fields["center"]:
            raise ConfigError("partition center, when published, has one coordinate per feature (the ball's centre is no center)")
        center = tuple(float(v) for v in fields.pop("center", ()))
        return PartitionConfig(bound=bound, secure_sum=params, center=center, **fields)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise ConfigError(f"not a partition config: {exc}") from exc


# The shared half of the partition kind (``common/kinds/__init__.py``).
KIND = shares_kind(NAME, partition_from_dict, partition_to_dict)
