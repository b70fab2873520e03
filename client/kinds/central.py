"""Taking part in a central round (seeds 000 and 003): the device's point,
clipped into the round's bound and mapped into the unit ball, sealed to
the server, which is the curator. There is no local guarantee, so the
device answers only with its owner's consent, and its ledger records the
round as "no local guarantee" with the release's central (eps, delta)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from shoal.client.kinds.base import Simulated
from shoal.client.ledger import Spend
from shoal.client.participation import Participation
from shoal.common.central_round import NAME, CentralConfig, curator_guarantee
from shoal.common.errors import ConfigError, PrivacyError
from shoal.common.messages import PointMessage, new_message_id


def _messages(config: CentralConfig, points: np.ndarray) -> list[PointMessage]:
    ball = config.bound.to_ball(np.asarray(points, dtype=np.float64).reshape(-1, config.dim))
    return [PointMessage(round_id=config.round_id, message_id=new_message_id(), point=p) for p in ball.tolist()]


class CentralDevice:
    name = NAME

    def plan(self, part: Participation, config: CentralConfig, x: np.ndarray) -> tuple[Spend, Callable[[], str]]:
        x = x.reshape(1, -1) if x.ndim == 1 else x
        if x.shape[0] != 1:
            raise ConfigError(f"a central round takes one point per device, got {x.shape[0]}")
        part.need_shuffler("central-model")
        part.need_pin("central-model")
        eps, delta = curator_guarantee(config.event)
        if not part.allow_no_local_guarantee:
            raise PrivacyError(
                f"round {config.round_id} is a central round: the server sees this device's raw point "
                f"(central eps={eps:g}, delta={delta:g} hold only for what it releases); take part only with the "
                "owner's consent: Device(..., allow_no_local_guarantee=True) or "
                "'shoal client report --allow-no-local-guarantee'")
        spend = Spend("none", 0.0, central_epsilon=eps, delta=delta,
                      note="central model: the server (curator) sees the raw point; no local guarantee")
        return spend, lambda: part.sealed(_messages(config, x)[0].model_dump_json())

    def simulate(self, config: CentralConfig, points: np.ndarray, records_per_device: int) -> Simulated:
        return Simulated(messages=list(_messages(config, points)))


KIND = CentralDevice()
