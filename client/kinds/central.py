"""Taking part in a central round (seeds 000 and 003): the device's point,
clipped into the round's bound and mapped into the unit ball, sealed to
the server, which is the curator. There is no local guarantee, so the
device answers only with its owner's consent, and its ledger records the
round as "no local guarantee" with the release's central (eps, delta)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from shoal.client.kinds.base import Simulated
from shoal.client.ledger import Spend
from shoal.client.participation import Participation
from shoal.common.errors import ConfigError
from shoal.common.kinds.central import NAME, CentralConfig
from shoal.common.wire.fields import new_message_id
from shoal.common.wire.messages import device_json

if TYPE_CHECKING:
    from shoal.common.wire.models import PointMessage


def _messages(config: CentralConfig, points: np.ndarray, per_device: int = 1) -> list[PointMessage]:
    """One message per device: consecutive groups of ``per_device`` rows."""
    from shoal.common.wire.models import PointMessage

    ball = config.bound.to_ball(np.asarray(points, dtype=np.float64).reshape(-1, config.dim)).tolist()
    return [PointMessage(round_id=config.round_id, message_id=new_message_id(), points=ball[lo:lo + per_device])
            for lo in range(0, len(ball), per_device)]


class CentralDevice:
    name = NAME

    def plan(self, part: Participation, config: CentralConfig, x: np.ndarray) -> tuple[Spend, Callable[[], str]]:
        x = x.reshape(1, -1) if x.ndim == 1 else x
        if not 1 <= x.shape[0] <= config.records_per_device:
            raise ConfigError(f"round {config.round_id} takes 1 to {config.records_per_device} records per device, "
                              f"got {x.shape[0]}")
        eps, delta = config.device_guarantee()  # all of this device's records: group privacy beyond one
        spend = part.curator_spend("central", eps, delta,
                                   f"this device's raw point{'s' if x.shape[0] > 1 else ''}",
                                   "central, for all of this device's records:")
        return spend, lambda: part.sealed(device_json(config.round_id, points=config.bound.to_ball(x).tolist()))

    def simulate(self, config: CentralConfig, points: np.ndarray, records_per_device: int) -> Simulated:
        return Simulated(messages=list(_messages(config, points, max(1, min(records_per_device,
                                                                             config.records_per_device)))))


KIND = CentralDevice()
