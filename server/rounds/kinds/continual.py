"""The continual kind on the server (issue 18, Build 5): the server is the curator of a stream.

Devices seal events to the server through the shuffler: the insertion of
their point (in the unit ball) under an item token, and later its
deletion by that token (``common/wire/messages.StreamMessage``). Each is stored
as one uint64 row the store stamps with the step open at its commit
(``Store.add_events``, storage "events"); an operator closes steps
(``POST /rounds/{id}/steps``) and the round's curator
(``server/decoders/continual/stream.ContinualGreedy``) turns each closed
step into a release (``server/rounds/steps.py``). The statement says what
this model is: event-level (eps, delta) over the whole release sequence,
and no guarantee against the server itself.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel

from shoal.common.errors import ConfigError, ReportError
from shoal.common.kinds.continual import (
    DEFAULT_LEVELS,
    NAME,
    ContinualConfig,
    continual_statement,
    derive_continual_round,
)
from shoal.common.wire.fields import ball_rows
from shoal.common.wire.models import StreamMessage
from shoal.server.decoders.continual.events import DELETE, HEAD, INSERT, event_rows
from shoal.server.decoders.continual.stream import ContinualGreedy, StepRelease
from shoal.server.rounds.kinds.base import RoundRequest, RoundsView, Storage

ENCODERS: tuple[str, ...] = ("continual",)


class NoAccumulator:
    """A continual round is not decoded in one pass: its steps are (``rounds/steps.py``)."""

    def add(self, rows: Any) -> None:
        return None

    def merge(self, other: Any) -> None:
        return None


class ContinualServer:
    name = NAME
    encoders = ENCODERS
    refinable = False
    refine_split = 1
    storage: Storage = "events"
    decode_draws_noise = True  # the curator's tree noise (``rounds/steps.py`` keeps each step's release)

    def derive(self, request: RoundRequest, round_id: str) -> ContinualConfig:
        if request.model != "central":
            raise ConfigError(f"a continual round runs in the central (curator) model, not {request.model!r}")
        tuning = dict(request.tuning)
        if "horizon" not in tuning:
            raise ConfigError("a continual round needs its horizon: tuning.horizon, the number of steps it releases")
        return derive_continual_round(request.dim, request.k, request.epsilon, request.delta, request.bound,
                                      horizon=int(tuning["horizon"]), levels=int(tuning.get("levels", DEFAULT_LEVELS)),
                                      objective=str(tuning.get("objective", "kmeans")), seed=secrets.randbits(31),
                                      round_id=round_id)

    def direct_model(self, config: ContinualConfig) -> type[BaseModel] | str:
        return (f"round {config.round_id} is a continual round: events travel sealed to the server, through the "
                "shuffler (POST /rounds/{id}/shuffled), never in the clear")

    def sealed_model(self, config: ContinualConfig) -> type[BaseModel] | str:
        return StreamMessage

    def rows(self, config: ContinualConfig, messages: Sequence[BaseModel]) -> NDArray[np.uint64]:
        """Each event as a row (the store stamps its step): points checked against
        the round's dimension and the unit ball (a little float slack, then clipped)."""
        msgs = [m for m in messages if isinstance(m, StreamMessage)]
        d = config.dim
        bad = next((len(m.point) for m in msgs if m.point is not None and len(m.point) != d), None)
        if bad is not None:
            raise ReportError(f"point has {bad} coordinates, the round has dim {d}")
        points = ball_rows(np.array([m.point if m.point is not None else [np.nan] * d for m in msgs],
                                    dtype=np.float64).reshape(-1, d))
        ops = np.array([INSERT if m.op == "insert" else DELETE for m in msgs], dtype=np.uint64)
        items = np.array([(int(m.item[:16], 16), int(m.item[16:], 16)) for m in msgs], dtype=np.uint64).reshape(-1, 2)
        return event_rows(ops, items, points)

    def row_width(self, config: ContinualConfig) -> tuple[int, type[np.uint64] | type[np.float64]]:
        return HEAD + config.dim, np.uint64

    def accumulator(self, config: ContinualConfig) -> NoAccumulator:
        return NoAccumulator()

    def curator(self, config: ContinualConfig, rng: np.random.Generator) -> ContinualGreedy:
        """The round's curator state before its first step (noise from ``rng``)."""
        return ContinualGreedy(config.params, rng)

    def release(self, config: ContinualConfig, step: StepRelease, round_id: str) -> dict[str, Any]:
        """A step's published document (post-processing of the curator's noisy sums only)."""
        centers = config.bound.project_ball(step.centers)
        return {
            "round_id": round_id, "step": step.step, "horizon": config.params.horizon,
            "centers": config.bound.from_ball(centers).tolist(), "ball_centers": centers.tolist(),
            "elbow": {"costs": step.elbow, "suggested_k": step.suggested_k, "objective": "kmeans",
                      "units": "the data mapped into the unit ball (the round's bound)",
                      "rule": "the coreset elbow (server/decoders/greedy_order.coreset_elbow)"},
            "diagnostics": step.diagnostics,
        }

    def decode(self, config: ContinualConfig, acc: Any, rounds: RoundsView, round_id: str) -> dict[str, Any]:
        raise ConfigError(f"round {round_id} is a continual round: it releases at every step "
                          "(POST /rounds/{id}/steps closes one; GET /rounds/{id}/steps reads them)")

    def privacy(self, config: ContinualConfig) -> tuple[object, dict[str, Any]]:
        return config.event, continual_statement(config.event)


KIND = ContinualServer()
