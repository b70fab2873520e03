"""Taking part in a round whose devices send secure-sum shares of a vector
(refine and partition rounds): no local guarantee, so only with the owner's
consent (``Participation.secure_sum_spend``). Each kind says what its
device adds to the sum (``contributions``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from shoal.client.encoder import device_rng
from shoal.client.kinds.base import Simulated
from shoal.client.ledger import Spend
from shoal.client.participation import Participation
from shoal.common.mechanisms.secure_sum import encode_devices


class SharesDevice:
    def __init__(self, name: str, contributions: Callable[[np.ndarray, Any], np.ndarray]) -> None:
        self.name = name
        self.contributions = contributions

    def plan(self, part: Participation, config: Any, x: np.ndarray) -> tuple[Spend, Callable[[], str]]:
        spend = part.secure_sum_spend(config.secure_sum)
        return spend, lambda: part.secure_sum_message(
            encode_devices(self.contributions(x.reshape(1, -1), config), config.secure_sum, device_rng()))

    def simulate(self, config: Any, points: np.ndarray, records_per_device: int) -> Simulated:
        return Simulated(shares=encode_devices(self.contributions(points, config), config.secure_sum, device_rng()))
