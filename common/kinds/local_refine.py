"""The ``local_refine`` round: one Lloyd step on fresh devices, each report eps-LDP.

The local-model sibling of ``kinds/refine.py`` (which sums through the
shuffler and so has no local guarantee). After a local tree round is
decoded the server publishes its k centers; each device that did *not*
answer that round assigns itself to its nearest center and sends one
codebook PrivUnit report (``privunit.py``) of a vector in k (d + 1)
dimensions that is zero except in its center's block, where it holds
(a x, b): its ball point scaled by a and a count weight b, with
a^2 + b^2 = 1 (so the vector lies in the unit ball). The server sums the
decoded reports: block j's first d coordinates estimate a S_j (the sum of
the points nearest center j), its last b N_j (their number), both
unbiased; the new center is S_j / N_j.

Why one k (d + 1)-dimensional report and not an index and a vector: the
center index would need its own share of eps, and a vector report
weighted by a randomised index carries every device's noise times the
index estimator's variance (k-RR at eps 1/2, k = 8: x 20). The block
vector spends the whole eps once: PrivUnit's E||Z||^2 grows linearly in
the dimension (5123 at k (d + 1) = 808, eps 1, against 632 at d = 100),
so each block gets about one d-dimensional report's noise. Per center the
squared error is about E||Z||^2 n / (k (d + 1) a^2 N_j^2) ~ k^2 V_d / n at
balanced clusters. The count weight minimises d / a^2 + 1 / b^2 (the
sum's and the count's share of the error): a^2 = sqrt(d) / (sqrt(d) + 1).

Fresh devices: a device that answered the parent round refuses this one
(``client/kinds/local_refine.py`` checks its ledger), so the pair is a
parallel composition: each device's one report is eps-LDP for its round's
eps. Splitting a population between a tree round and a refine round beats
composing both on every device because PrivUnit's variance falls as
1 / eps^2 below eps ~ 2 (2510 at eps 0.5 against 632 at eps 1, d = 100).

Shrinkage: each center moves from its parent toward the Lloyd mean by the
James-Stein factor of the move against the mean's (public) noise
(``refined_centers``), so a center the tree already placed well stays.

Measured (numpy model of the same reports, ``deploy/simulation/fresh_devices.py``;
seed 004's generator n = 1e6, d = 100, k = 8, eps 1, seeds 0-2; 70% of the
devices in the tree round, 30% here): k-means cost / n in the unit ball
0.103 / 0.109 / 0.110 (0.135 / 0.135 / 0.132 without shrinkage) where one
tree round on all devices gives 0.197 / 0.277 / 0.238. Where it does not
pay (``refine_devices``): n = 1e5 at eps 4 the tree on 70% of the
devices loses a cluster (0.200 against 0.134 over seeds 0-2), and at
n = 1e6, eps 4 the tree alone is as good (0.0103 unshrunk against 0.0092).

Pure math, no I/O; split candidates as in ``kinds/refine.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shoal.common.bounds import PublicBound
from shoal.common.clipping import clip_to_ball
from shoal.common.errors import ConfigError
from shoal.common.kinds.base import ConfigKind, Mixing, decode_chunk_rows
from shoal.common.kinds.refine import (
    NOISE_GATE,
    centers_config_from_dict,
    centers_config_to_dict,
    check_centers,
    split_candidates,
)
from shoal.common.kinds.tree import derive_config
from shoal.common.mechanisms.privunit import PrivUnitParams, decode
from shoal.common.privacy.events import PrivUnitEvent
from shoal.common.randomness import public_stream

NAME = "local_refine"
MAX_BLOCK_DIM = 1 << 15  # k (d + 1) at most: a device draws N candidates of this dimension
FRESH_SHARE = 0.3  # the share of a population the simulator and the bench keep for the refine round
# A refine round is worth its fresh devices when its predicted center error is
# at most this share of the tree round's on all devices (``refine_devices``).
LOCAL_REFINE_GAIN = 0.7

CODEBOOK_LABEL = "shoal/v1/local-refine/privunit-key"


def count_weight(dim: int) -> float:
    """b^2, the count's share of the block's unit norm: 1 / (sqrt(d) + 1)
    minimises the per-center error d / a^2 + 1 / b^2 (module docstring)."""
    return 1.0 / (math.sqrt(dim) + 1.0)


@dataclass(frozen=True)
class LocalRefineConfig:
    """Public parameters of a local refine round: the parent's centers, the
    count weight b^2 and the PrivUnit randomiser in k (d + 1) dimensions."""

    round_id: str
    parent_id: str
    k: int
    dim: int
    bound: PublicBound
    centers: tuple[tuple[float, ...], ...]
    privunit: PrivUnitParams
    seed: int  # public: the codebook key
    count_weight: float
    keep: int = 0  # > 0: the decode reduces the k candidates to this many centers (split rounds)

    def __post_init__(self) -> None:
        if self.k * (self.dim + 1) > MAX_BLOCK_DIM:
            raise ConfigError(f"local refine reports have k (d + 1) = {self.k * (self.dim + 1)} dimensions, "
                              f"over {MAX_BLOCK_DIM}: lower k or the dimension")
        check_centers("local refine", self.k, self.dim, self.keep, self.centers)
        if self.privunit.dim != self.k * (self.dim + 1):
            raise ConfigError(f"local refine PrivUnit has dim {self.privunit.dim}, expected k (d + 1) = "
                              f"{self.k * (self.dim + 1)}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed < 1 << 63:
            raise ConfigError(f"local refine seed must be an integer in [0, 2^63), got {self.seed!r}")
        if not (isinstance(self.count_weight, float) and 0.0 < self.count_weight < 1.0):
            raise ConfigError(f"local refine count_weight must be a float in (0, 1), got {self.count_weight!r}")
        self.bound.check_dim(self.dim)

    @property
    def epsilon(self) -> float:
        return self.privunit.epsilon

    @property
    def codebook_key(self) -> int:
        """The PrivUnit codebook key: word 0 of the public stream (seed,
        "shoal/v1/local-refine/privunit-key") (``common/randomness/public_stream.py``)."""
        return public_stream.key64(self.seed, CODEBOOK_LABEL)

    @property
    def center_array(self) -> NDArray[np.float64]:
        return np.asarray(self.centers, dtype=np.float64)

    @property
    def event(self) -> PrivUnitEvent:
        return self.privunit.event

    def decode_bytes(self, devices: int | None = None) -> int:
        """Memory a decode needs, in bytes: one chunk of stored rows (two words
        each, ``DECODE_CHUNK``), one batch of decoded reports and the sum."""
        n = decode_chunk_rows(16) if devices is None else min(devices, decode_chunk_rows(16))
        return 16 * n + 8 * ((1 << 12) + 1) * self.privunit.dim


def derive_local_refine(parent_id: str, ball_centers: NDArray[np.float64], bound: PublicBound, epsilon: float,
                        seed: int, round_id: str = "local_refine", split: int = 1) -> LocalRefineConfig:
    """A local refine round at ``epsilon`` per device on the parent's ball
    centers (k, d); ``split`` candidates per center as in ``kinds/refine.py``."""
    if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
        raise ConfigError(f"local refine epsilon must be finite and > 0, got {epsilon!r}")
    c = clip_to_ball(np.asarray(ball_centers, dtype=np.float64))
    k, d = c.shape
    candidates = split_candidates(c, split, seed)
    blocks = candidates.shape[0] * (d + 1)
    if blocks > MAX_BLOCK_DIM:
        raise ConfigError(f"local refine reports would have k (d + 1) = {blocks} dimensions, over {MAX_BLOCK_DIM}")
    return LocalRefineConfig(round_id, parent_id, candidates.shape[0], d, bound, tuple(map(tuple, candidates.tolist())),
                             PrivUnitParams.calibrate(blocks, float(epsilon)), int(seed), count_weight(d),
                             keep=k if split > 1 else 0)


def block_vectors(points: NDArray[np.float64], config: LocalRefineConfig) -> NDArray[np.float64]:
    """(n, k (d + 1)): each device's (a x, b) in the block of its nearest center
    (ball coordinates), zeros elsewhere; every row has norm <= 1."""
    x = config.bound.to_ball(np.asarray(points, dtype=np.float64))
    if x.ndim != 2 or x.shape[1] != config.dim:
        raise ConfigError(f"points have shape {x.shape}, the round takes (n, {config.dim})")
    c = config.center_array
    labels = np.argmin((x * x).sum(1)[:, None] - 2 * x @ c.T + (c * c).sum(1)[None, :], axis=1)
    out = np.zeros((x.shape[0], config.k, config.dim + 1))
    rows = np.arange(x.shape[0])
    out[rows, labels, : config.dim] = math.sqrt(1.0 - config.count_weight) * x
    out[rows, labels, config.dim] = math.sqrt(config.count_weight)
    return out.reshape(x.shape[0], -1)


def decoded_sum(nonces: NDArray[np.uint64], index: NDArray[np.int64], config: LocalRefineConfig,
                chunk: int = 1 << 12) -> NDArray[np.float64]:
    """The sum of the reports' unbiased decodes (k (d + 1),), a chunk at a time."""
    total = np.zeros(config.privunit.dim)
    for lo in range(0, index.shape[0], chunk):
        total += decode(nonces[lo : lo + chunk], index[lo : lo + chunk], config.privunit, config.codebook_key).sum(axis=0)
    return total


def count_noise_sd(devices: int, config: LocalRefineConfig) -> float:
    """The sd of one block's count estimate: each decoded coordinate's variance
    is about E||Z||^2 / (k (d + 1)) per device, divided by b^2."""
    per = config.privunit.expected_sq_norm / config.privunit.dim
    return math.sqrt(max(devices, 1) * per / config.count_weight)


def refined_centers(total: NDArray[np.float64], devices: int, config: LocalRefineConfig,
                    shrink: bool = True) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Ball centers, noisy sizes and each center's shrink factor from the summed
    decodes.

    The Lloyd step's estimate is m_j = S_j / N_j. A block whose noisy count is
    below ``NOISE_GATE`` noise sds keeps the parent's center (a mean of noise
    would be worse). Others move by the James-Stein factor
    lam_j = max(0, 1 - E||e_j||^2 / ||m_j - c_j||^2) toward m_j from the parent
    center c_j, where E||e_j||^2 = sigma^2 (d / a^2 + ||m_j||^2 / b^2) / N_j^2 is
    the estimate's noise (sigma^2: one summed coordinate's variance, public):
    when the move is not larger than the noise the parent's center stays, so
    the step is not worse than its parent beyond noise. Means are clipped into
    the bound's domain."""
    t = np.asarray(total, dtype=np.float64).reshape(config.k, config.dim + 1)
    a2, b2 = 1.0 - config.count_weight, config.count_weight
    sums, counts = t[:, : config.dim] / math.sqrt(a2), t[:, config.dim] / math.sqrt(b2)
    ok = counts > max(NOISE_GATE * count_noise_sd(devices, config), 1.0)
    safe = np.where(ok, counts, 1.0)
    means = sums / safe[:, None]
    parent = config.center_array
    sigma2 = max(devices, 1) * config.privunit.expected_sq_norm / config.privunit.dim
    noise = sigma2 * (config.dim / a2 + np.minimum((means * means).sum(1), 1.0) / b2) / safe**2  # true means lie in the ball
    move = ((means - parent) ** 2).sum(1)
    lam = np.clip(1.0 - noise / np.maximum(move, 1e-300), 0.0, 1.0) if shrink else np.ones(config.k)
    lam = np.where(ok, lam, 0.0)
    centers = parent + lam[:, None] * (means - parent)
    return config.bound.project_ball(centers), np.maximum(counts, 0.0), lam


def predicted_refine_error(devices: int, dim: int, k: int, epsilon: float) -> float:
    """Expected squared error of one refined center (unit ball) at balanced
    clusters: E||Z||^2 / D per coordinate, times (sqrt(d) + 1)^2 (the sum's and
    the count's error at the best count weight), times k^2 / devices."""
    blocks = k * (dim + 1)
    if blocks > MAX_BLOCK_DIM or devices < 1:
        return math.inf
    per = PrivUnitParams.calibrate(blocks, float(epsilon)).expected_sq_norm / blocks
    return per * (math.sqrt(dim) + 1.0) ** 2 * k * k / devices


def refine_devices(n: int, dim: int, k: int, epsilon: float) -> float:
    """The share of a local-model population to keep for a local refine round,
    from public parameters only: ``FRESH_SHARE`` when the tree round on the
    other devices still predicts where the clusters are (a finite center
    error, ``derive_config``) and the refine round's predicted error is at
    most ``LOCAL_REFINE_GAIN`` of the tree's on all n devices; else 0 (one
    tree round on everybody). The tree's prediction is the decoder's noise
    model; where the positions come from the lattice alone (nettree, no
    prediction) the rule keeps the single round.

    The threshold comes from these cells (predicted refine / tree error ->
    measured, seeds 0-2, unshrunk): paper n=1e6 eps 1 (0.38) and 2 (0.41)
    and the skewed box d=7 eps 2 (0.67) win; paper n=1e5 eps 4 (1.07) and
    n=1e6 eps 4 (1.08) lose; n=1e5 eps 8 (1.18) and the skewed box eps 4
    (1.6) win but lie beyond cells that lose, so the rule stops at 0.7."""
    tree_all = derive_config(n, dim, k, epsilon, seed=0).predicted_center_error
    tree_part = derive_config(max(1, int((1 - FRESH_SHARE) * n)), dim, k, epsilon, seed=0).predicted_center_error
    if not (math.isfinite(tree_all) and math.isfinite(tree_part)):
        return 0.0
    refine = predicted_refine_error(int(FRESH_SHARE * n), dim, k, epsilon)
    return FRESH_SHARE if refine <= LOCAL_REFINE_GAIN * tree_all else 0.0


def local_refine_to_dict(config: LocalRefineConfig) -> dict[str, Any]:
    return centers_config_to_dict(config, NAME)


def local_refine_from_dict(data: dict[str, Any]) -> LocalRefineConfig:
    """Inverse of ``local_refine_to_dict``; validates everything again (devices call it)."""
    config: LocalRefineConfig = centers_config_from_dict(data, LocalRefineConfig, "privunit", PrivUnitParams,
                                                         "local refine")
    return config


# The shared half of the local refine kind (``common/kinds/__init__.py``): reports are
# eps-LDP on their own, so a shuffler may release them in any batch.
KIND = ConfigKind(NAME, parse=lambda data: local_refine_from_dict(dict(data)), dump=local_refine_to_dict,
                  event=lambda config: config.event, mixing=lambda config: Mixing(0, True, 1))
