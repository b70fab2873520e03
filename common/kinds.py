"""Round kinds: one interface, found by the config's ``kind`` (DESIGN.md, "Round kinds").

A kind of round (tree, sketch, refine, local refine, partition, central,
continual) is three small halves that share its name, so each side of the
system imports only what it may:

- here, in ``shoal.common``: the config (parse and validate, serialise)
  and its privacy event record: a :class:`ConfigKind` declared at the
  bottom of the kind's config module (``tree_round.py``,
  ``sketch_round.py``, ``refine_round.py``) and listed in ``_MODULES``
  (name -> module, imported when that kind is first asked for: a device
  loads only the kinds of the rounds it joins; issue 45, Build 5);
- in ``shoal.client.kinds``: what a device does to take part (its budget
  spend and its one message), and the simulator's vectorised encoder;
- in ``shoal.server.rounds.kinds``: deriving the config from an operator's
  request, validating a batch of reports into stored rows, the
  accumulator, the decoder and the privacy statement.

The service, the device, the shuffler and the simulator look kinds up
here and in those two registries; nothing else switches on config types.
To add a kind: write the three halves, add one line to each registry, and
``tests/test_kinds.py`` checks that the three agree.

Every published config carries ``"protocol"``, the wire protocol version
its public objects are derived under (``common/public_stream.py``; issue 45,
Build 2): ``dump`` adds it and ``parse`` refuses a config of a version this
build does not speak, or one without it (published before protocol 1, with
numpy-derived public randomness: stores are not migrated across a protocol
change, so such a round is refused rather than derived differently from the
server that opened it).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from shoal.common.errors import ConfigError
from shoal.common.public_stream import PROTOCOL_VERSION, PROTOCOLS

if TYPE_CHECKING:
    from shoal.common.events import SecureSumEvent
    from shoal.common.secure_sum import SecureSumParams

# Rows a server decode reads from the store at a time (``Store.iter_rows``): a
# decode holds one chunk and its accumulator, never the whole round. A tree
# chunk's cost is its decoded vectors (measured at d = 100: peak RSS 951 MB at
# 20,000 rows, 1196 MB at 100,000, of which 700 MB is the vector table);
# payload rows (shares, sketches) are read at most DECODE_CHUNK_BYTES at a time.
DECODE_CHUNK = 25_000
DECODE_CHUNK_BYTES = 64 << 20


def decode_chunk_rows(row_bytes: int) -> int:
    """How many stored rows of ``row_bytes`` a decode reads at a time."""
    return max(1, min(DECODE_CHUNK, DECODE_CHUNK_BYTES // max(1, int(row_bytes))))

# A config published without a "kind" key predates kinds: it is a tree round's.
LEGACY_KIND = "tree"
# kind name -> its config module (which declares ``KIND``); loaded on first use
_MODULES = {"tree": "shoal.common.tree_round", "sketch": "shoal.common.sketch_round",
            "refine": "shoal.common.refine_round", "central": "shoal.common.central_round",
            "partition": "shoal.common.partition_round", "local_refine": "shoal.common.local_refine_round",
            "continual": "shoal.common.continual_round", "elbow": "shoal.common.elbow_round"}

T = TypeVar("T")


class LazyKinds(Mapping[str, T]):
    """A registry of kinds by name whose every name is known up front (``in``,
    iteration, ``len``, ``sorted`` import nothing) but whose kind is imported
    from ``"module:attribute"`` the first time it is looked up (issue 45,
    Build 5: a device imports only the kinds of the rounds it joins).
    ``wrap`` is applied to each kind once, as it loads; a loaded kind whose
    ``name`` differs from its key raises TypeError (a table typo)."""

    def __init__(self, table: Mapping[str, str], wrap: Callable[[Any], T] = lambda kind: kind) -> None:
        self._table = dict(table)
        self._wrap = wrap
        self._loaded: dict[str, T] = {}

    def __getitem__(self, name: str) -> T:
        if name not in self._loaded:
            module, _, attribute = self._table[name].partition(":")  # KeyError for an unknown name
            kind = getattr(importlib.import_module(module), attribute)
            if kind.name != name:
                raise TypeError(f"{module}.{attribute} is kind {kind.name!r}, registered as {name!r}")
            self._loaded[name] = self._wrap(kind)
        return self._loaded[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)

    def __contains__(self, name: object) -> bool:
        return name in self._table

    def load_all(self) -> LazyKinds[T]:
        """Every kind imported now (a service, so that no request pays for it); returns self."""
        for name in self._table:
            self[name]
        return self

    def __repr__(self) -> str:
        return f"LazyKinds({sorted(self._table)}, loaded={sorted(self._loaded)})"


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
    mixed together in one flush (``common/secure_sum.py``, split-and-mix)."""
    return Mixing(min_devices * shares, False, shares)


class SharesRound:
    """Mixed into the config of a kind whose devices send only secure-sum shares
    (refine, partition and elbow rounds): its event record and decode memory
    follow from its ``secure_sum`` alone."""

    secure_sum: SecureSumParams

    @property
    def event(self) -> SecureSumEvent:
        from shoal.common.events import SecureSumEvent

        s = self.secure_sum
        return SecureSumEvent(s.epsilon, s.delta, s.min_devices, s.shares, s.noise)

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
    event: Callable[[Any], object]  # the immutable record of the round's randomiser (common/events.py)
    mixing: Callable[[Any], Mixing]  # what the shuffler must do with the round's messages


def shares_kind(name: str, parse: Callable[[dict[str, Any]], Any], dump: Callable[[Any], dict[str, Any]]) -> ConfigKind:
    """The shared half of a :class:`SharesRound` kind: its event, and the shuffler's
    secure-sum mixing of its shares."""
    return ConfigKind(name, parse=lambda data: parse(dict(data)), dump=dump, event=lambda config: config.event,
                      mixing=lambda config: secure_sum_mixing(config.secure_sum.min_devices, config.secure_sum.shares))




def check_protocol(data: Mapping[str, Any]) -> int:
    """The config's protocol version, if this build speaks it; else a ConfigError naming both."""
    if "protocol" not in data:
        raise ConfigError(
            "this round's config has no protocol version: it was published before protocol 1 (protocol 0, "
            f"numpy-derived public randomness); this build speaks protocol {_spoken()} only and rounds are not "
            "migrated across protocol versions: open a new round")
    version = data["protocol"]
    if isinstance(version, bool) or not isinstance(version, int) or version not in PROTOCOLS:
        raise ConfigError(f"this round speaks protocol {version!r}; this build speaks protocol {_spoken()}")
    return version


def _spoken() -> str:
    return " or ".join(str(v) for v in PROTOCOLS)


def _versioned(kind: ConfigKind) -> ConfigKind:
    """The kind with its dump stamping ``protocol`` and its parse checking and removing it."""
    inner_parse, inner_dump = kind.parse, kind.dump

    def parse(data: Mapping[str, Any]) -> Any:
        check_protocol(data)
        return inner_parse({k: v for k, v in data.items() if k != "protocol"})

    def dump(config: Any) -> dict[str, Any]:
        return {**inner_dump(config), "protocol": PROTOCOL_VERSION}

    return ConfigKind(kind.name, parse=parse, dump=dump, event=kind.event, mixing=kind.mixing)


_registry: LazyKinds[ConfigKind] = LazyKinds({name: f"{module}:KIND" for name, module in _MODULES.items()},
                                             _versioned)


def config_kinds() -> LazyKinds[ConfigKind]:
    """Every kind's shared half, by name (each imported when first looked up),
    its configs stamped with and checked for the protocol version (module docstring)."""
    return _registry


def kind_name(data: Mapping[str, Any]) -> str:
    """The kind a published config names; unknown kinds raise ConfigError."""
    name = data.get("kind", LEGACY_KIND)
    if name not in config_kinds():
        raise ConfigError(f"unknown round kind {name!r}; this build knows {sorted(config_kinds())}")
    return str(name)


def parse_config(data: Mapping[str, Any]) -> Any:
    """A published config, parsed by its kind."""
    return config_kinds()[kind_name(data)].parse(data)


def dump_config(name: str, config: Any) -> dict[str, Any]:
    return config_kinds()[name].dump(config)
