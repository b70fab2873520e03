"""The device half's interface: :class:`DeviceKind` and what it returns."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from shoal.client.ledger import Spend
from shoal.client.participation import Participation

if TYPE_CHECKING:  # the device path never loads pydantic (``common/wire/messages.py``)
    from pydantic import BaseModel


@dataclass(frozen=True)
class Simulated:
    """Many simulated devices' output: report messages (sent directly, or
    sealed through the shuffler), or secure-sum shares (n, s, L + 1), which
    always go through the shuffler."""

    messages: list[BaseModel] | None = None
    shares: np.ndarray | None = None


class DeviceKind(Protocol):
    name: str

    def plan(self, part: Participation, config: Any, x: np.ndarray) -> tuple[Spend, Callable[[], str | tuple[str, str]]]:
        """What answering costs and how the message is built; the ledger calls
        the builder under its lock, at most once per round. A builder may return
        (message, withdrawal): the withdrawal is kept for ``Device.withdraw``."""
        ...

    def simulate(self, config: Any, points: np.ndarray, records_per_device: int) -> Simulated:
        """Every simulated device's output at once (``shoal sim``)."""
        ...
