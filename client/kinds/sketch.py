"""Taking part in a sketch round (seed 002): local model, one scrambled
sketch of the device's n0 records, charged n0 eps (eps holds per record;
the device's user may own all n0, and group privacy gives n0 eps); shuffle
model, the one record's features through secure summation via the shuffler."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from shoal.client.kinds.base import Simulated
from shoal.client.ledger import Spend
from shoal.client.participation import Participation
from shoal.client.sketch_encoder import sketch_body, sketch_messages, sketch_shares
from shoal.common.errors import ConfigError
from shoal.common.kinds.sketch import NAME, SketchRoundConfig
from shoal.common.wire.binary import recorded_binary


class SketchDevice:
    name = NAME

    def plan(self, part: Participation, config: SketchRoundConfig, x: np.ndarray) -> tuple[Spend, Callable[[], str]]:
        x = x.reshape(1, -1) if x.ndim == 1 else x
        if config.secure_sum is None:
            n0 = x.shape[0]
            spend = Spend("local", n0 * config.sketch.epsilon,
                          note=f"sketch of {n0} records: eps {config.sketch.epsilon:g} per record, {n0} x for the user")
            return spend, lambda: recorded_binary(sketch_body(x, config))
        if x.shape[0] != 1:
            raise ConfigError(f"a shuffle-model sketch round takes one record per device, got {x.shape[0]}")
        spend = part.secure_sum_spend(config.secure_sum)
        return spend, lambda: part.secure_sum_message(sketch_shares(x, config))

    def simulate(self, config: SketchRoundConfig, points: np.ndarray, records_per_device: int) -> Simulated:
        if config.secure_sum is not None:  # one record per device
            return Simulated(shares=sketch_shares(points, config))
        n, per = points.shape[0], max(1, records_per_device)
        n0 = np.full(-(-n // per), per)
        n0[-1] = n - per * (n0.size - 1)
        return Simulated(messages=list(sketch_messages(points, n0, config)))


KIND = SketchDevice()
