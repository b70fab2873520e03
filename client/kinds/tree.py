"""Taking part in a tree round (seed 004): one randomised hist/vec report,
sent directly (local model) or sealed to the server through the shuffler
(shuffle model, where the device randomises at the amplified eps0)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from shoal.client.encoder import encode_arrays, tree_json
from shoal.client.kinds.base import Simulated
from shoal.client.ledger import Spend
from shoal.client.participation import Participation
from shoal.common.kinds.tree import NAME, RoundConfig


class TreeDevice:
    name = NAME

    def plan(self, part: Participation, config: RoundConfig, x: np.ndarray) -> tuple[Spend, Callable[[], str]]:
        if config.model == "shuffle":
            part.need_shuffler("shuffle-model")
            part.need_pin("shuffle-model")

        def make() -> str:
            message = tree_json(encode_arrays(np.asarray(x, dtype=np.float64).reshape(1, -1), config))
            return part.sealed(message) if config.model == "shuffle" else message

        # The local epsilon: the guarantee that holds even if the shuffler and the server collude.
        return Spend("local", config.device_epsilon, note=f"{config.model} tree round"), make

    def simulate(self, config: RoundConfig, points: np.ndarray, records_per_device: int) -> Simulated:
        return Simulated(messages=list(encode_arrays(points, config).to_messages()))


KIND = TreeDevice()
