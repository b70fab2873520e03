"""The elbow kind on the server: every k' cost of a done round's ordered
centers, through secure summation (``common/kinds/elbow.py``). Opened on a
parent whose result carries an elbow (ordered centers: a tree round with
``tree.centers = "greedy"``) by ``POST /rounds/{id}/elbow``, never from
``POST /rounds``; its privacy statement composes the parent and every
round opened on it. Not on a curator round: the curator held the raw
points and releases its own elbow (``central/greedy.py``)."""

from __future__ import annotations

from typing import Any

from shoal.common.bounds import PublicBound
from shoal.common.errors import ConfigError
from shoal.common.kinds.elbow import NAME, ElbowConfig, derive_elbow
from shoal.server.decoders.elbow import BAND_LEVEL, elbow_from_drops
from shoal.server.decoders.shares import ShareTotal
from shoal.server.rounds.kinds.base import (
    ElbowRequest,
    RoundRequest,
    RoundsView,
    parent_ball_centers,
)
from shoal.server.rounds.kinds.shares import SharesOnly, child_privacy

RULE = ("the largest k' whose drop cost(k' - 1) - cost(k') is at least half of cost(k') and 3 noise sds of a "
        "drop (server/decoders/elbow.suggest_k)")


class ElbowServer(SharesOnly):
    name = NAME
    encoders: tuple[str, ...] = ()
    refinable = False
    refine_split = 1
    what = "an elbow round"

    def derive(self, request: RoundRequest, round_id: str) -> ElbowConfig:
        raise ConfigError("an elbow round is opened on a done round with ordered centers: POST /rounds/{id}/elbow")

    def derive_child(self, parent_id: str, parent_result: dict[str, Any], bound: PublicBound,
                     request: ElbowRequest, round_id: str) -> ElbowConfig:
        """The parent's ordered centers and its elbow's objective; a parent whose
        centers are not ordered (no elbow in its result) has no k' to cost."""
        elbow = parent_result.get("elbow")
        if (parent_result.get("privacy") or {}).get("model") == "central":
            raise ConfigError(f"round {parent_id} is a curator round: the curator held the raw points and released "
                              "its elbow itself (its result's elbow); an elbow round is for ordered centers of the "
                              "local or shuffle model")
        if not isinstance(elbow, dict) or "objective" not in elbow:
            raise ConfigError(f"round {parent_id}'s centers are not in an order whose first k' answer k' (its result "
                              "has no elbow): open an elbow round on a tree round decoded with tuning "
                              "tree.centers 'greedy'")
        ball = parent_ball_centers(parent_result, bound)
        return derive_elbow(parent_id, ball, bound, str(elbow["objective"]), request.epsilon,
                            request.delta, request.min_devices, request.max_devices, round_id=round_id)

    def decode(self, config: ElbowConfig, acc: ShareTotal, rounds: RoundsView, round_id: str) -> dict[str, Any]:
        """Check that no share is missing; the curve, its simultaneous band and the
        suggested k' (``decoders/elbow.py``); the parent's centers, in order."""
        params = config.secure_sum
        drops, devices = acc.decode()
        curve, suggested, band = elbow_from_drops(drops, params, devices)
        centers = config.center_array
        return {
            "round_id": round_id,
            "centers": config.bound.from_ball(centers).tolist(),
            "ball_centers": centers.tolist(),
            "sizes": [],
            "elbow": {"costs": curve, "suggested_k": suggested, "objective": config.objective,
                      "units": "the data's cost of the first k' centers (sum over devices, unit ball of the "
                               "parent's bound)",
                      "rule": RULE,
                      "band_rule": f"covers every k' at once with probability {BAND_LEVEL:g}: "
                                   f"+-{band['band_z']:.3g} sds of each cost's noise (server/decoders/elbow.py)"},
            "privacy": child_privacy(config, rounds),
            "diagnostics": {"devices": devices, "shares": acc.shares, "shares_per_device": params.shares,
                            "modulus_bits": params.bits, "noise": params.noise, "drop_sd": band["drop_sd"],
                            "band_z": band["band_z"], "parent": config.parent_id,
                            "sizes": "not released by an elbow round; the parent's result has them"},
        }

    def privacy(self, config: ElbowConfig) -> tuple[object, dict[str, Any]]:
        raise ConfigError(f"round {config.round_id} is an elbow round: its statement is composed when it is decoded")


KIND = ElbowServer()
