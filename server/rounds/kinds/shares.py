"""The storage half shared by kinds whose devices send only shuffled
secure-sum shares (refine and partition rounds): which messages they take,
how shares become stored rows, and the accumulator that decodes them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel

from shoal.common.messages import ShareMessage, share_array
from shoal.server.decoders.shares import ShareTotal


class SharesOnly:
    """Mixed into a server kind whose config has ``round_id`` and ``secure_sum``."""

    storage = "payloads"
    what = "a secure-sum round"  # how the refusal of a direct report names the round

    def direct_model(self, config: Any) -> type[BaseModel] | str:
        return f"round {config.round_id} is {self.what}: it takes only shuffled secure-sum shares"

    def sealed_model(self, config: Any) -> type[BaseModel] | str:
        return ShareMessage

    def rows(self, config: Any, messages: Sequence[BaseModel]) -> NDArray[np.uint64]:
        return share_array([m for m in messages if isinstance(m, ShareMessage)], config.secure_sum)

    def row_width(self, config: Any) -> tuple[int, type[np.uint64] | type[np.float64]]:
        return config.secure_sum.length + 1, np.uint64

    def accumulator(self, config: Any) -> ShareTotal:
        return ShareTotal(config.secure_sum)
