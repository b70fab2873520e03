"""The tree kind on the server (seed 004): nettree and LSH rounds, local or
shuffle model. Reports are hist/vec messages stored as compact rows
(``storage/report_rows.py``) and decoded by the net-tree decoder."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel

from shoal.common.errors import ReportError
from shoal.common.kinds.tree import (
    ENCODER_CHOICES,
    NAME,
    RoundConfig,
    TreeParams,
    checked_encoder,
    checked_model,
    derive_config,
)
from shoal.common.wire.messages import ReportBatch
from shoal.common.wire.models import DeviceMessage
from shoal.server.decoders.tree.accumulate import LevelAccumulator
from shoal.server.decoders.tree.decoder import TreeDecoder, privacy_statement
from shoal.server.rounds.kinds.base import RoundRequest, RoundsView, Storage
from shoal.server.rounds.kinds.results import result_dict


class TreeServer:
    name = NAME
    encoders = ENCODER_CHOICES
    refinable = True
    refine_split = 1
    storage: Storage = "reports"
    decode_draws_noise = False  # devices randomise: a decode is post-processing

    def derive(self, request: RoundRequest, round_id: str) -> RoundConfig:
        tuning = dict(request.tuning)  # checked by name and type at the edge (api_models.TreeTuningIn)
        if "tree" in tuning:
            tuning["tree"] = TreeParams(**tuning["tree"])
        return derive_config(
            request.n_expected, request.dim, request.k, request.epsilon, encoder=checked_encoder(request.encoder),
            bound=request.bound, round_id=round_id, model=checked_model(request.model), delta=request.delta,
            min_batch=request.min_batch, **tuning,
        )

    def direct_model(self, config: RoundConfig) -> type[BaseModel] | str:
        return DeviceMessage

    def sealed_model(self, config: RoundConfig) -> type[BaseModel] | str:
        return DeviceMessage

    def rows(self, config: RoundConfig, messages: Sequence[BaseModel]) -> ReportBatch:
        reports = [m for m in messages if isinstance(m, DeviceMessage)]
        if len(reports) != len(messages):
            raise ReportError(f"round {config.round_id} is a tree round: it takes hist/vec reports, not sketches")
        return ReportBatch.from_messages(reports, config)

    def row_width(self, config: RoundConfig) -> tuple[int, type[np.uint64] | type[np.float64]]:
        raise NotImplementedError("tree reports are stored as report rows, not payloads")

    def accumulator(self, config: RoundConfig) -> LevelAccumulator:
        return LevelAccumulator(config)

    def decode(self, config: RoundConfig, acc: LevelAccumulator, rounds: RoundsView, round_id: str) -> dict[str, Any]:
        return result_dict(round_id, TreeDecoder(np.random.default_rng()).decode(acc, consume=True))

    def privacy(self, config: RoundConfig) -> tuple[object, dict[str, Any]]:
        return config.round_event, privacy_statement(config)


KIND = TreeServer()
