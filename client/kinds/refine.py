"""Taking part in a refine round: the device's point and a count, added to
its nearest parent center's slot, through secure summation (no local
guarantee: only with the owner's consent; ``common/refine_round.py``)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from shoal.client.encoder import device_rng
from shoal.client.kinds.base import Simulated
from shoal.client.ledger import Spend
from shoal.client.participation import Participation
from shoal.common.refine_round import NAME, RefineConfig, contributions
from shoal.common.secure_sum import encode_devices


class RefineDevice:
    name = NAME

    def plan(self, part: Participation, config: RefineConfig, x: np.ndarray) -> tuple[Spend, Callable[[], str]]:
        spend = part.secure_sum_spend(config.secure_sum)
        return spend, lambda: part.secure_sum_message(
            encode_devices(contributions(x.reshape(1, -1), config), config.secure_sum, device_rng()))

    def simulate(self, config: RefineConfig, points: np.ndarray, records_per_device: int) -> Simulated:
        return Simulated(shares=encode_devices(contributions(points, config), config.secure_sum, device_rng()))


KIND = RefineDevice()
