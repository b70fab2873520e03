"""The refine kind on the server: one Lloyd step on a done round's centers
through secure summation (``common/kinds/refine.py``). Opened on a parent
round (``derive_child``), never from ``POST /rounds``; its privacy statement
composes the parent and every round opened on it."""

from __future__ import annotations

import secrets
from typing import Any

import numpy as np

from shoal.common.bounds import PublicBound
from shoal.common.errors import ConfigError
from shoal.common.kinds.refine import NAME, RefineConfig, derive_refine
from shoal.server.decoders.refine import refine_answer
from shoal.server.decoders.shares import ShareTotal
from shoal.server.rounds.kinds.base import (
    RefineRequest,
    RoundRequest,
    RoundsView,
    parent_ball_centers,
)
from shoal.server.rounds.kinds.shares import SharesOnly, child_privacy


class RefineServer(SharesOnly):
    name = NAME
    encoders: tuple[str, ...] = ()
    refinable = False
    refine_split = 1
    what = "a refine round"

    def derive(self, request: RoundRequest, round_id: str) -> RefineConfig:
        raise ConfigError("a refine round is opened on a done round: POST /rounds/{id}/refine")

    def derive_child(self, parent_id: str, parent_result: dict[str, Any], bound: PublicBound,
                     request: RefineRequest, round_id: str) -> RefineConfig:
        ball = parent_ball_centers(parent_result, bound)
        return derive_refine(parent_id, ball, bound, request.epsilon, request.delta,
                             request.min_devices, request.max_devices, round_id=round_id,
                             split=request.split or 1, seed=secrets.randbits(31))

    def decode(self, config: RefineConfig, acc: ShareTotal, rounds: RoundsView, round_id: str) -> dict[str, Any]:
        """Check that no share is missing and take one Lloyd step. The privacy
        statement composes the parent round and every round opened on it so
        far (``shares.child_privacy``)."""
        params = config.secure_sum
        sums, devices = acc.decode()
        centers, sizes = refine_answer(sums, config, np.random.default_rng(secrets.randbits(128)))
        privacy = child_privacy(config, rounds)
        return {
            "round_id": round_id,
            "centers": config.bound.from_ball(centers).tolist(),
            "ball_centers": centers.tolist(),
            "sizes": [float(s) for s in sizes],
            "privacy": privacy,
            "diagnostics": {"devices": devices, "shares": acc.shares, "shares_per_device": params.shares,
                            "modulus_bits": params.bits, "noise_std": params.noise_std, "parent": config.parent_id,
                            "candidates": config.k},
        }

    def privacy(self, config: RefineConfig) -> tuple[object, dict[str, Any]]:
        raise ConfigError(f"round {config.round_id} is a refine round: its statement is composed when it is decoded")


KIND = RefineServer()
