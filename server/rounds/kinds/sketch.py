"""The sketch kind on the server (seed 002): local-model rounds take scrambled
sketches directly; shuffle-model rounds take only secure-sum shares through
the shuffler. Both are fixed-width payload rows decoded by CL-OMPR."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel

from shoal.common.errors import ReportError
from shoal.common.kinds.sketch import NAME, SketchRoundConfig, derive_sketch_round
from shoal.common.kinds.tree import checked_model
from shoal.common.wire.models import ShareMessage, SketchMessage, share_array, sketch_rows
from shoal.server.decoders.sketch.decoder import (
    SketchAccumulator,
    SketchDecoder,
    sketch_privacy_statement,
)
from shoal.server.rounds.kinds.base import RoundRequest, RoundsView, Storage
from shoal.server.rounds.kinds.results import result_dict


class SketchServer:
    name = NAME
    encoders: tuple[str, ...] = ("sketch",)
    refinable = True
    refine_split = 1
    storage: Storage = "payloads"
    decode_draws_noise = False  # devices noise their sketches (or shares): a decode is post-processing

    def derive(self, request: RoundRequest, round_id: str) -> SketchRoundConfig:
        return derive_sketch_round(
            request.n_expected, request.dim, request.k, request.epsilon, bound=request.bound,
            seed=secrets.randbits(63), model=checked_model(request.model), delta=request.delta,
            min_devices=request.min_batch, round_id=round_id, **request.tuning,
        )

    def direct_model(self, config: SketchRoundConfig) -> type[BaseModel] | str:
        if config.secure_sum is not None:
            return f"round {config.round_id} is a shuffle-model sketch round: it takes only shuffled secure-sum shares"
        return SketchMessage

    def sealed_model(self, config: SketchRoundConfig) -> type[BaseModel] | str:
        return SketchMessage if config.secure_sum is None else ShareMessage

    def rows(self, config: SketchRoundConfig, messages: Sequence[BaseModel]) -> NDArray[Any]:
        if config.secure_sum is not None:
            return share_array([m for m in messages if isinstance(m, ShareMessage)], config.secure_sum)
        sketches = [m for m in messages if isinstance(m, SketchMessage)]
        if len(sketches) != len(messages):
            raise ReportError(f"round {config.round_id} is a sketch round: every report needs a sketch and n0")
        return sketch_rows(sketches, config.sketch)

    def row_width(self, config: SketchRoundConfig) -> tuple[int, type[np.uint64] | type[np.float64]]:
        if config.secure_sum is not None:
            return config.secure_sum.length + 1, np.uint64
        return 2 * config.sketch.size + 1, np.float64

    def accumulator(self, config: SketchRoundConfig) -> SketchAccumulator:
        return SketchAccumulator(config)

    def decode(self, config: SketchRoundConfig, acc: SketchAccumulator, rounds: RoundsView,
               round_id: str) -> dict[str, Any]:
        return result_dict(round_id, SketchDecoder().decode(acc))

    def privacy(self, config: SketchRoundConfig) -> tuple[object, dict[str, Any]]:
        return config.event, sketch_privacy_statement(config)


KIND = SketchServer()
