"""The server half of every round kind, by name (``common/kinds/__init__.py`` explains the halves).

The round service finds a round's kind here and never switches on config
types. Adding a kind: write its module beside these and add it below.
"""

from __future__ import annotations

from shoal.common.errors import ConfigError
from shoal.server.rounds.kinds import (
    central,
    continual,
    elbow,
    local_refine,
    partition,
    refine,
    sketch,
    tree,
)
from shoal.server.rounds.kinds.base import (
    ElbowRequest,
    RefineRequest,
    RoundRequest,
    RoundsView,
    ServerKind,
)

__all__ = ["SERVER_KINDS", "ElbowRequest", "RefineRequest", "RoundRequest", "RoundsView", "ServerKind", "for_encoder", "server_kind"]

SERVER_KINDS: dict[str, ServerKind] = {k.name: k for k in (tree.KIND, sketch.KIND, refine.KIND, central.KIND,
                                                       partition.KIND, local_refine.KIND, continual.KIND,
                                                       elbow.KIND)}


def _declared(kinds: dict[str, ServerKind]) -> dict[str, ServerKind]:
    """The registry, refused at import if a kind does not say whether its
    decode draws private noise (a kind that did not say could be released twice)."""
    for name, kind in kinds.items():
        if not isinstance(getattr(kind, "decode_draws_noise", None), bool):
            raise TypeError(f"server kind {name!r} must declare decode_draws_noise (True or False)")
    return kinds


SERVER_KINDS = _declared(SERVER_KINDS)


def server_kind(name: str) -> ServerKind:
    if name not in SERVER_KINDS:
        raise ConfigError(f"this server cannot serve {name!r} rounds (it knows {sorted(SERVER_KINDS)})")
    return SERVER_KINDS[name]


def for_encoder(encoder: str) -> ServerKind:
    """The kind that serves ``POST /rounds`` with this ``encoder``."""
    for kind in SERVER_KINDS.values():
        if encoder in kind.encoders:
            return kind
    known = sorted(e for k in SERVER_KINDS.values() for e in k.encoders)
    raise ConfigError(f"unknown encoder {encoder!r}; known: {known}")

