"""The refine kind on the server: one Lloyd step on a done round's centers
through secure summation (``common/kinds/refine.py``). Opened on a parent
round (``derive_child``), never from ``POST /rounds``; refinable itself (a
chain of Lloyd steps, each on the last one's centers: the partition stage's
``kinds.partition_plan.refine_rounds``); its privacy statement composes the
family's first round and every round opened in the family."""

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
    refinable = True  # a chain: the next Lloyd step from its centers (the partition stage's, issue 41)
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
        """Check that no share is missing and take one Lloyd step; on a refine round (a chain)
        combine it with the parent's centers by their stated noise variance
        (``diagnostics.center_variance`` of the parent's result, ``decoders/refine.py``). The
        privacy statement composes the family's first round and every round opened in the
        family so far (``shares.child_privacy``)."""
        params = config.secure_sum
        sums, devices = acc.decode()
        answer = refine_answer(sums, config, np.random.default_rng(secrets.randbits(128)),
                               parent_variance(rounds.result_of(config.parent_id), config.k))
        privacy = child_privacy(config, rounds)
        return {
            "round_id": round_id,
            "centers": config.bound.from_ball(answer.centers).tolist(),
            "ball_centers": answer.centers.tolist(),
            "sizes": [float(s) for s in answer.sizes],
            "privacy": privacy,
            "diagnostics": {"devices": devices, "shares": acc.shares, "shares_per_device": params.shares,
                            "modulus_bits": params.bits, "noise_std": params.noise_std, "parent": config.parent_id,
                            "candidates": config.k,
                            "center_variance": [None if np.isnan(v) else float(v) for v in answer.variance],
                            "combined": [float(v) for v in answer.lam]},
        }

    def privacy(self, config: RefineConfig) -> tuple[object, dict[str, Any]]:
        raise ConfigError(f"round {config.round_id} is a refine round: its statement is composed when it is decoded")


def parent_variance(parent_result: dict[str, Any] | None, k: int) -> np.ndarray | None:
    """The parent's centers' noise variances where its result states them (a refine round's
    ``diagnostics.center_variance``, null: none), k of them; else None (a first round's centers)."""
    stated = ((parent_result or {}).get("diagnostics") or {}).get("center_variance")
    if not isinstance(stated, list) or len(stated) != k:
        return None
    return np.asarray([np.nan if v is None else float(v) for v in stated], dtype=np.float64)


KIND = RefineServer()
