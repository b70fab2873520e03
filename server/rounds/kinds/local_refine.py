"""The local refine kind on the server: one Lloyd step on a done local
round's centers, from fresh devices' eps-LDP codebook reports
(``common/kinds/local_refine.py``). Opened on a parent round
(``derive_child``), never from ``POST /rounds``."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel

from shoal.common.bounds import PublicBound
from shoal.common.errors import ConfigError, ReportError
from shoal.common.kinds.local_refine import (
    NAME,
    LocalRefineConfig,
    count_noise_sd,
    derive_local_refine,
)
from shoal.common.wire.models import CodebookMessage, codebook_rows
from shoal.server.decoders.local_refine import (
    CodebookTotal,
    local_refine_answer,
    local_refine_statement,
)
from shoal.server.rounds.kinds.base import (
    RefineRequest,
    RoundRequest,
    RoundsView,
    Storage,
    parent_ball_centers,
)


class LocalRefineServer:
    name = NAME
    encoders: tuple[str, ...] = ()
    refinable = False
    refine_split = 1
    storage: Storage = "payloads"
    decode_draws_noise = False  # devices randomise: a decode is post-processing

    def derive(self, request: RoundRequest, round_id: str) -> LocalRefineConfig:
        raise ConfigError("a local refine round is opened on a done round: POST /rounds/{id}/refine")

    def derive_child(self, parent_id: str, parent_result: dict[str, Any], bound: PublicBound,
                     request: RefineRequest, round_id: str) -> LocalRefineConfig:
        ball = parent_ball_centers(parent_result, bound)
        return derive_local_refine(parent_id, ball, bound, request.epsilon, seed=secrets.randbits(63),
                                   round_id=round_id, split=request.split or 1)

    def direct_model(self, config: LocalRefineConfig) -> type[BaseModel] | str:
        return CodebookMessage

    def sealed_model(self, config: LocalRefineConfig) -> type[BaseModel] | str:
        return f"round {config.round_id} is a local refine round: its reports go directly to the server"

    def rows(self, config: LocalRefineConfig, messages: Sequence[BaseModel]) -> NDArray[np.uint64]:
        reports = [m for m in messages if isinstance(m, CodebookMessage)]
        if len(reports) != len(messages):
            raise ReportError(f"round {config.round_id} is a local refine round: every report needs a nonce and an index")
        return codebook_rows(reports, config.privunit.candidates)

    def row_width(self, config: LocalRefineConfig) -> tuple[int, type[np.uint64] | type[np.float64]]:
        return 2, np.uint64

    def accumulator(self, config: LocalRefineConfig) -> CodebookTotal:
        return CodebookTotal(config)

    def decode(self, config: LocalRefineConfig, acc: CodebookTotal, rounds: RoundsView,
               round_id: str) -> dict[str, Any]:
        centers, sizes, lam = local_refine_answer(acc, np.random.default_rng(secrets.randbits(128)))
        _, parent_privacy = rounds.privacy_of(config.parent_id)
        return {
            "round_id": round_id,
            "centers": config.bound.from_ball(centers).tolist(),
            "ball_centers": centers.tolist(),
            "sizes": [float(s) for s in sizes],
            "privacy": local_refine_statement(config, parent_privacy),
            "diagnostics": {"devices": acc.devices, "count_noise_sd": count_noise_sd(acc.devices, config),
                            "parent": config.parent_id, "candidates": config.k, "block_dim": config.privunit.dim,
                            "shrink": lam.tolist()},
        }

    def privacy(self, config: LocalRefineConfig) -> tuple[object, dict[str, Any]]:
        raise ConfigError(f"round {config.round_id} is a local refine round: its statement is composed when it is decoded")


KIND = LocalRefineServer()
