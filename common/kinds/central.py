"""Central-model k-means (seeds 000 and 003): public parameters and privacy.

A curator (the server, or a user's own process) holds the raw points and
releases centers with central (eps, delta)-DP for adding or removing one
point. The algorithms share one pipeline (``server/decoders/central/``):

1. a public projection to d' dimensions (seed 000, Step 1: JL with d' =
   ceil(ln(n) / 2) as its experiments, public randomness from the seed);
   none when d <= d' already;
2. private maximum coverage over the cells of randomly shifted grids, fine
   to coarse (seed 000, Alg. 1-2; seed 003, Alg. 2's loop): ``picks`` cells
   per grid by the exponential mechanism on the not-yet-covered points,
   the exponentially many empty cells as one block (seed 000's trick);
3. every point moved to its nearest chosen cell center, the cell counts
   released with discrete Laplace noise (seed 000, Step 3; seed 003, l. 10)
   and clustered without privacy (weighted k-means++ and Lloyd);
4. the lift (seed 000, Step 4): the points partitioned by the proxy's
   centers, each part's size and sum released with discrete Laplace and
   discrete Gaussian noise (``noisy_average.py``), center = sum / size;
   ``lift_steps`` - 1 more Lloyd steps in the original space (seed 000's
   experiments run one; ``default_lift_steps``), the lift's budget one
   zCDP budget over its steps (``noisy_average.calibrate(releases=...)``).
   Seed 003 has no lift when nothing is projected: its centers are the
   proxy's. shoal ends it with Lloyd steps from the proxy's k centers all
   the same (``UNPROJECTED_LIFT_SPLIT``, issue 41), except for k-median,
   where the proxy stays the answer.

The two differ in what their papers fix: the budget split (seed 003: half
greedy, half counts) and the lift (seed 003 has none when nothing is
projected). Both account for the greedy by seed 003's Lemma 6 (Gupta et
al.'s set-cover argument: per-pick weight exp(eps' gain) with eps' =
eps / (2 ln(e / delta))), which gives a 27% larger eps' at delta = 1e-6
than seed 000's Lemma 17 (eps = e eps_E ln(1/delta) / 2) for the same
guarantee; Lemma 17 adapts the same argument.

A third, ``gridhist`` (the default for k-means except in d <= 2,
``choose_algorithm``), is seed 000's pipeline with step 2 replaced by a
thresholded Gaussian histogram of the grid cells at 8 sides
(``threshold_histogram.py``): every cell whose noisy count of uncovered
points passes the threshold is a candidate.

A fourth, ``greedy-001`` (issue 18), is seed 001's greedy (La Tour,
Henzinger, Saulpic; Mettu and Plaxton's incremental algorithm on public
net balls whose values are released by the same thresholded histogram,
weighted: ``server/decoders/central/greedy.py``): its centers come in an
order whose first k' answer k' <= k, and the counts' budget pays for a
private elbow curve (the cost of every k') instead. k-median runs where
nothing is projected. Not a default: it is chosen by name.

A fifth, ``lsh-partition`` (issue 41), is the shuffle model's partition stage
(``kinds/partition.py``, ``kinds/refine.py``) run by the curator with central
noise: a private mean of all points, every point's bucket under public
hyperplanes through that mean (2^bits buckets), each bucket's noisy size and
sum, weighted k-means++ and Lloyd on the kept buckets' means, then Lloyd
steps in the original space: the first against two candidates per center
(the split of ``kinds/refine.py``, reduced back to k), the rest shrunk
(``lift.shrunk_lloyd_step``). Every release is a noisy average
(``noisy_average.py``) and the stage is one zCDP budget of ``units`` unit
releases (``PartitionStage``): a release of m units is m unit releases
summed (post-processing) with its size drawn once at m units' eps, so the
mean, the partition and the steps get unequal shares of one budget.
``auto`` takes it wherever the shuffle model's first round is a partition
round (``kinds.refine.first_round``: the tree would locate nothing), so the
curator runs the shuffle model's own stage with one central draw per release
where the shuffle adds a distributed noise per device.

Over 300 lines on purpose: the four algorithms' public parameters, their
budget rules, the curator's event record and the round config are kept in
one module, so one file says what a central run spends and why.

Nothing here reads data: ``derive_central`` needs only public numbers
(``n`` is the expected size the operator publishes, as both papers treat n).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from shoal.common.bounds import PublicBound, published, unpublished
from shoal.common.errors import ConfigError, PrivacyError
from shoal.common.kinds.base import MAX_RECORDS, ConfigKind, Mixing
from shoal.common.mechanisms.distributed_noise import rho_for_tight
from shoal.common.mechanisms.exact_sampling import laplace_scale_fraction
from shoal.common.mechanisms.threshold_histogram import (
    HistogramNoise,
    calibrate_histogram,
    histogram_guarantee,
)
from shoal.common.privacy.accounting import spend_left

ALGORITHMS: tuple[str, ...] = ("maxcover-000", "maxcover-003", "gridhist", "greedy-001", "lsh-partition")
OBJECTIVES: tuple[str, ...] = ("kmeans", "kmedian")
DEFAULT_ALGORITHM = "auto"  # ``choose_algorithm``
MAX_UNPROJECTED = 8  # seed 003 without projection only up to this dimension (grids in R^d)
GREEDY_MAX_DIM = 2  # the default runs seed 003's greedy (k-means) only up to this dimension (``choose_algorithm``)
GREEDY_MARGIN = 3.0  # the greedy is budgeted to see clusters of n / (GREEDY_MARGIN k) points (``_split``)
REFERENCE_SIDE = 0.25  # ... in a cell of this side (``_split``)
COUNT_SHARE = 0.05  # of eps, for the proxy's counts (seed 000): they only weigh cells for a k-means
# The lift's Lloyd steps when the caller does not fix them (``default_lift_steps``). Each step after
# the first averages its release with the last where Lloyd has converged and follows the new mean
# where it has not (``lift.shrunk_lloyd_step``), and the steps share one zCDP budget, so a converged
# step costs little. Projected runs: as many steps (at most PROJECTED_MAX_STEPS) as keep one release's
# noise on an average cluster's mean (n / k rows) within LIFT_STEP_NOISE of squared radius: the first
# release must still tell the clusters apart (paper generator n = 1e4, eps 0.5: 0.033 with one step,
# 0.09 with two; eps 1: 0.0052 -> 0.0039 with two; letter eps 1: 0.050 -> 0.0455 with two; a third
# step measured 0.045 on letter but 0.020 against 0.017 on the Balcan et al. mixture at eps 4).
# Unprojected seed 003 starts from the proxy's centers and gates its first step, and takes Su et al.'s
# count (``su_iterations``): the overlapping set eps 1 / 4: 0.0836 / 0.0793 with one step, 0.0789 / 0.0766
# with 4 / 7. Until issue 41 every step had its own (eps / T, delta / T) and a second step cost the paper
# generator up to 4x (tests/bench/results/central_lift.md).
PROJECTED_MAX_STEPS = 2
LIFT_STEP_NOISE = 0.006
SU_RHO = 0.225  # Su et al. 2017's constant in the iteration rule (diffprivlib's KMeans uses the same)
SU_MIN_STEPS, SU_MAX_STEPS = 2, 7
# Seed 003 unprojected (k-means): the cover's cells alone were the answer until issue 41, and on broad,
# overlapping, correlated clusters (``datasets.overlapping_mixture``, n = 23,000, d = 6, k = 5, 10 seeds)
# they cost 0.101 at eps 1 against diffprivlib's noisy Lloyd 0.079; one Lloyd step from the proxy's k
# centers at (0.4, 0.3, 0.3): 0.083; three zCDP-composed steps at this split: 0.0785
# (tests/bench/results/central_lift.md).
UNPROJECTED_LIFT_SPLIT = (0.3, 0.2, 0.5)
GROWTH = 2  # grid side ratio between consecutive levels (seed 000's 1 + eps with eps = 1)
SHIFTS = 2  # randomly shifted grids per level: a cluster cut by one grid's cell wall sits whole in another's
PROJECTION_SLACK = 1.5  # projected points are divided by this, then clipped to the unit ball
HIST_LEVELS = 8  # gridhist: grid sides 2, 1, ..., 2^-6 (every level costs zCDP; ``_gridhist_share``)
HIST_GAP = 2.5  # gridhist: the threshold is at most n / (HIST_GAP k) points (``_gridhist_share``)
# greedy-001 (seed 001, ``server/decoders/central/greedy.py``): ball radii 2 .. 2^(1 - GREEDY_LEVELS), each
# point's weight in a ball in units of 1 / GREEDY_Q, and the budget split (values, elbow, lift) with a
# projection, or (values, elbow) without one.
GREEDY_LEVELS = 8
GREEDY_Q = 16
GREEDY_SIDE = 1.0  # a level's cube has side GREEDY_SIDE r / sqrt(d'): half-diagonal r / 2, a typical point weighs ~1/2
GREEDY_SPLIT = (0.45, 0.1, 0.45)
GREEDY_SPLIT_UNPROJECTED = (0.8, 0.2, 0.0)
HISTOGRAM_RULES = ("threshold-gaussian", "seed001-values")  # cover rules whose delta comes from a HistogramNoise
PARTITION_RULE = "lift-units"  # the partition stage's cover: its releases are units of the lift's budget
# The partition stage's reference for the sizes' noise (``reference_size_sd``): a discrete Laplace at this
# share of eps, as the noisy average released sizes until 2026-11-28 and as the stage's bits and bucket
# gate were measured. The sizes are now a weighted coordinate of the Gaussian sum (``noisy_average``),
# with far less noise; gated at NOISE_GATE sds of that alone, buckets of a few dozen points, whose
# means are mostly noise, joined the start (letter, 20 draws, eps 0.5 / 1: 0.0468 / 0.0417 against
# 0.0450 / 0.0403 with the reference gate, and 0.0459 / 0.0409 before the change; the overlapping set
# 10 x 3 at eps 0.5: 0.0770 against 0.0767). Public thresholds: no privacy rests on them.
REFERENCE_SIZE_SHARE = 0.1
# The partition stage's units of one zCDP budget: the mean, the partition, all Lloyd steps together
# (each step round(STAGE_UNITS[2] / steps) units). Chosen on a numpy model of the stage before its
# test against the mean and its gate on the split's parts (mean cost / n at eps 0.5 / 1 / 2 / 4): the
# overlapping clusters (seeds 0-9 x 3 draws) (1, 19, 20) 0.0781 / 0.0774 / 0.0773 / 0.0760, (1, 9, 30)
# 0.0783 / 0.0774 / 0.0764 / 0.0756; letter (seeds 0-2 x 3) 0.0521 / 0.0446 / 0.0406 / 0.0378 and
# 0.0501 / 0.0436 / 0.0394 / 0.0375.
STAGE_UNITS = (1, 9, 30)
# At least 64 buckets (``partition_bits``): hyperplanes through the mean put two separated clusters in
# one bucket with probability (1 - angle / pi)^bits, and the noise rule alone gave 4 bits where the sizes'
# noise is large. The numpy model (as above): the paper generator (n = 1e4, d = 6, eps 0.5 / 1) 4 bits
# 0.0109 / 0.0101, 6 bits 0.0018 / 0.0006; the overlapping clusters 0.0783 / 0.0774 / 0.0764 / 0.0756 at
# the noise rule's 4-6 bits, 0.0777 / 0.0769 / 0.0762 / 0.0756 at 6; letter 6 bits either way (7: 0.0503 /
# 0.0438 / 0.0396 / 0.0376, 8: 0.0532 / 0.0449 / 0.0400 / 0.0374).
PARTITION_MIN_BITS = 6
# ``auto`` takes the partition stage up to this dimension (``choose_algorithm``): its split step cuts a
# bucket that holds two clusters by a random hyperplane through the bucket's noisy mean, and the
# clusters' offset along a random direction shrinks as 1 / sqrt(d) while that mean's noise does not.
# The paper generator (n = 1e4, k = 8, eps 1; 5 seeds x 20 private draws each, cost > 0.01 where one
# center costs 0.86): d = 6, 16, 32, 64 none; d = 100: 2 of 20 on one seed (40 draws: 6, all 0.137:
# two clusters left under one center). Real data sets are 2-16 features here; above, ``gridhist``.
PARTITION_AUTO_MAX_DIM = 32
# The partition stage's second split step (``PartitionStage.split_steps``): with at least this many
# Lloyd steps, the first two are split steps. Hyperplanes through the mean can put three tight clusters
# in one bucket; one split separates at most two of them, and the Lloyd steps after it cannot pull a
# center off the pair it sits between (the paper generator, n = 1e5, d = 5, eps 1, one draw in 12:
# 0.077 where the others cost 1.0e-4). A second split, its parts reduced to k again, moves the spare
# center there. Measured (``partition_stage``, mean k-means cost / n, seeds x draws as given, one split ->
# two where the stage has >= 3 steps): the paper generator n = 1e5, d = 3, eps 0.5 / 1 / 4 (3 x 3):
# 0.0036 / 0.0036 / 0.0012 -> 1.11e-4 / 1.03e-4 / 9.8e-5; d = 5: 0.0037 / 0.0086 / 0.0086 -> 1.14e-4 /
# 1.04e-4 / 1.00e-4; n = 1e4, d = 3, eps 4 (3 x 3): 0.0036 -> 1.23e-4; d = 6, eps 4 (5 x 4): 6.7e-4 ->
# 1.30e-4; n = 1e5, d = 16, eps 4: 1.005e-4 either way; the overlapping generator (10 x 5) eps 1 / 2:
# 0.07585 / 0.07551 -> 0.07593 / 0.07552. With two steps the second stays a Lloyd step: two splits
# there cost letter 0.0449 -> 0.0489 at eps 0.5 and the paper generator at n = 1e4, d = 6 / 16, eps
# 0.5 / 1 up to 2.2x (their first release must still tell the clusters apart; a third step at a third
# of the budget each cost them 1.3-1.6x).
SECOND_SPLIT_FROM_STEPS = 3
# ... and in d <= PARTITION_MIN_STEPS_MAX_DIM the stage takes at least PARTITION_MIN_STEPS steps (so it always
# splits twice), where Su et al.'s count gives 2: three clusters in one bucket are a low-dimension event
# (the paper generator at n = 1e4, 12 seeds x 2 draws, draws costing > 30x the rest with 2 steps: d = 3
# eps 0.5 / 1 2 and 1 of 24, d = 6 3 and 2, d = 10 1 of 16 and 1 of 24 (0.041, 0.152); d = 13 and d = 16
# none in 24). Mean (median) cost / n with 2 -> 4 steps: d = 3 eps 1 7.2e-4 (2.2e-4) -> 2.9e-4 (2.9e-4),
# d = 6 eps 0.5 / 1 2.8e-3 / 1.9e-3 -> 1.3e-3 / 4.1e-4 (medians 7.8e-4 / 3.4e-4 -> 1.3e-3 / 4.1e-4: a
# draw without the merge pays 1.2-1.6x for the first release's smaller share), d = 10 eps 0.5 / 1
# 3.7e-3 / 6.7e-3 -> 1.8e-3 / 5.8e-4. Broad clusters converge over more steps: the overlapping
# generator at eps 0.5 (10 x 3) 0.07673 -> 0.07634 (3 steps 0.07660). In d = 13 and 16 (letter) with no
# merge seen, 3 steps cost 1.5x (n = 1e4, eps 1) and letter 3.6% at eps 0.5: Su's count stays there.
PARTITION_MIN_STEPS = 4
PARTITION_MIN_STEPS_MAX_DIM = 10
PARTITION_MAX_BITS = 10  # as a partition round's (``kinds.partition.MAX_BITS``; not imported: a central device
PARTITION_BUCKET_SDS = 24.0  # ... and ``BUCKET_SDS``) loads no other kind's module (tests/client/test_lazy_kinds.py)


@dataclass(frozen=True)
class CoverSpec:
    """The greedy (step 2): per-step weight exp(beta * gain), ``picks`` steps per level."""

    beta: float
    picks: int
    sides: tuple[float, ...]  # grid sides, fine to coarse
    shifts: int
    epsilon: float
    delta: float
    # "seed003-lemma6" (the max-coverage greedy), "threshold-gaussian" (gridhist) or
    # "seed001-values" (greedy-001's ball values): ``curator_guarantee``
    rule: str
    histogram: HistogramNoise | None = None  # the histogram rules' noise and threshold (beta and picks are then 0)

    def __post_init__(self) -> None:
        if (self.rule in HISTOGRAM_RULES) != (self.histogram is not None):
            raise ConfigError(f"cover rule {self.rule!r} and histogram {self.histogram!r} do not go together")
        if self.histogram is not None and self.histogram.levels != len(self.sides):
            raise ConfigError(f"histogram cover: {self.histogram.levels} levels for {len(self.sides)} grid sides")


@dataclass(frozen=True)
class PartitionStage:
    """The ``lsh-partition`` algorithm's public parameters: 2^bits buckets under hyperplanes from the
    run's seed (``kinds.partition.hyperplanes``), and the units of the one noisy-average budget
    that the mean, the partition and each of the ``steps`` Lloyd steps take."""

    bits: int
    mean_units: int
    partition_units: int
    step_units: int
    steps: int

    def __post_init__(self) -> None:
        for name in ("bits", "mean_units", "partition_units", "step_units", "steps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"partition stage: {name} must be an integer >= 1, got {value!r}")
        if self.bits > PARTITION_MAX_BITS:
            raise ConfigError(f"partition stage: bits must be in [1, {PARTITION_MAX_BITS}], got {self.bits}")

    @property
    def units(self) -> int:
        """The unit releases the stage's budget covers (``noisy_average.calibrate(releases=...)``)."""
        return self.mean_units + self.partition_units + self.steps * self.step_units

    @property
    def split_steps(self) -> int:
        """How many of the Lloyd steps are split steps (each center against two candidates, the parts
        reduced to k): two from ``SECOND_SPLIT_FROM_STEPS`` steps, else the first alone. A split step
        is a release of ``step_units`` like any step: the budget does not depend on it."""
        return 2 if self.steps >= SECOND_SPLIT_FROM_STEPS else 1


@dataclass(frozen=True)
class CentralSpec:
    """Every public parameter of one central k-means run."""

    algorithm: str
    k: int
    dim: int
    proj_dim: int  # == dim: no projection
    epsilon: float
    delta: float
    cover: CoverSpec
    count_epsilon: float  # the proxy's cell counts (discrete Laplace, L1 sensitivity 1); greedy-001: the elbow
    lift_steps: int  # noisy-average Lloyd steps in the original space (0: the proxy is the answer)
    lift_epsilon: float  # all lift steps together: one noise spec for all their releases (zCDP-composed)
    lift_delta: float
    seed: int  # public randomness: projection and shifts
    census_epsilon: float = 0.0  # spent on a noisy n before deriving (0: n was public)
    objective: str = "kmeans"  # or "kmedian" (seed 003, where the proxy is the answer)
    partition: PartitionStage | None = None  # the ``lsh-partition`` algorithm's stage (and only its)

    def __post_init__(self) -> None:
        if (self.algorithm == "lsh-partition") != (self.partition is not None):
            raise ConfigError(f"a partition stage goes with the lsh-partition algorithm only; got algorithm "
                              f"{self.algorithm!r} with stage {self.partition!r}")
        if self.partition is not None:
            _check_partition_spec(self)
            return
        if self.algorithm not in ALGORITHMS:
            raise ConfigError(f"unknown central algorithm {self.algorithm!r}; known: {ALGORITHMS}")
        if self.k < 1 or self.dim < 1 or not 1 <= self.proj_dim <= self.dim:
            raise ConfigError(f"central k-means needs k >= 1, dim >= 1, 1 <= proj_dim <= dim; got k={self.k}, "
                              f"dim={self.dim}, proj_dim={self.proj_dim}")
        if self.proj_dim < self.dim and self.lift_steps < 1:
            raise ConfigError(f"a projected run (proj_dim {self.proj_dim} < dim {self.dim}) needs a lift step")
        if self.lift_steps < 0 or (self.lift_steps and not (self.lift_epsilon > 0 and 0 < self.lift_delta < 1)):
            raise ConfigError(f"lift: steps {self.lift_steps} >= 0, each with eps > 0 and delta in (0, 1); "
                              f"got eps {self.lift_epsilon}, delta {self.lift_delta}")
        if not self.count_epsilon > 0:
            raise ConfigError(f"proxy counts need eps > 0, got {self.count_epsilon}")
        if self.objective not in OBJECTIVES:
            raise ConfigError(f"unknown objective {self.objective!r}; known: {OBJECTIVES}")
        if self.objective == "kmedian" and self.lift_steps:
            raise ConfigError(f"k-median runs where the proxy is the answer (maxcover-003 or greedy-001 with d <= d', "
                              f"here d={self.dim}, d'={self.proj_dim}): a lift averages, which is k-means")

    def event(self, steps: int | None = None) -> CuratorEvent:
        """The record of a run that took ``steps`` lift steps (default, and the only value: the spec's)."""
        steps = self.lift_steps if steps is None else steps
        if steps != self.lift_steps:
            raise PrivacyError(f"a run of this spec takes {self.lift_steps} lift steps, not {steps}")
        lift_eps: tuple[float, ...] = (self.lift_epsilon,) if steps else ()
        lift_delta: tuple[float, ...] = (self.lift_delta,) if steps else ()
        releases = self.partition.units if self.partition is not None else steps
        return CuratorEvent(self.algorithm, self.cover.rule, self.cover.epsilon, self.cover.delta,
                            self.count_epsilon, lift_eps, lift_delta, self.census_epsilon, self.cover.histogram,
                            releases)


def _check_partition_spec(spec: CentralSpec) -> None:
    """An ``lsh-partition`` run: unprojected k-means, no cover or counts of its own (its releases are
    the lift's units, rule ``PARTITION_RULE`` at eps 0 and delta 0), ``lift_steps`` its stage's steps."""
    stage = spec.partition
    assert stage is not None
    c = spec.cover
    if spec.k < 1 or spec.dim < 1 or spec.proj_dim != spec.dim or spec.objective != "kmeans":
        raise ConfigError(f"a partition run is unprojected k-means with k, dim >= 1; got k={spec.k}, dim={spec.dim}, "
                          f"proj_dim={spec.proj_dim}, objective {spec.objective!r}")
    if c.rule != PARTITION_RULE or c.epsilon != 0 or c.delta != 0 or spec.count_epsilon != 0:
        raise ConfigError(f"a partition run's releases are all its lift's: cover rule {PARTITION_RULE!r} at eps 0 and "
                          f"delta 0 and no counts; got rule {c.rule!r} ({c.epsilon}, {c.delta}), counts "
                          f"{spec.count_epsilon}")
    if spec.lift_steps != stage.steps or not (spec.lift_epsilon > 0 and 0 < spec.lift_delta < 1):
        raise ConfigError(f"a partition run takes its stage's {stage.steps} Lloyd steps within a lift of eps > 0 and "
                          f"delta in (0, 1); got {spec.lift_steps} steps, ({spec.lift_epsilon}, {spec.lift_delta})")


@dataclass(frozen=True)
class CuratorEvent:
    """A central k-means run by a curator who sees the raw points: the greedy
    (eps, delta) by the named rule, the proxy counts (pure eps, discrete
    Laplace), the lift's (eps, delta) over all its ``lift_steps`` releases
    (``NoisyAverageSpec`` with ``releases``: each part's sum and weighted
    size one discrete Gaussian vector, its zCDP composed over the steps and
    converted once; the parts are disjoint, so a step costs one part's budget). Basic composition over the parts;
    neighbours add or remove one point."""

    algorithm: str
    cover_rule: str
    cover_epsilon: float
    cover_delta: float
    count_epsilon: float
    lift_epsilons: tuple[float, ...]
    lift_deltas: tuple[float, ...]
    census_epsilon: float = 0.0
    cover_histogram: HistogramNoise | None = None  # rule "threshold-gaussian": the noise its delta comes from
    lift_steps: int = 0  # the releases the lift's one (eps, delta) covers

    def __post_init__(self) -> None:
        if len(self.lift_epsilons) != len(self.lift_deltas) or len(self.lift_epsilons) != (1 if self.lift_steps else 0):
            raise PrivacyError(f"a curator run's lift is one (eps, delta) over its {self.lift_steps} steps; got "
                               f"{len(self.lift_epsilons)} eps and {len(self.lift_deltas)} deltas")


def curator_guarantee(event: CuratorEvent) -> tuple[float, float]:
    """(eps, delta) of a curator run: basic composition of its parts. The
    greedy's (eps, delta) is Lemma 6's by construction of its step; the
    histogram's delta is recomputed from its noise (``histogram_guarantee``)."""
    if event.cover_rule == "seed003-lemma6":
        cover_delta = event.cover_delta
    elif event.cover_rule == PARTITION_RULE:  # every release of the stage is one of the lift's units
        if event.cover_epsilon != 0 or event.cover_delta != 0 or event.count_epsilon != 0 or not event.lift_steps:
            raise PrivacyError(f"a partition run spends only its lift's budget; its event says cover "
                               f"({event.cover_epsilon}, {event.cover_delta}), counts {event.count_epsilon}")
        cover_delta = 0.0
    elif event.cover_rule in HISTOGRAM_RULES and event.cover_histogram is not None:
        spent = histogram_guarantee(event.cover_histogram, event.cover_epsilon)
        if spent > event.cover_delta:
            raise PrivacyError(f"the histogram cover's noise gives delta {spent} > its stated {event.cover_delta}")
        cover_delta = event.cover_delta
    else:
        raise PrivacyError(f"no privacy rule for the cover {event.cover_rule!r}")
    eps = math.fsum((event.census_epsilon, event.cover_epsilon, event.count_epsilon, *event.lift_epsilons))
    return eps, math.fsum((cover_delta, *event.lift_deltas))


def projection_dim(n: int, dim: int) -> int:
    """Seed 000's experiments: d' = ln(n) / 2 (rounded up, at least 2); d itself when smaller."""
    return min(dim, max(2, math.ceil(math.log(max(n, 2)) / 2)))


def grid_sides(n: int, proj_dim: int) -> tuple[float, ...]:
    """Grid sides fine to coarse: from a cell of radius about 1/n (seed 000,
    r_1 = 1/n) up to side 2 (one cell spans the unit ball's diameter)."""
    levels = math.ceil(math.log(2 * max(n, 2) * math.sqrt(proj_dim), GROWTH)) + 1
    return tuple(2.0 / GROWTH**i for i in reversed(range(levels)))


def _split(algorithm: str, n: int, k: int, proj_dim: int, projected: bool, epsilon: float,
           delta: float, objective: str = "kmeans") -> tuple[float, float, float]:
    """(greedy, counts, lift) shares of eps. Seed 003 projected: 0.35 each to
    greedy and counts, 0.3 to the lift; unprojected ``UNPROJECTED_LIFT_SPLIT``
    for k-means (one Lloyd step from the proxy's k centers, issue 41) and half
    and half with no lift for k-median (the proxy is the answer: a noisy mean
    is no k-median step). Seed 000 leaves it open; here the greedy gets what it
    needs to see a cluster of n / (GREEDY_MARGIN k) points in a cell of side
    REFERENCE_SIDE, and the lift, which carries the answer's precision, the rest.

    A pick weighs exp(beta gain) against the block of U empty cells, so a cell
    is found once gain >~ ln(U) / beta. Asking that of n / (GREEDY_MARGIN k)
    points at U = SHIFTS (floor(2 / REFERENCE_SIDE) + 2)^d' gives beta, and
    Lemma 6 the eps: GREEDY_MARGIN ln(U) k / n 2 ln(e / delta_g), kept within
    [0.1, 0.5] of eps. Measured (3 runs each, mean objective): with margin 1.5
    at side 1/2 the seed-000 synthetic (k = 64) got 0.17 of eps = 4 and 0.10;
    margin 3 at side 1/4 gives it 0.5 and 0.022 (Google's library: 0.024),
    letter eps 4 0.055 -> 0.048, the paper generator n = 1e4 eps 1 0.0049 ->
    0.0086 (it needs fewer picks), n >= 1e5 unchanged (the 0.1 floor)."""
    if algorithm == "greedy-001":
        return GREEDY_SPLIT if projected else GREEDY_SPLIT_UNPROJECTED
    if algorithm == "gridhist":
        g = _gridhist_share(n, k, epsilon, delta / 2)
        return g, COUNT_SHARE, 1 - g - COUNT_SHARE
    if algorithm == "maxcover-003" and not projected:
        return (0.5, 0.5, 0.0) if objective == "kmedian" else UNPROJECTED_LIFT_SPLIT
    if algorithm == "maxcover-003":
        return 0.35, 0.35, 0.3
    universe = SHIFTS * (math.floor(2 / REFERENCE_SIDE) + 2) ** proj_dim
    need = GREEDY_MARGIN * math.log(universe) * k / max(n, 1) * 2 * math.log(math.e / (delta / 2)) / epsilon
    g = min(0.5, max(0.1, need))
    return g, COUNT_SHARE, 1 - g - COUNT_SHARE


def greedy_radii(levels: int) -> tuple[float, ...]:
    """greedy-001's ball radii, coarse to fine: 2 (the unit ball's diameter) halving per level."""
    return tuple(2.0 / GROWTH**i for i in range(levels))


def histogram_sides() -> tuple[float, ...]:
    """gridhist's grid sides, fine to coarse: 2^-6 .. 2 (``HIST_LEVELS``). Finer
    cells only refine the proxy, which the lift replaces by the parts' means;
    each level costs its share of the zCDP budget."""
    return tuple(2.0 / GROWTH**i for i in reversed(range(HIST_LEVELS)))


def _gridhist_share(n: int, k: int, epsilon: float, delta: float) -> float:
    """The cover's share of eps for gridhist: the least in [0.1, 0.5] (to 0.01)
    whose threshold is at most n / (HIST_GAP k) points, so a cluster of the
    average size clears it by the noise's spread; 0.5 when none does.
    Measured (issue 17, mean objective, seeds 0-2): the paper generator n = 1e4
    eps 1 at 0.2 / 0.3 of eps: 0.0032 / 0.0042; the seed-000 synthetic (k = 64)
    eps 1 at 0.2 / 0.35: 0.12 / 0.047 (its clusters of ~780 need a threshold
    near 300)."""
    target = n / (HIST_GAP * k)

    def fits(share: float) -> bool:
        return calibrate_histogram(share * epsilon, delta, HIST_LEVELS, SHIFTS).threshold <= target

    lo, hi = 10, 50  # hundredths of eps
    if fits(lo / 100):
        return lo / 100
    if not fits(hi / 100):
        return hi / 100
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fits(mid / 100) else (mid, hi)
    return hi / 100


def greedy_step(epsilon: float, delta: float) -> float:
    """eps' of seed 003's Alg. 1 for an (epsilon, delta) greedy (Lemma 6): epsilon / (2 ln(e / delta))."""
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ConfigError(f"max coverage: epsilon must be finite and > 0, got {epsilon}")
    if not 0 < delta < 1:
        raise ConfigError(f"max coverage: delta must be in (0, 1), got {delta}")
    # Rounded toward less spend: the quotient, the log (1 ulp) and e / delta, and math.e (below e by
    # 2^-54 relative) err by under 2^-50 relative together; 2^-49 down keeps 2 beta ln(e / delta) <= epsilon.
    return epsilon / (2 * math.log(math.e / delta)) * (1 - 2.0**-49)


def su_iterations(n: int, dim: int, k: int, epsilon: float) -> int:
    """Su, Cao, Li, Bertino, Lin and Wang (VLDB J. 2017, Sec. 5): a private Lloyd iteration pays
    while eps / T stays above eps_m = sqrt(500 k^3 / n^2 (d + (4 d rho^2)^(1/3))^3); T = eps / eps_m
    clamped to [2, 7]. Public parameters only."""
    eps_m = math.sqrt(500 * k**3 / max(n, 1) ** 2 * (dim + (4 * dim * SU_RHO**2) ** (1 / 3)) ** 3)
    return int(min(max(epsilon / eps_m, SU_MIN_STEPS), SU_MAX_STEPS))


def projected_lift_steps(n: int, dim: int, k: int, lift_epsilon: float, lift_delta: float) -> int:
    """The most steps (<= ``PROJECTED_MAX_STEPS``, >= 1) whose one release keeps the noise on an
    average cluster's mean (n / k rows; the sums' Gaussian at the lift's zCDP rho split over the
    steps, sd^2 = T / (2 rho) per coordinate) within ``LIFT_STEP_NOISE``: the first release
    must still find the clusters its later steps refine."""
    rho = rho_for_tight(lift_epsilon, lift_delta)
    per_cluster = (max(n, 1) / k) ** 2
    steps = 1
    while steps < PROJECTED_MAX_STEPS and dim * (steps + 1) / (2 * rho) / per_cluster <= LIFT_STEP_NOISE:
        steps += 1
    return steps


def default_lift_steps(algorithm: str, projected: bool, n: int, dim: int, k: int, epsilon: float,
                       lift_epsilon: float, lift_delta: float) -> int:
    """The lift's Lloyd steps when the caller does not fix them: seed 003 unprojected
    Su et al.'s count from the proxy's centers (``su_iterations``, at the run's eps), projected
    runs as many as one release's noise allows (``projected_lift_steps``), seed 001's greedy one
    (its elbow is measured at the lift's centers)."""
    if algorithm == "greedy-001":
        return 1
    if projected:
        return projected_lift_steps(n, dim, k, lift_epsilon, lift_delta)
    return su_iterations(n, dim, k, epsilon)


def choose_algorithm(n: int, dim: int, objective: str = "kmeans") -> str:
    """The default per dimension range: seed 003 (ending with Lloyd steps from the proxy's k
    centers) for unprojected data in d <= ``GREEDY_MAX_DIM`` (2-D locations), and for k-median
    wherever nothing is projected (its proxy is the answer); for k-means in 3 <= d <=
    ``PARTITION_AUTO_MAX_DIM`` the partition stage (``lsh-partition``, issue 41); everywhere else
    seed 000's pipeline with the thresholded histogram cover (``gridhist``; it refuses k-median
    where it projects).

    ``lsh-partition`` replaced ``gridhist`` for k-means in 3 <= d <= 32 after this measurement
    (``central_kmeans``, mean k-means cost / n, 2026-11-28, ``tests/bench/results/central_partition.md``;
    lsh-partition / gridhist at eps 0.5 / 1 / 2 / 4): letter 0.81 / 0.90 / 0.94 / 0.95x; the
    overlapping clusters (seeds 0-9 x 3 draws) 0.97 / 0.99 / 1.00 / 1.00x (0.0773 / 0.0763 / 0.0757 /
    0.0756, where the shuffle model's own stage gives 0.0791 / 0.0782 / 0.0775 / 0.0773); the Balcan
    et al. mixture (n = 50,000, d = 100, k = 64) 0.61 / 0.83 / 1.00x at eps 0.5 / 1 / 4. On the paper
    generator's tight, separated clusters it is mixed, 0.05x to 3.06x per cell (n = 1e4 and 1e5,
    d = 3 to 100, 2-3 seeds; worst n = 1e4, d = 3, eps 0.5: 0.0118 against 0.0039, where one center
    costs 0.86; since the second split step, ``SECOND_SPLIT_FROM_STEPS``, 0.35x to 1.07x for
    d = 3 to 16), and in d = 100 a bucket holding two clusters is sometimes not split
    (``PARTITION_AUTO_MAX_DIM``): one draw in the central benchmark cost 0.138 at n = 1e4, eps 1.
    Data a public rule cannot tell apart are diffuse in the real sets shoal is measured on, and
    there the stage wins.

    Why ``gridhist`` over seed 003's greedy in d >= 3 (before the partition stage):
    chosen from the structure of the two covers. The greedy picks each cell by the exponential
    mechanism against the block of all empty cells of its grid, so a cell is found only once its
    gain exceeds ln(U) / beta, and ln(U) grows with d (about d ln(2 / side)); the histogram's
    threshold does not depend on U at all, and finds a cluster of 2-3x fewer points at the same
    budget (``common/mechanisms/threshold_histogram.py``). In d <= 2 the universe is small and the
    greedy's picks, already placed in the data's space, are as good or better. Issue 41, measured
    (``central_kmeans``, mean k-means cost / n, 2026-11-27, maxcover-003 -> gridhist): the
    overlapping clusters (n = 23,000, d = 6, k = 5; seeds 0-9 x 5 private draws) at eps 0.5 / 1 / 4:
    0.0878 / 0.0784 / 0.0758 -> 0.0804 / 0.0773 / 0.0758 (at eps 0.5 the greedy found 8 non-empty
    cells of 180 picks and its proxy's k-means start cost as much as one center); the paper
    generator in d = 3-5 (n = 1e4 and 1e5) lower in 8 of 10 cells at eps 0.5 and 1, by up to 4.3x,
    higher in two (n = 1e4, d = 3: 1.02x, 1.78x); Uber (d = 2, 10 seeds) 0.00194 / 0.00182 /
    0.00162 -> 0.00198 / 0.00177 / 0.00169 and a 2-D city generator at n = 1e4 up to 25% worse with
    the histogram, so d <= 2 keeps the greedy (``tests/bench/results/central_lift.md``). Issue 17 first shipped maxcover-000 for projected
    data; the histogram replaced it after that benchmark (README)."""
    unprojected = dim <= projection_dim(n, dim) and dim <= MAX_UNPROJECTED
    if unprojected and (dim <= GREEDY_MAX_DIM or objective == "kmedian"):
        return "maxcover-003"
    return "lsh-partition" if objective == "kmeans" and dim <= PARTITION_AUTO_MAX_DIM else "gridhist"


def derive_central(algorithm: str, n: int, dim: int, k: int, epsilon: float, delta: float,
                   seed: int = 0, lift_steps: int | None = None,
                   split: tuple[float, float, float] | None = None, census_epsilon: float = 0.0,
                   objective: str = "kmeans", proj_dim: int | None = None) -> CentralSpec:
    """The public parameters of a central run at total (epsilon, delta) on about n points;
    ``census_epsilon`` of epsilon was already spent on a noisy n (``n`` is then that count).
    ``proj_dim`` overrides d' (``projection_dim``; d' = dim runs unprojected): the boosting
    measurement's "no dimension reduction" (``deploy/bench/greedy.py``)."""
    if algorithm == "auto":
        algorithm = choose_algorithm(n, dim, objective)
    if algorithm not in ALGORITHMS:
        raise ConfigError(f"unknown central algorithm {algorithm!r}; known: auto, {', '.join(ALGORITHMS)}")
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ConfigError(f"central epsilon must be finite and > 0, got {epsilon}")
    if not 0 < delta < 1:
        raise ConfigError(f"central delta must be in (0, 1), got {delta}")
    if not 0 <= census_epsilon < epsilon:
        raise ConfigError(f"census epsilon must be in [0, epsilon), got {census_epsilon} of {epsilon}")
    # What the census leaves, rounded toward less spend (``spend_left``): census + the rest <= epsilon exactly.
    requested, census, epsilon = epsilon, census_epsilon, spend_left(epsilon, census_epsilon)
    if n < 1 or k < 1 or dim < 1:
        raise ConfigError(f"central k-means needs n, k, dim >= 1; got n={n}, k={k}, dim={dim}")
    if algorithm == "lsh-partition":
        if objective != "kmeans" or split is not None or proj_dim not in (None, dim):
            raise ConfigError(f"the lsh-partition algorithm is unprojected k-means with its own budget units; got "
                              f"objective {objective!r}, split {split}, proj_dim {proj_dim}")
        return _derive_partition(n, dim, k, requested, delta, epsilon, census, seed, lift_steps)
    proj = projection_dim(n, dim) if proj_dim is None else int(proj_dim)
    if not 1 <= proj <= dim:
        raise ConfigError(f"projection dimension must be in [1, dim = {dim}], got {proj_dim}")
    g, c, lift = _split(algorithm, n, k, proj, proj < dim, epsilon, delta, objective) if split is None else split
    if split is not None and (min(split) < 0 or abs(sum(split) - 1) > 1e-9 or g <= 0 or c <= 0):
        raise ConfigError(f"budget split (greedy, counts, lift) must be >= 0, sum to 1, with greedy and counts > 0; "
                          f"got {split}")
    steps = ((default_lift_steps(algorithm, proj < dim, n, dim, k, epsilon, lift * epsilon, delta / 2) if lift > 0
              else 0) if lift_steps is None else int(lift_steps))
    if steps and lift == 0:  # a lift asked for where the split has none: take it from the counts
        g, c, lift = UNPROJECTED_LIFT_SPLIT
    if not steps:
        g, c, lift = g / (g + c), c / (g + c), 0.0
    eps_g, delta_g = g * epsilon, delta / 2 if steps else delta
    # Both run the greedy under Gupta et al.'s set-cover analysis as seed 003's Lemma 6 states it:
    # beta = eps / (2 ln(e / delta)) is 27% larger than seed 000's Lemma 17 gives (e ln(1/delta) / 2
    # per unit of eps) at delta = 1e-6, for the same guarantee.
    if algorithm == "gridhist":
        sides = histogram_sides()
        noise = calibrate_histogram(eps_g, delta_g, len(sides), SHIFTS)
        cover = CoverSpec(0.0, 0, sides, SHIFTS, eps_g, delta_g, "threshold-gaussian", noise)
    elif algorithm == "greedy-001":
        sides = tuple(reversed(greedy_radii(GREEDY_LEVELS)))
        noise = calibrate_histogram(eps_g, delta_g, len(sides), 1, weight=GREEDY_Q)
        cover = CoverSpec(0.0, 0, sides, 1, eps_g, delta_g, "seed001-values", noise)
    else:
        beta, rule = greedy_step(eps_g, delta_g), "seed003-lemma6"
        cover = CoverSpec(beta, 2 * k, grid_sides(n, proj), SHIFTS, eps_g, delta_g, rule)
    # The count's eps as the discrete Laplace's exact rational scale gives it (at most its share, and at
    # most what the cover leaves); the lift gets what cover and counts leave, and its delta what the
    # cover leaves: every part rounded toward less spend (``spend_left``), so that census + cover + counts
    # + lift <= the requested (epsilon, delta) exactly (g + c + lift = 1 in doubles may sum above 1).
    t, s = laplace_scale_fraction(1, min(c * epsilon, spend_left(epsilon, eps_g)))
    count = s / t
    lift_eps = spend_left(epsilon, eps_g, count) if steps else 0.0  # its share and what the count's rounding left
    return CentralSpec(algorithm, k, dim, proj, requested, delta, cover, count, steps,
                       lift_eps, spend_left(delta, delta_g) if steps else 0.0, seed,
                       census, objective)


def reference_size_sd(epsilon: float, units: int, releases: int) -> float:
    """The sd the partition stage's public thresholds (``partition_bits``, the bucket gate in
    ``partition_stage``) read for a release of ``units`` of ``releases`` at the stage's eps: a
    discrete Laplace's, sqrt(2) / eps', at eps' = REFERENCE_SIZE_SHARE x eps x units / releases."""
    return math.sqrt(2) / (REFERENCE_SIZE_SHARE * epsilon * units / releases)


def partition_bits(n: int, k: int, size_sd: float) -> int:
    """The partition stage's bits: at least ``PARTITION_MIN_BITS`` and two buckets per cluster, more
    while an average bucket keeps ``PARTITION_BUCKET_SDS`` noise sds of points (``kinds.partition.bucket_bits``'
    rule, here with no message length to respect), at most ``PARTITION_MAX_BITS``."""
    least = max(PARTITION_MIN_BITS, math.ceil(math.log2(max(k, 1))) + 1)
    fit = int(math.floor(math.log2(max(n / (PARTITION_BUCKET_SDS * max(size_sd, 1e-9)), 2.0))))
    return min(PARTITION_MAX_BITS, max(least, fit))


def _derive_partition(n: int, dim: int, k: int, requested: float, delta: float, epsilon: float, census: float,
                      seed: int, lift_steps: int | None) -> CentralSpec:
    """The partition stage's spec: ``epsilon`` is what the census left; its steps Su et al.'s
    count (``su_iterations``), at least ``PARTITION_MIN_STEPS`` in d <= ``PARTITION_MIN_STEPS_MAX_DIM``,
    unless given; the first (from ``SECOND_SPLIT_FROM_STEPS`` steps, the first two) against split
    candidates."""
    least = PARTITION_MIN_STEPS if dim <= PARTITION_MIN_STEPS_MAX_DIM else 1
    steps = max(su_iterations(n, dim, k, epsilon), least) if lift_steps is None else int(lift_steps)
    if steps < 1:
        raise ConfigError(f"the partition algorithm takes at least one Lloyd step, got lift_steps={lift_steps}")
    mean_units, partition_units, lift_units = STAGE_UNITS
    step_units = max(1, round(lift_units / steps))
    units = mean_units + partition_units + steps * step_units
    size_sd = reference_size_sd(epsilon, partition_units, units)
    stage = PartitionStage(partition_bits(n, k, size_sd), mean_units, partition_units, step_units, steps)
    cover = CoverSpec(0.0, 0, (), 0, 0.0, 0.0, PARTITION_RULE)
    return CentralSpec("lsh-partition", k, dim, dim, requested, delta, cover, 0.0, steps, epsilon, delta, seed,
                       census, "kmeans", stage)


NAME = "central"


@dataclass(frozen=True)
class CentralConfig:
    """A central round: devices seal their point, clipped into the bound and
    mapped into the unit ball, to the server, which is the curator."""

    round_id: str
    k: int
    dim: int
    n_expected: int
    bound: PublicBound
    spec: CentralSpec
    records_per_device: int = 1  # a device seals up to this many records in its one message

    def __post_init__(self) -> None:
        if not isinstance(self.records_per_device, int) or not 1 <= self.records_per_device <= MAX_RECORDS:
            raise ConfigError(f"central round: records_per_device must be an integer in [1, {MAX_RECORDS}], "
                              f"got {self.records_per_device!r}")
        if self.spec.k != self.k or self.spec.dim != self.dim:
            raise ConfigError(f"central round: spec is for k={self.spec.k}, dim={self.spec.dim}, "
                              f"the round has k={self.k}, dim={self.dim}")
        if self.n_expected < 1:
            raise ConfigError(f"central round: n_expected must be >= 1, got {self.n_expected}")
        self.bound.check_dim(self.dim)

    def decode_bytes(self, devices: int | None = None) -> int:
        """Memory a decode needs: the points (read once), their projection and one level's cells."""
        n = (self.n_expected if devices is None else devices) * self.records_per_device
        return 8 * n * (self.dim + 4 * self.spec.proj_dim + 8)

    @property
    def event(self) -> CuratorEvent:
        return self.spec.event()

    def device_guarantee(self) -> tuple[float, float]:
        """(eps, delta) for adding or removing one *device* with all its records:
        group privacy over ``records_per_device`` records (Dwork-Roth Thm. 2.2's
        (eps, delta) form: R eps, R e^{(R - 1) eps} delta); the record-level
        guarantee when a device sends one record."""
        eps, delta = curator_guarantee(self.event)
        r = self.records_per_device
        return r * eps, min(1.0, r * math.exp((r - 1) * eps) * delta)


def derive_central_round(n_expected: int, dim: int, k: int, epsilon: float, delta: float, bound: PublicBound,
                         algorithm: str = DEFAULT_ALGORITHM, seed: int = 0, round_id: str = "central",
                         lift_steps: int | None = None, records_per_device: int = 1,
                         objective: str = "kmeans") -> CentralConfig:
    """A central round's config from an operator's request (n_expected devices, public).
    (epsilon, delta) is per record; with several records per device the device-level
    guarantee is the group-privacy one (``CentralConfig.device_guarantee``)."""
    spec = derive_central(algorithm, n_expected * max(1, int(records_per_device)), dim, k, epsilon, delta, seed=seed,
                          lift_steps=lift_steps, objective=objective)
    return CentralConfig(round_id, k, dim, n_expected, bound, spec, records_per_device)


def central_to_dict(config: CentralConfig) -> dict[str, Any]:
    """The published config; the spec's ``partition`` only on a partition run (a device that
    predates it reads every other central config as before)."""
    out = published(config, NAME)
    if out["spec"]["partition"] is None:
        del out["spec"]["partition"]
    return out


def central_from_dict(data: dict[str, Any]) -> CentralConfig:
    """Inverse of ``central_to_dict``; validates everything again (devices call it)."""
    try:
        fields, bound = unpublished(data)
        spec = dict(fields.pop("spec"))
        cover = dict(spec.pop("cover"))
        cover["sides"] = tuple(float(v) for v in cover["sides"])
        if cover.get("histogram") is not None:
            cover["histogram"] = HistogramNoise(**cover["histogram"])
        if spec.get("partition") is not None:
            spec["partition"] = PartitionStage(**spec["partition"])
        return CentralConfig(bound=bound, spec=CentralSpec(cover=CoverSpec(**cover), **spec), **fields)
    except (KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"not a central config: {exc}") from exc


# The shared half of the central kind (``common/kinds/__init__.py``). The shuffler only
# carries the sealed points (it cannot read them); no mixing rule protects them.
KIND = ConfigKind(NAME, parse=lambda data: central_from_dict(dict(data)), dump=central_to_dict,
                  event=lambda config: config.event, mixing=lambda config: Mixing(0, True, 1))
