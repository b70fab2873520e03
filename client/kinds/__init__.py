"""The device half of every round kind (``common/kinds.py`` explains the three halves).

A device kind says what taking part costs (the ledger's :class:`Spend`) and
builds the one message a device sends; for the simulator it also encodes
many devices at once (vectorised, the same math). ``Device`` and ``shoal
sim`` find it here by the config's kind and never look at config types.
"""

from __future__ import annotations

from shoal.client.kinds import (
    central,
    continual,
    elbow,
    local_refine,
    partition,
    refine,
    sketch,
    tree,
)
from shoal.client.kinds.base import DeviceKind, Simulated
from shoal.common.errors import ConfigError

__all__ = ["DEVICE_KINDS", "DeviceKind", "Simulated", "device_kind"]

DEVICE_KINDS: dict[str, DeviceKind] = {k.name: k for k in (tree.KIND, sketch.KIND, refine.KIND, central.KIND,
                                                       partition.KIND, local_refine.KIND, continual.KIND,
                                                       elbow.KIND)}


def device_kind(name: str) -> DeviceKind:
    if name not in DEVICE_KINDS:
        raise ConfigError(f"this device cannot take part in {name!r} rounds (it knows {sorted(DEVICE_KINDS)})")
    return DEVICE_KINDS[name]
