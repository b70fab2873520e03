"""The device half of every round kind (``common/kinds/__init__.py`` explains the three halves).

A device kind says what taking part costs (the ledger's :class:`Spend`) and
builds the one message a device sends; for the simulator it also encodes
many devices at once (vectorised, the same math). ``Device`` and ``shoal
sim`` find it here by the config's kind and never look at config types.

The registry names every kind up front, but a kind's module (and its
config module in ``common/``) is imported only when that kind is first
looked up: a device pays for the kinds of the rounds it joins, not for all
eight (issue 45, Build 5). Adding a kind: one line in ``_DEVICE_KINDS``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shoal.common.errors import ConfigError
from shoal.common.kinds import LazyKinds

if TYPE_CHECKING:  # at run time these load with the first kind (``__getattr__``)
    from shoal.client.kinds.base import DeviceKind, Simulated

__all__ = ["DEVICE_KINDS", "DeviceKind", "Simulated", "device_kind"]

# kind name -> "module:attribute" of its device half
_DEVICE_KINDS = {
    "tree": "shoal.client.kinds.tree:KIND",
    "sketch": "shoal.client.kinds.sketch:KIND",
    "refine": "shoal.client.kinds.refine:KIND",
    "central": "shoal.client.kinds.central:KIND",
    "partition": "shoal.client.kinds.partition:KIND",
    "local_refine": "shoal.client.kinds.local_refine:KIND",
    "continual": "shoal.client.kinds.continual:KIND",
    "elbow": "shoal.client.kinds.elbow:KIND",
}

DEVICE_KINDS: LazyKinds[DeviceKind] = LazyKinds(_DEVICE_KINDS)


def device_kind(name: str) -> DeviceKind:
    if name not in DEVICE_KINDS:
        raise ConfigError(f"this device cannot take part in {name!r} rounds (it knows {sorted(DEVICE_KINDS)})")
    return DEVICE_KINDS[name]


def __getattr__(name: str) -> object:
    """``DeviceKind`` and ``Simulated``, from ``base`` on first use (module docstring)."""
    if name in ("DeviceKind", "Simulated"):
        from shoal.client.kinds import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
