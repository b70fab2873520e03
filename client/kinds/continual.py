"""Taking part in a continual round (issue 18, Build 5): the device inserts its
point into the curator's stream, sealed to the server, and can later
withdraw it. Both messages are made and sealed at once: the insertion is
sent now, the deletion kept in the ledger until ``Device.withdraw``, so
the item's token never has to be stored in the clear. As in a central
round there is no local guarantee: the device answers only with its
owner's consent, and its ledger records the round's event-level (eps,
delta), which covers the insertion and the withdrawal together."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from shoal.client.kinds.base import Simulated
from shoal.client.ledger import Spend
from shoal.client.participation import Participation
from shoal.common.errors import ConfigError
from shoal.common.kinds.continual import NAME, ContinualConfig
from shoal.common.randomness.device_random import token_bytes
from shoal.common.wire.fields import new_message_id
from shoal.common.wire.messages import device_json

if TYPE_CHECKING:
    from shoal.common.wire.models import StreamMessage


def new_item() -> str:
    """A random 128-bit item token (hex), from the OS (``device_random``)."""
    return token_bytes(16).hex()


def insertions(config: ContinualConfig, points: np.ndarray, items: list[str]) -> list[StreamMessage]:
    """One insertion per row of ``points`` (clipped into the bound, mapped into the unit ball)."""
    from shoal.common.wire.models import StreamMessage

    ball = config.bound.to_ball(np.asarray(points, dtype=np.float64).reshape(-1, config.dim)).tolist()
    return [StreamMessage(round_id=config.round_id, message_id=new_message_id(), op="insert", item=item, point=p)
            for item, p in zip(items, ball, strict=True)]


def deletions(config: ContinualConfig, items: list[str]) -> list[StreamMessage]:
    from shoal.common.wire.models import StreamMessage

    return [StreamMessage(round_id=config.round_id, message_id=new_message_id(), op="delete", item=item)
            for item in items]


class ContinualDevice:
    name = NAME

    def plan(self, part: Participation, config: ContinualConfig,
             x: np.ndarray) -> tuple[Spend, Callable[[], tuple[str, str]]]:
        x = x.reshape(1, -1) if x.ndim == 1 else x
        if x.shape[0] != 1:
            raise ConfigError(f"round {config.round_id} takes one point per device, got {x.shape[0]}")
        eps, delta = config.device_guarantee()
        spend = part.curator_spend("continual", eps, delta, "this device's raw point",
                                   "event-level, the withdrawal included:",
                                   ledger="; the withdrawal is covered by the same (eps, delta)")

        def build() -> tuple[str, str]:
            item = new_item()
            point = config.bound.to_ball(np.asarray(x, dtype=np.float64).reshape(-1, config.dim))[0].tolist()
            return (part.sealed(device_json(config.round_id, op="insert", item=item, point=point)),
                    part.sealed(device_json(config.round_id, op="delete", item=item, point=None)))

        return spend, build

    def simulate(self, config: ContinualConfig, points: np.ndarray, records_per_device: int) -> Simulated:
        """Insertions only: a stream's deletions come from the simulator (``deploy/simulation/continual_sim.py``)."""
        pts = np.asarray(points, dtype=np.float64).reshape(-1, config.dim)
        return Simulated(messages=list(insertions(config, pts, [new_item() for _ in range(pts.shape[0])])))


KIND = ContinualDevice()
