"""Immutable records of each randomiser's math, and the privacy they imply.

Like ``dp_accounting``'s DpEvents: a randomiser is described by a frozen
record; a round's privacy statement is computed from the records, never
from free-form numbers, and a record this module does not know raises.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from shoal.common.errors import PrivacyError


@dataclass(frozen=True)
class LocalHashingEvent:
    """Optimal local hashing (Wang et al., USENIX Sec. 2017): GRR over ``buckets``.

    The true bucket is kept with probability A / 2^32 (``keep_numerator``,
    an exact integer coin) and each other bucket has (1 - A/2^32) / (g - 1):
    the likelihood ratio is exactly A (g - 1) / (2^32 - A) <= e^epsilon.
    """

    epsilon: float
    buckets: int
    keep_numerator: int = 0
    denominator: int = 1 << 32


@dataclass(frozen=True)
class PrivUnitEvent:
    """PrivUnit on a public codebook (``privunit.py``): the device sends the
    index of one of ``candidates`` public directions, one of its ``cap``
    nearest with probability cap_numerator / denominator; the likelihood
    ratio is exactly A (N - K) / (K (2^32 - A)) <= e^epsilon."""

    epsilon: float
    dim: int
    candidates: int
    cap: int
    cap_numerator: int
    denominator: int = 1 << 32


@dataclass(frozen=True)
class ScrambledSketchEvent:
    """A scrambled sketch (seed 002, Def. 3): the masked mean of a device's
    n0 random Fourier feature vectors (m entries, r of them kept per record)
    rounded to a public grid, plus exact discrete Laplace noise calibrated to
    the integer L1 sensitivity on that grid (about 2 sqrt(2) sqrt(m) / (n0
    eps) in real units) on each of the 2m real coordinates: eps-DP for
    replacing one of the device's records (``sketch.py``, Prop. 1 re-derived)."""

    epsilon: float
    size: int
    measurements: int


@dataclass(frozen=True)
class NoReportEvent:
    """A report that is not sent: costs nothing."""

    epsilon: float = 0.0


@dataclass(frozen=True)
class ComposedEvent:
    """Basic (sequential) composition of reports sent by one device."""

    events: tuple[object, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class ChoiceEvent:
    """A device runs exactly one of ``options``, picked with ``probabilities``
    from OS randomness, independently of its data (for instance: a root
    report at the full epsilon, or the tree's reports). For any output y,
    P(y | x) = sum_i p_i P_i(y | x) <= e^eps sum_i p_i P_i(y | x') with eps
    the largest option's epsilon: the choice itself reveals nothing."""

    options: tuple[object, ...]
    probabilities: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.options) != len(self.probabilities) or not self.options:
            raise PrivacyError(f"a choice needs one probability per option, got {len(self.options)} options "
                               f"and {len(self.probabilities)} probabilities")
        if any(not 0 <= p <= 1 for p in self.probabilities) or abs(math.fsum(self.probabilities) - 1) > 1e-9:
            raise PrivacyError(f"choice probabilities must be in [0, 1] and sum to 1, got {self.probabilities}")


@dataclass(frozen=True)
class ShuffledEvent:
    """Every device's message (``local``) shuffled among at least ``messages``
    others before the server sees it; central (eps, delta) by the named
    amplification ``bound`` (``shoal.common.privacy.accounting``)."""

    local: object
    messages: int
    delta: float
    bound: str


@dataclass(frozen=True)
class SecureSumEvent:
    """A vector sum through split-and-mix with distributed discrete Laplace
    or discrete Gaussian noise (``secure_sum.py``, ``noise``): central
    (epsilon, delta) for at least ``min_devices`` honest devices and a
    shuffler that does not collude with the server. One device's shares
    alone carry no DP guarantee (its own noise share is tiny), so its local
    epsilon is infinite."""

    epsilon: float
    delta: float
    min_devices: int
    shares: int
    noise: str = "laplace"
    rho: float = 0.0  # the gaussian law's zCDP (0: none, the laplace law): several such sums compose in zCDP
    failure: float = 0.0  # the probability the protocol differs from its ideal mechanism (``SecureSumParams.failure``)

    def __post_init__(self) -> None:
        if self.rho < 0 or self.failure < 0 or (self.rho > 0) != (self.noise == "gaussian"):
            raise PrivacyError(f"a secure sum's rho ({self.rho}) belongs to the gaussian law and its failure "
                               f"({self.failure}) is a probability; got noise {self.noise!r}")


@dataclass(frozen=True)
class RoundsEvent:
    """Sequential composition of whole rounds over the same devices (for
    instance a tree round and its ``refine`` round): epsilons and deltas add,
    except that discrete-Gaussian secure sums may compose in zCDP
    (``accounting.central_guarantee``)."""

    rounds: tuple[object, ...]


def local_epsilon(event: object) -> float:
    """The pure eps-LDP guarantee of ``event`` (basic composition for tuples)."""
    if isinstance(event, ComposedEvent):
        return math.fsum(local_epsilon(e) for e in event.events)
    if isinstance(event, ChoiceEvent):
        return max(local_epsilon(e) for e, p in zip(event.options, event.probabilities, strict=True) if p > 0)
    if isinstance(event, ShuffledEvent):
        return local_epsilon(event.local)  # what the server learns if the shuffler colludes
    if isinstance(event, SecureSumEvent):
        return math.inf
    if isinstance(event, RoundsEvent):
        return math.fsum(local_epsilon(e) for e in event.rounds)
    if isinstance(event, LocalHashingEvent | PrivUnitEvent | ScrambledSketchEvent | NoReportEvent):
        return float(event.epsilon)
    raise PrivacyError(f"no privacy rule for event {event!r}")
