"""shoal.common.kinds: each round kind's config, and the registry that finds it by name
(DESIGN.md, "Round kinds").

A kind of round (tree, sketch, refine, local refine, partition, central,
continual, elbow) is three small halves that share its name, so each side
of the system imports only what it may:

- here, in ``shoal.common.kinds``: the config (parse and validate,
  serialise) and its privacy event record: a :class:`~shoal.common.kinds.base.ConfigKind`
  declared at the bottom of the kind's module (``tree.py``, ``sketch.py``,
  ``refine.py``, ...) and listed in ``_MODULES`` below (name -> module,
  imported when that kind is first asked for: a device loads only the
  kinds of the rounds it joins; issue 45, Build 5). Beside them:
  ``base.py`` (what every kind's config is made of), the tree round's public
  objects (``tree_randomness.py``, ``tree_nets.py``) and its encoder rule
  (``encoder_rule.py``);
- in ``shoal.client.kinds``: what a device does to take part (its budget
  spend and its one message), and the simulator's vectorised encoder;
- in ``shoal.server.rounds.kinds``: deriving the config from an operator's
  request, validating a batch of reports into stored rows, the
  accumulator, the decoder and the privacy statement.

The architecture page (``docs/concepts/architecture.md``, "Round kinds")
lists every kind's four parts in one table, which
``tests/test_architecture.py`` checks against the three registries. The
service, the device, the shuffler and the simulator look kinds up here and
in those two registries; nothing else switches on config types. To add a
kind: write the three halves, add one line to each registry and a row to
that table.

May import: ``shoal.common``'s top-level modules, ``privacy``,
``randomness`` and ``mechanisms``; never ``wire`` (which carries the
configs) or ``services``.

Every published config carries ``"protocol"``, the wire protocol version
its public objects are derived under (``common/randomness/public_stream.py``; issue 45,
Build 2): ``dump`` adds it and ``parse`` refuses a config of a version this
build does not speak, or one without it (published before protocol 1, with
numpy-derived public randomness: stores are not migrated across a protocol
change, so such a round is refused rather than derived differently from the
server that opened it).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from shoal.common.errors import ConfigError
from shoal.common.kinds.base import ConfigKind
from shoal.common.randomness.public_stream import PROTOCOL_VERSION, PROTOCOLS

# A config published without a "kind" key predates kinds: it is a tree round's.
LEGACY_KIND = "tree"
# kind name -> its config module (which declares ``KIND``); loaded on first use
_MODULES = {"tree": "shoal.common.kinds.tree", "sketch": "shoal.common.kinds.sketch",
            "refine": "shoal.common.kinds.refine", "central": "shoal.common.kinds.central",
            "partition": "shoal.common.kinds.partition", "local_refine": "shoal.common.kinds.local_refine",
            "continual": "shoal.common.kinds.continual", "elbow": "shoal.common.kinds.elbow"}

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
