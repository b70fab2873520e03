"""The immutable configuration of one clustering round, and how it is derived.

Everything public about a round (projection, nets, hashes, budget split,
seed) is fixed here; clients and server derive identical objects from it
(``kinds/tree_randomness.py``). ``derive_config`` fills every defaulted parameter
from (n expected, d, k, eps) and documents each choice.

Over 300 lines because every derived parameter carries its reason (and the
paper's section) beside the line that sets it.
"""

from __future__ import annotations

import math
import numbers
import secrets
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Literal, cast

from shoal.common.bounds import PublicBound, published, unpublished
from shoal.common.errors import ConfigError, PrivacyError
from shoal.common.kinds.base import DECODE_CHUNK, ConfigKind, Mixing
from shoal.common.kinds.encoder_rule import Encoder, EncoderChoice, choose_encoder
from shoal.common.mechanisms.local_hashing import LocalHashingParams, optimal_buckets
from shoal.common.mechanisms.privunit import PrivUnitParams
from shoal.common.privacy.accounting import (
    BOUNDS,
    central_guarantee,
    closed_form_epsilon,
    max_local_epsilon,
    numerical_delta,
    spend_left,
)
from shoal.common.privacy.events import (
    ChoiceEvent,
    ComposedEvent,
    NoReportEvent,
    ShuffledEvent,
    local_epsilon,
)

Model = Literal["local", "shuffle"]

NAME = "tree"
ENCODERS: tuple[str, ...] = ("lsh", "nettree")
# What a user may ask for: "auto" is resolved by ``choose_encoder`` before a config exists.
ENCODER_CHOICES: tuple[str, ...] = ("auto",) + ENCODERS
MODELS: tuple[str, ...] = ("local", "shuffle")
# The largest epsilon a round is derived for. Above ~700, e^eps overflows a double in the
# randomisers' calibration (PrivUnit's cap, the secure sum's growth: OverflowError at 711, NaN at
# 709); every local, shuffle and partition estimator fit was checked to work at 500. No privacy is
# left long before it (at eps = 50 a report is e^50 ~ 5e21 times likelier from its own point).
MAX_EPSILON = 500.0


def checked_encoder(encoder: str) -> EncoderChoice:
    """A tree round's ``encoder`` from a string (a request's, a file's): ConfigError unless one of ENCODER_CHOICES."""
    if encoder not in ENCODER_CHOICES:
        raise ConfigError(f"encoder must be one of {ENCODER_CHOICES}, got {encoder!r}")
    return cast(EncoderChoice, encoder)


def checked_hist_only_share(share: object) -> float:
    """A tree round's ``hist_only_share`` (a config's, an override's): ConfigError unless a number in [0, 1)."""
    if isinstance(share, bool) or not isinstance(share, numbers.Real) or not (math.isfinite(share) and 0 <= float(share) < 1):
        raise ConfigError(f"hist_only_share must be a number in [0, 1), got {share!r}")
    return float(share)


def checked_model(model: str) -> Model:
    """A tree or sketch round's ``model`` from a string: ConfigError unless one of MODELS."""
    if model not in MODELS:
        raise ConfigError(f"model must be one of {MODELS}, got {model!r}")
    return cast(Model, model)


TREE_CENTERS: tuple[str, ...] = ("kmeans", "greedy", "greedy-weighted")


@dataclass(frozen=True)
class TreeParams:
    """BUILDTREE / COMPUTETHRESHOLD parameters (seed 004, Alg. 1-2) plus a noise gate.

    ``a`` and ``gamma_steps`` are the paper's a and Gamma; ``noise_z``: a node
    is expanded (and kept in the coreset) only if its count estimate exceeds
    noise_z standard deviations of the oracle's noise (DESIGN.md: stop
    instead of emitting noise); ``max_nodes_per_level`` bounds decoding work.
    """

    a: int = 2
    gamma_steps: int = 20
    noise_z: float = 2.5
    max_nodes_per_level: int = 20000
    # How the coreset's k centers are chosen: weighted k-means (seed 004), or seed 001's
    # greedy on the tree's nodes (their private counts as ball values, nettree only; the
    # centers then come in order, the first k' answer k': ``server/decoders/greedy_order.py``);
    # "greedy-weighted": the same greedy on seed 001's weighted values (measured worse, kept to
    # measure: ``server/decoders/tree/greedy_centers.py``).
    centers: str = "kmeans"

    def __post_init__(self) -> None:
        if self.centers not in TREE_CENTERS:
            raise ConfigError(f"tree centers must be one of {TREE_CENTERS}, got {self.centers!r}")
        if self.a < 1:
            raise ConfigError(f"tree a must be >= 1, got {self.a}")
        if self.gamma_steps < 1:
            raise ConfigError(f"tree gamma_steps must be >= 1, got {self.gamma_steps}")
        if not (math.isfinite(self.noise_z) and self.noise_z >= 0):
            raise ConfigError(f"tree noise_z must be finite and >= 0, got {self.noise_z}")
        if self.max_nodes_per_level < 2:
            raise ConfigError(
                f"tree max_nodes_per_level must be >= 2, got {self.max_nodes_per_level}"
            )


@dataclass(frozen=True)
class RoundConfig:
    """A round's public parameters. Validated on construction; never mutated.

    Budget: a device is a *root* device with probability ``root_share``
    (drawn from OS randomness, independent of its data) and sends one
    PrivUnit report of its point at the full ``epsilon`` at level 0 (the
    round's private mean: the fallback answer and the shrinkage target).
    Every other device (a *tree* device) sends the tree's reports: a
    histogram report (OLH at ``eps_hist`` on its node at one of levels
    1..T) and a vector report (PrivUnit at ``eps_vec`` on its point signed
    by its node's Hadamard column at one of levels 1..T). With
    ``hist_only_share`` h = 0 a tree device sends both and basic
    composition gives eps_hist + eps_vec <= epsilon. With h in (0, 1) a
    tree device sends ONE of them, drawn like the root choice: the
    histogram report alone with probability h, else the vector report
    alone, each at up to the full epsilon (eps_hist, eps_vec <= epsilon).
    At small eps a randomiser's variance grows ~1/eps^2, so one report at
    eps from half the devices has about half the noise of everyone's at
    eps/2 (issue 41: ``tests/bench/results/split_reports.md``). Every
    choice costs nothing (``events.ChoiceEvent``). A zero share or epsilon
    means that report is not sent; ``levels = 0`` makes every device a root
    device (a mean-only round).
    """

    k: int
    dim: int
    epsilon: float
    bound: PublicBound
    encoder: Encoder
    levels: int
    proj_dim: int
    eps_hist: float
    eps_vec: float
    root_share: float
    hist_buckets: int
    hist_pool: int
    vec_columns_log2: int
    seed: int
    n_expected: int
    model: Model = "local"
    delta: float = 0.0
    vec_candidates: int = 0
    vec_cap: int = 0
    root_candidates: int = 0
    root_cap: int = 0
    hist_only_share: float = 0.0
    tree: TreeParams = field(default_factory=TreeParams)
    central_epsilon: float = 0.0
    min_batch: int = 0
    amplification_bound: str = ""
    round_id: str = "local"

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ConfigError(f"k must be >= 1, got {self.k}")
        if self.dim < 1:
            raise ConfigError(f"dim must be >= 1, got {self.dim}")
        if not (math.isfinite(self.epsilon) and self.epsilon > 0):
            raise ConfigError(f"epsilon must be finite and > 0, got {self.epsilon}")
        if self.encoder not in ENCODERS:
            raise ConfigError(f"encoder must be one of {ENCODERS}, got {self.encoder!r}")
        if self.model not in MODELS:
            raise ConfigError(f"model must be one of {MODELS}, got {self.model!r}")
        for name in ("k", "dim", "levels", "proj_dim", "hist_buckets", "hist_pool", "vec_columns_log2", "seed",
                     "n_expected", "vec_candidates", "vec_cap", "root_candidates", "root_cap", "min_batch"):
            v = getattr(self, name)
            if not isinstance(v, numbers.Integral) or isinstance(v, bool):
                raise ConfigError(f"{name} must be an integer, got {v!r}")
        if not 0 <= self.levels <= 40:
            raise ConfigError(f"levels must be in [0, 40], got {self.levels}")
        if not 1 <= self.proj_dim <= self.dim:
            raise ConfigError(f"proj_dim must be in [1, dim={self.dim}], got {self.proj_dim}")
        if self.tree.centers != "kmeans" and self.encoder != "nettree":
            raise ConfigError(f"tree centers {self.tree.centers!r} need the nettree encoder (its levels are balls of "
                              f"halving radius), got {self.encoder!r}")
        if self.encoder == "nettree" and self.proj_dim > 12:
            raise ConfigError(
                f"nettree proj_dim {self.proj_dim} > 12: each node would have 2^{self.proj_dim} children"
            )
        for name in ("eps_hist", "eps_vec"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise ConfigError(f"{name} must be finite and >= 0, got {v}")
        h = checked_hist_only_share(self.hist_only_share)
        if h > 0:
            # One report per tree device: each at most the device's epsilon, compared exactly
            # (the statement's device epsilon is their max: never above the round's).
            if self.levels == 0 or self.eps_hist <= 0 or self.eps_vec <= 0:
                raise ConfigError(f"hist_only_share={h} splits the tree devices between the histogram and the vector "
                                  f"report: it needs levels > 0, eps_hist > 0 and eps_vec > 0, got levels={self.levels}, "
                                  f"eps_hist={self.eps_hist}, eps_vec={self.eps_vec}")
            if max(self.eps_hist, self.eps_vec) > self.epsilon:
                raise ConfigError(f"with hist_only_share={h} each tree report is a device's only one: eps_hist "
                                  f"{self.eps_hist} and eps_vec {self.eps_vec} must each be <= epsilon {self.epsilon}")
        elif self.eps_hist + self.eps_vec > self.epsilon * (1 + 1e-9):
            raise ConfigError(
                f"eps_hist + eps_vec = {self.eps_hist + self.eps_vec} exceeds epsilon {self.epsilon}"
            )
        if self.levels > 0 and self.eps_hist <= 0:
            raise ConfigError(f"levels={self.levels} needs eps_hist > 0 to build a tree")
        if self.eps_vec > 0 and self.dim < 2:
            raise ConfigError("the vector report needs dim >= 2")
        if self.levels == 0 and (self.eps_vec or self.eps_hist):
            raise ConfigError(f"levels=0 is a mean-only round: every device sends the root report, so eps_hist and "
                              f"eps_vec must be 0, got {self.eps_hist} and {self.eps_vec}")
        if self.eps_vec > 0:
            self.vec_params  # noqa: B018 -- builds and checks the codebook's exact ratio
        elif self.vec_candidates or self.vec_cap:
            raise ConfigError(
                f"vec_candidates={self.vec_candidates} and vec_cap={self.vec_cap} need eps_vec > 0"
            )
        if not (math.isfinite(self.root_share) and 0 <= self.root_share <= 1):
            raise ConfigError(f"root_share must be in [0, 1], got {self.root_share}")
        if (self.levels == 0) != (self.root_share == 1):
            raise ConfigError(f"root_share=1 (every device sends only the mean report) exactly when levels=0, got "
                              f"root_share={self.root_share} with levels={self.levels}")
        if self.root_share > 0 and self.dim < 2:
            raise ConfigError("the root report is a PrivUnit vector: it needs dim >= 2 (set root_share=0)")
        if self.root_share > 0:
            self.root_params  # noqa: B018 -- builds and checks the codebook's exact ratio
        elif self.root_candidates or self.root_cap:
            raise ConfigError(
                f"root_candidates={self.root_candidates} and root_cap={self.root_cap} need root_share > 0"
            )
        if not 2 <= self.hist_buckets <= 1 << 20:
            raise ConfigError(f"hist_buckets must be in [2, 2^20], got {self.hist_buckets}")
        if not 1 <= self.hist_pool <= 1 << 16:
            raise ConfigError(f"hist_pool must be in [1, 65536], got {self.hist_pool}")
        if not 4 <= self.vec_columns_log2 <= 20:
            raise ConfigError(f"vec_columns_log2 must be in [4, 20], got {self.vec_columns_log2}")
        if not 0 <= self.seed < 1 << 63:
            raise ConfigError(f"seed must be in [0, 2^63), got {self.seed}")
        if self.n_expected < 1:
            raise ConfigError(f"n_expected must be >= 1, got {self.n_expected}")
        if not 0 <= self.delta < 1:
            raise ConfigError(f"delta must be in [0, 1), got {self.delta}")
        if self.model == "shuffle":
            self._check_shuffle()
        elif self.delta or self.central_epsilon or self.min_batch or self.amplification_bound:
            raise ConfigError("delta, central_epsilon, min_batch and amplification_bound belong to shuffle rounds")
        self.bound.check_dim(self.dim)
        if self.encoder == "lsh" and self.levels > 62:
            raise ConfigError(f"lsh supports at most 62 levels, got {self.levels}")

    @property
    def identity_projection(self) -> bool:
        """nettree without projection: the lattice point *is* a position in the ball."""
        return self.encoder == "nettree" and self.proj_dim == self.dim

    @property
    def hist_params(self) -> LocalHashingParams | None:
        if self.eps_hist <= 0 or self.levels == 0:
            return None
        return LocalHashingParams(self.eps_hist, self.hist_buckets, self.hist_pool)

    def decode_bytes(self, devices: int | None = None) -> int:
        """Memory a decode of ``devices`` reports (default n_expected) needs, in
        bytes: the per-level tables (``LevelAccumulator``) twice (the oracles'
        transforms copy them) and, per report of one chunk read from the store
        (``DECODE_CHUNK``), its decoded vector (three copies of d floats while
        the codebook is replayed) and its columns."""
        n = min(self.n_expected if devices is None else devices, DECODE_CHUNK)
        t, d = self.levels + 1, self.dim
        hist = t * self.hist_pool * self.hist_buckets * 8 if self.levels > 0 and self.eps_hist > 0 else 0
        vec = t * (1 << self.vec_columns_log2) * d * 8 if self.eps_vec > 0 else 0
        return 2 * (hist + vec) + n * (3 * d * 8 + 64)

    @cached_property
    def vec_params(self) -> PrivUnitParams | None:
        if self.eps_vec <= 0:
            return None
        return PrivUnitParams.calibrate(self.dim, self.eps_vec, self.vec_candidates, self.vec_cap)

    @cached_property
    def root_params(self) -> PrivUnitParams | None:
        """The root report's codebook PrivUnit, at the device's full epsilon."""
        if self.root_share <= 0:
            return None
        return PrivUnitParams.calibrate(self.dim, self.epsilon, self.root_candidates, self.root_cap)

    @property
    def predicted_center_error(self) -> float:
        """Predicted squared error of a center of a cluster of n/k devices from
        the vector reports (unit ball): Var(PrivUnit at eps_vec) k^2 2 / n_tree,
        the figure ``derive_config`` compares with 1 to decide whether a tree
        can be found at all. inf for a mean-only round; nan where positions
        come from the lattice alone (no vector report)."""
        if self.levels == 0:
            return math.inf
        vp = self.vec_params
        if vp is None:
            return math.nan
        # Vector reports come from the tree devices that are not hist-only.
        return center_error(vp.expected_sq_norm, self.k, self.n_expected) / ((1 - self.root_share) * (1 - self.hist_only_share))

    @property
    def mean_error(self) -> float:
        """Predicted E||mean estimate - mean||^2 (unit ball) from the root reports
        of n_expected devices: the price of the fallback answer."""
        rp = self.root_params
        if rp is None:
            return math.inf
        return rp.expected_sq_norm / (self.root_share * self.n_expected)

    def _check_shuffle(self) -> None:
        """A shuffle round's claim is re-verified wherever its config is built
        (server, and every device that fetches it): the local epsilon must give
        the published central (eps, delta) for the smallest releasable batch."""
        if not (math.isfinite(self.central_epsilon) and self.central_epsilon > 0):
            raise ConfigError(f"a shuffle round needs central_epsilon > 0, got {self.central_epsilon}")
        if not 0 < self.delta < 1:
            raise ConfigError(f"a shuffle round needs delta in (0, 1), got {self.delta}")
        if self.min_batch < 2:
            raise ConfigError(f"a shuffle round needs min_batch >= 2, got {self.min_batch}")
        if self.amplification_bound not in BOUNDS:
            raise ConfigError(f"amplification_bound must be one of {BOUNDS}, got {self.amplification_bound!r}")
        if self.epsilon < self.central_epsilon * (1 - 1e-9):
            raise ConfigError(f"local epsilon {self.epsilon} below the central {self.central_epsilon}: nothing to amplify")
        if self.amplification_bound == "fmt21-numerical":
            holds = numerical_delta(self.epsilon, self.min_batch, self.central_epsilon) <= self.delta * (1 + 1e-6)
        else:
            try:
                holds = closed_form_epsilon(self.epsilon, self.min_batch, self.delta) <= self.central_epsilon + 1e-9
            except PrivacyError:
                holds = False
        if not holds:
            raise ConfigError(
                f"local epsilon {self.epsilon} shuffled in batches of {self.min_batch} does not give "
                f"({self.central_epsilon}, {self.delta})-DP under {self.amplification_bound}"
            )

    @property
    def privacy_event(self) -> ChoiceEvent:
        """The record of what one device sends; its epsilon is the round's local eps.
        Options, in order: the tree's reports (composed), or with hist_only_share > 0
        the histogram report alone and the vector report alone; last, with probability
        root_share, the root report."""
        hp, vp, rp = self.hist_params, self.vec_params, self.root_params
        root = ComposedEvent((rp.event,)) if rp is not None else ComposedEvent((NoReportEvent(),))
        r, h = self.root_share, self.hist_only_share
        if h > 0:
            assert hp is not None and vp is not None  # __post_init__
            return ChoiceEvent((ComposedEvent((hp.event,)), ComposedEvent((vp.event,)), root),
                               ((1.0 - r) * h, (1.0 - r) * (1.0 - h), r))
        tree = ComposedEvent(
            (
                hp.event if hp is not None else NoReportEvent(),
                vp.event if vp is not None else NoReportEvent(),
            )
        )
        return ChoiceEvent((tree, root), (1.0 - r, r))

    @property
    def device_epsilon(self) -> float:
        return local_epsilon(self.privacy_event)

    @property
    def round_event(self) -> object:
        """What the server's view of the round is: the device record, shuffled or not."""
        if self.model == "shuffle":
            return ShuffledEvent(self.privacy_event, self.min_batch, self.delta, self.amplification_bound)
        return self.privacy_event

    def with_overrides(self, **changes: Any) -> RoundConfig:
        return replace(self, **changes)


# Identity nettree sends no vector report up to this dimension (``derive_config``).
LATTICE_ONLY_MAX_DIM = 2
# One report per tree device (``derive_config``, hist_only_share): the share of the tree devices
# that send only the histogram report, the rest only the vector report. Measured by emulation
# (tests/bench/results/split_reports.md, 3-16 seed pairs per cell): against both reports at half
# the eps, a half gave 0.53-0.99x on the paper generator (d = 100), 0.93-1.00x on letter
# (d = 16), 0.75-1.00x on a skewed box (d = 7); a quarter gave 0.42-0.64x on the paper generator
# but was behind a half on the skewed box (0.80-1.001x) and on letter at eps 1/8. A vector
# report's PrivUnit variance grows with d while OLH's does not, so wide data gives the vector
# reports more devices; WIDE_DIM sits between the measured d = 16 and d = 100.
HIST_ONLY_SHARE = 0.5
HIST_ONLY_SHARE_WIDE = 0.25
WIDE_DIM = 32
# The private mean's error budget (``derive_config``, root_share).
MEAN_FACTOR = 3.0
MIN_ROOT_SHARE = 0.05
MAX_ROOT_SHARE = 0.25


def center_error(vector_variance: float, k: int, devices: int) -> float:
    """Predicted squared error (unit ball) of the center of a cluster of
    devices / k devices located by vector reports of this variance, spread
    over the tree's levels: Var k^2 2 / devices."""
    return vector_variance * k * k * 2 / devices


def duchi_mean_variance(dim: int, epsilon: float) -> float:
    """E||z - x||^2 of Duchi et al.'s L2 mechanism: (pi d / 2)((e^eps+1)/(e^eps-1))^2."""
    e = math.exp(epsilon)
    return math.pi * dim / 2 * ((e + 1) / (e - 1)) ** 2


def derive_config(
    n_expected: int,
    dim: int,
    k: int,
    epsilon: float,
    *,
    encoder: EncoderChoice = "auto",
    bound: PublicBound | None = None,
    seed: int | None = None,
    model: Model = "local",
    delta: float = 0.0,
    min_batch: int = 0,
    amplification_bound: str = "fmt21-numerical",
    **overrides: Any,
) -> RoundConfig:
    """Fill every parameter of a round from (n, d, k, eps).

    Local model: ``epsilon`` is each device's eps (pure LDP). Shuffle model:
    ``epsilon`` and ``delta`` are the central target for the server's view of
    any batch of at least ``min_batch`` shuffled messages; devices randomise at
    the largest eps0 that meets it (``accounting.max_local_epsilon``), and
    every other choice below is made for that eps0.

    Choices (each measured in ``shoal bench``; see README):
    - encoder "auto" (the default): ``choose_encoder`` at the device's eps.
    - nettree projects to d' = min(d, ceil(log2 k) + 3) dimensions (Makarychev
      et al.: O(log k) suffices; each node has 2^d' children); for d <= d'
      there is no projection and lattice points are positions.
    - levels T: lsh ceil(log2 k) + 10 sign bits (two of k random centers share all T bits with probability < k^2 2^-T-1); nettree ceil(log2 n / 2) + 1
      (seed 004, Thm. 20 takes T = 0.5 log n).
    - budget, local model: one report per tree device at the full eps
      (``hist_only_share`` h): the histogram report from h of the tree
      devices, the vector report from the rest; h = 0.5, or 0.25 for
      d >= WIDE_DIM, where the vector sums' noise (which grows with d)
      dominates the centers' error (issue 41, measured above
      HIST_ONLY_SHARE). Shuffle model (and any round given ``vec_share``,
      ``eps_hist`` or ``eps_vec``):
      both reports from every tree device, a quarter of eps to the histogram
      (half at eps <= 2, where the tree itself is hard to find), the rest to
      the vector report, whose noise dominates the centers' error
      (DESIGN.md); the split is not yet measured at a shuffle round's eps0. Identity nettree in d <= 3
      sends no vector report: positions come from the lattice, whose cells
      the tree resolves finely there (3^d children per node). Above d = 3 it
      stays coarse (3^7 = 2187 children in d = 7) and a coarse lattice
      point can be far from its devices: issue 15's held-out data (d = 7,
      clipped tails) gave 1.3-1.6x the one-center cost. There it sends
      vector reports like every other tree round.
    - if even a cluster of n/k devices could not be located within the unit
      ball's scale (predicted center error > 1), T = 0: the whole budget
      estimates the mean, which is then the best private answer.
    - root_share: the fraction of devices that send only the root report
      (PrivUnit at the full eps), sized so that the private mean (the
      fallback answer and the shrinkage target) has at most F times the
      error of the eps-LDP mean of all n devices (Duchi et al.'s
      (pi d / 2)((e^eps+1)/(e^eps-1))^2 / n): root_var / (F duchi), within
      [5%, 25%]. F = MEAN_FACTOR = 3 while the tree's predicted center
      error p is small and slides to 1 as p -> 1 (F = 3 - 2 min(p, 1)):
      near p = 1 the round is close to mean-only and its answer is likely
      the mean, so the mean gets more devices. Issue 15: letter with
      nettree at eps=4 (p = 0.9, a one-point coreset) answered the mean
      alone with 3x the LDP mean's error and missed the one-center bound
      on one seed of three. PrivUnit beats Duchi's variance at every eps, so this is
      0.24-0.25 at eps=1 and 5-14% at eps >= 4. Issue 15: with a fifth of
      the devices at half the budget, the fallback mean's error was ~16x the
      LDP mean's, and on tight data (one-center cost ~0.05 in the unit
      ball) the fallback alone was 1.3-1.6x the one-center cost.
    """
    if n_expected < 1:
        raise ConfigError(f"n_expected must be >= 1, got {n_expected}")
    if dim < 1 or k < 1:
        raise ConfigError(f"dim and k must be >= 1, got dim={dim}, k={k}")
    if not (math.isfinite(epsilon) and 0 < epsilon <= MAX_EPSILON):
        raise ConfigError(f"epsilon must be finite, > 0 and <= {MAX_EPSILON:g} (MAX_EPSILON), got {epsilon}")
    encoder = checked_encoder(encoder)
    bound = bound if bound is not None else PublicBound(radius=1.0)
    shuffle: dict[str, Any] = {}
    model = checked_model(model)
    if model == "shuffle":
        if min_batch < 2:
            raise ConfigError(f"a shuffle round needs min_batch >= 2, got {min_batch}")
        try:
            eps0 = max_local_epsilon(epsilon, delta, min_batch, amplification_bound)
        except PrivacyError as exc:
            raise ConfigError(f"shuffle round: {exc}") from exc
        shuffle = dict(model="shuffle", central_epsilon=float(epsilon), delta=float(delta),
                       min_batch=int(min_batch), amplification_bound=amplification_bound)
        epsilon = eps0
    elif delta or min_batch:
        raise ConfigError(f"delta={delta} and min_batch={min_batch} belong to shuffle rounds")
    if encoder == "auto":
        encoder = choose_encoder(n_expected, dim, k, epsilon)
    logk = math.ceil(math.log2(max(k, 2)))
    if encoder == "nettree":
        proj_dim = min(dim, logk + 3)
        levels = math.ceil(math.log2(max(n_expected, 2)) / 2) + 1
    else:
        proj_dim = dim
        levels = logk + 10
    identity = encoder == "nettree" and proj_dim == dim
    lattice_only = identity and dim <= LATTICE_ONLY_MAX_DIM
    share_given = "vec_share" in overrides
    # A caller who sets the reports' eps (or vec_share) chooses the split itself: both reports unless told.
    budgets_given = share_given or "eps_hist" in overrides or "eps_vec" in overrides
    vec_share = float(overrides.pop("vec_share", 0.0 if lattice_only else (0.5 if epsilon <= 2 else 0.75)))
    if not 0 <= vec_share <= 1:
        raise ConfigError(f"vec_share must be in [0, 1], got {vec_share}")
    if dim < 2:
        vec_share = 0.0
    hist_only = overrides.pop("hist_only_share", None)
    if hist_only is None:
        split = model == "local" and 0 < vec_share < 1 and not budgets_given
        hist_only = (HIST_ONLY_SHARE_WIDE if dim >= WIDE_DIM else HIST_ONLY_SHARE) if split else 0.0
    elif share_given and hist_only:
        raise ConfigError("vec_share splits one tree device's epsilon between its two reports; with hist_only_share > 0 "
                          "each tree device sends one report at the full epsilon: give one of them")
    hist_only = checked_hist_only_share(hist_only)
    if hist_only > 0 and dim < 2:
        raise ConfigError("hist_only_share > 0 sends vector reports: it needs dim >= 2")
    if hist_only > 0:
        # One report per tree device, each at the device's whole epsilon (the ChoiceEvent's max).
        eps_vec = eps_hist = epsilon
    else:
        eps_vec = epsilon * vec_share
        # Rounded toward less spend: eps_hist + eps_vec <= epsilon exactly (``spend_left``), so the
        # device's composed eps is epsilon itself, the eps0 whose statement ``max_local_epsilon`` checked.
        eps_hist = spend_left(epsilon, eps_vec)
    root_share = 0.0
    predicted = 0.0
    if eps_vec > 0:
        var_v = PrivUnitParams.calibrate(dim, eps_vec).expected_sq_norm
        # Before root devices: what the whole population's vector reporters could locate.
        predicted = center_error(var_v, k, n_expected) / (1 - hist_only)
    if dim >= 2:
        root_var = PrivUnitParams.calibrate(dim, epsilon).expected_sq_norm
        # The nearer the tree is to locating nothing (predicted -> 1, where the round becomes
        # mean-only), the likelier the answer is the mean: its error factor slides from
        # MEAN_FACTOR down to 1 (the eps-LDP mean of all n devices).
        factor = MEAN_FACTOR - (MEAN_FACTOR - 1) * min(predicted, 1.0)
        root_share = min(MAX_ROOT_SHARE, max(MIN_ROOT_SHARE, root_var / (factor * duchi_mean_variance(dim, epsilon))))
    if eps_vec > 0:
        predicted_center_error = predicted / (1 - root_share)
        if predicted_center_error > 1.0 and not identity:
            levels = 0
    if eps_hist <= 0 and levels > 0:
        levels = 0
    if levels == 0:
        if dim < 2:
            raise ConfigError("a mean-only round (levels=0) needs dim >= 2: use encoder='nettree' for 1-D data")
        eps_vec, eps_hist, root_share, hist_only = 0.0, 0.0, 1.0, 0.0
    per_level = n_expected / (levels + 1)
    columns_log2 = int(min(16, max(10, math.ceil(math.log2(max(per_level, 2))) + 1)))
    params: dict[str, Any] = dict(
        k=k,
        dim=dim,
        epsilon=float(epsilon),
        bound=bound,
        encoder=encoder,
        levels=levels,
        proj_dim=proj_dim,
        eps_hist=float(eps_hist),
        eps_vec=float(eps_vec),
        root_share=float(root_share),
        hist_only_share=hist_only,
        hist_buckets=optimal_buckets(eps_hist) if eps_hist > 0 else 2,
        hist_pool=1024,
        vec_columns_log2=columns_log2,
        seed=secrets.randbits(63) if seed is None else int(seed),
        n_expected=int(n_expected),
        **shuffle,
    )
    params.update(overrides)
    if params["eps_vec"] > 0 and not ("vec_candidates" in overrides and "vec_cap" in overrides):
        vp = PrivUnitParams.calibrate(dim, params["eps_vec"], overrides.get("vec_candidates"))
        params["vec_candidates"], params["vec_cap"] = vp.candidates, vp.cap
    if params["root_share"] > 0 and not ("root_candidates" in overrides and "root_cap" in overrides):
        rp = PrivUnitParams.calibrate(dim, params["epsilon"], overrides.get("root_candidates"))
        params["root_candidates"], params["root_cap"] = rp.candidates, rp.cap
    config = RoundConfig(**params)
    if shuffle:  # the statement's own number (``central_guarantee``), compared without tolerance
        stated = central_guarantee(config.round_event)[0]
        if stated > shuffle["central_epsilon"]:
            raise ConfigError(f"shuffle round: the statement would report central eps {stated!r} above the "
                              f"requested {shuffle['central_epsilon']!r} (tuning overrides the derived eps0 or split?)")
    return config


def config_to_dict(config: RoundConfig) -> dict[str, Any]:
    """A JSON-ready dict of every public parameter (the published round config)."""
    return published(config, NAME)


def config_from_dict(data: dict[str, Any]) -> RoundConfig:
    """Inverse of ``config_to_dict``; validates everything again."""
    try:
        fields, bound = unpublished(data)
        tree = TreeParams(**fields.pop("tree", {}))
        return RoundConfig(bound=bound, tree=tree, **fields)
    except (KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"not a round config: {exc}") from exc


# The shared half of the tree kind (``common/kinds/__init__.py``): seed 004's one-round
# net-tree / LSH-tree protocol. A shuffle round's central guarantee assumes
# batches of its min_batch (0 for local rounds).
KIND = ConfigKind(NAME, parse=lambda data: config_from_dict(dict(data)), dump=config_to_dict,
                 event=lambda config: config.round_event, mixing=lambda config: Mixing(config.min_batch, True, 1))
