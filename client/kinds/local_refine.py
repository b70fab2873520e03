"""Taking part in a local refine round (``common/kinds/local_refine.py``): one
codebook PrivUnit report of the device's block vector, eps-LDP, sent
directly to the server. Fresh devices only: the ledger
refuses it to a device that answered the parent round or a sibling."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from shoal.client.kinds.base import Simulated
from shoal.client.ledger import Spend
from shoal.client.participation import Participation
from shoal.common.kinds.local_refine import NAME, LocalRefineConfig, block_vectors
from shoal.common.mechanisms.privunit import select
from shoal.common.randomness import device_random
from shoal.common.wire.fields import new_message_id
from shoal.common.wire.messages import device_json

if TYPE_CHECKING:
    from shoal.common.wire.models import CodebookMessage


def codebook_messages(points: np.ndarray, config: LocalRefineConfig,
                      rng: np.random.Generator | None = None) -> list[CodebookMessage]:
    """Each device's report; device randomness from the OS unless ``rng`` is given (tests)."""
    rng = rng if rng is not None else device_random.generator()  # device-private: OS entropy (secrets)
    from shoal.common.wire.models import CodebookMessage

    nonces, index = select(block_vectors(points, config), config.privunit, config.codebook_key, rng)
    return [CodebookMessage(round_id=config.round_id, message_id=new_message_id(), nonce=f"{int(n):016x}",
                            index=int(i)) for n, i in zip(nonces, index, strict=True)]


class LocalRefineDevice:
    name = NAME

    def plan(self, part: Participation, config: LocalRefineConfig, x: np.ndarray) -> tuple[Spend, Callable[[], str]]:
        x = x.reshape(1, -1) if x.ndim == 1 else x

        def make() -> str:
            nonce, index = select(block_vectors(x[:1], config), config.privunit, config.codebook_key,
                                  device_random.generator())
            return device_json(config.round_id, nonce=f"{int(nonce[0]):016x}", index=int(index[0]))

        spend = Spend("local", config.epsilon, note=f"local refine of round {config.parent_id}",
                      family=config.parent_id)
        return spend, make

    def simulate(self, config: LocalRefineConfig, points: np.ndarray, records_per_device: int) -> Simulated:
        return Simulated(messages=list(codebook_messages(points, config)))


KIND = LocalRefineDevice()
