"""The shared half of a round kind, as each kind's config module declares it
(``KIND = ConfigKind(...)``), and what several kinds' configs share: the
shuffler's mixing rule, the secure-sum kinds' event and decode memory, and
how many stored rows a decode reads at a time.

The registry (``kinds/__init__.py``) finds these by name; this module names
no kind.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from shoal.common.errors import ConfigError

if TYPE_CHECKING:
    from shoal.common.mechanisms.secure_sum import SecureSumParams
    from shoal.common.privacy.events import SecureSumEvent

# Rows a server decode reads from the store at a time (``Store.iter_rows``): a
# decode holds one chunk and its accumulator, never the whole round. A tree
# chunk's cost is its decoded vectors (measured at d = 100: peak RSS 951 MB at
# 20,000 rows, 1196 MB at 100,000, of which 700 MB is the vector table);
# payload rows (shares, sketches) are read at most DECODE_CHUNK_BYTES at a time.
DECODE_CHUNK = 25_000
DECODE_CHUNK_BYTES = 64 << 20

MAX_RECORDS = 64  # a central device's records in one sealed message (``CentralConfig.records_per_device``)


def decode_chunk_rows(row_bytes: int) -> int:
    """How many stored rows of ``row_bytes`` a decode reads at a time."""
    return max(1, min(DECODE_CHUNK, DECODE_CHUNK_BYTES // max(1, int(row_bytes))))


@dataclass(frozen=True)
class Mixing:
    """How the shuffler treats a round's messages: the smallest batch it may
    release, whether its forwarder may release batches on its own (else only
    an explicit flush, as one permutation of everything), how many sealed
    messages one device submits at once, and how many submissions one device
    may make to the round (continual rounds: an insertion, then a withdrawal)."""

    min_messages: int
    auto_release: bool
    parts_per_device: int
    submissions_per_device: int = 1

    def __post_init__(self) -> None:
        if self.min_messages < 0 or self.parts_per_device < 1 or self.submissions_per_device < 1:
            raise ConfigError(f"bad mixing rule: min_messages={self.min_messages}, "
                              f"parts_per_device={self.parts_per_device}, "
                              f"submissions_per_device={self.submissions_per_device}")


def secure_sum_mixing(min_devices: int, shares: int) -> Mixing:
    """A secure-sum round: every share of at least ``min_devices`` devices,
    mixed together in one flush (``common/mechanisms/secure_sum.py``, split-and-mix)."""
    return Mixing(min_devices * shares, False, shares)


def secure_sum_event(s: SecureSumParams) -> SecureSumEvent:
    """The event record of one secure sum: its (eps, delta), and for the gaussian law its
    zCDP rho and failure probability, by which several sums compose in zCDP."""
    from shoal.common.privacy.events import SecureSumEvent

    gaussian = s.noise == "gaussian"
    return SecureSumEvent(s.epsilon, s.delta, s.min_devices, s.shares, s.noise, rho=s.rho if gaussian else 0.0,
                          failure=s.failure)


class SharesRound:
    """Mixed into the config of a kind whose devices send only secure-sum shares
    (refine, partition and elbow rounds): its event record and decode memory
    follow from its ``secure_sum`` alone."""

    secure_sum: SecureSumParams

    @property
    def event(self) -> SecureSumEvent:

        return secure_sum_event(self.secure_sum)

    def decode_bytes(self, devices: int | None = None) -> int:
        """Memory a decode needs, in bytes: one chunk of stored shares
        (``decode_chunk_rows`` of L + 1 words) and the running total."""
        n = self.secure_sum.max_devices if devices is None else devices
        width = self.secure_sum.length + 1
        return 8 * (min(n * self.secure_sum.shares, decode_chunk_rows(8 * width)) + 1) * width


@dataclass(frozen=True)
class ConfigKind:
    """The shared half of a round kind, made of its config module's functions
    (each config module declares one as ``KIND``)."""

    name: str  # the published config's "kind"
    parse: Callable[[Mapping[str, Any]], Any]  # the config from its dict, validated again (devices, shuffler)
    dump: Callable[[Any], dict[str, Any]]  # the published dict, JSON-ready, with "kind"; parse inverts it
    event: Callable[[Any], object]  # the immutable record of the round's randomiser (common/privacy/events.py)
    mixing: Callable[[Any], Mixing]  # what the shuffler must do with the round's messages


def shares_kind(name: str, parse: Callable[[dict[str, Any]], Any], dump: Callable[[Any], dict[str, Any]]) -> ConfigKind:
    """The shared half of a :class:`SharesRound` kind: its event, and the shuffler's
    secure-sum mixing of its shares."""
    return ConfigKind(name, parse=lambda data: parse(dict(data)), dump=dump, event=lambda config: config.event,
                      mixing=lambda config: secure_sum_mixing(config.secure_sum.min_devices, config.secure_sum.shares))
