"""The central kind on the server (seeds 000 and 003): the server is the curator.

Devices seal their point (in the unit ball) to the server; the shuffler
only carries the sealed messages. Points are stored as float64 payload
rows and decoded by ``server/decoders/central/pipeline.py``. The privacy
statement says what this model is: central (eps, delta) for the release,
and no guarantee at all against the server itself."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel

from shoal.common.errors import ConfigError, DecodeError
from shoal.common.kinds.central import ALGORITHMS, NAME, CentralConfig, derive_central_round
from shoal.common.wire.models import PointMessage, point_rows
from shoal.server.decoders.central.pipeline import central_kmeans, privacy_statement
from shoal.server.rounds.kinds.base import RoundRequest, RoundsView, Storage

# ``POST /rounds`` with model "central" names its algorithm as the encoder ("maxcover": the default rule).
ENCODERS = ("maxcover", *ALGORITHMS)


class PointRows:
    """The accumulator: the stored points themselves (a curator needs them all;
    merging two is concatenation)."""

    def __init__(self, dim: int) -> None:
        self.parts: list[NDArray[np.float64]] = []
        self.dim = dim

    def add(self, rows: NDArray[np.float64]) -> None:
        """Stored rows hold a device's records side by side, NaN where it sent fewer."""
        pts = np.asarray(rows, dtype=np.float64).reshape(-1, self.dim)
        self.parts.append(pts[~np.isnan(pts).any(axis=1)])

    def merge(self, other: PointRows) -> None:
        self.parts.extend(other.parts)

    def points(self) -> NDArray[np.float64]:
        return np.concatenate(self.parts) if self.parts else np.zeros((0, self.dim))


class CentralServer:
    name = NAME
    encoders = ENCODERS
    refinable = False
    refine_split = 1
    storage: Storage = "payloads"
    decode_draws_noise = True  # the curator's noise on the raw points: its answer is released once

    def derive(self, request: RoundRequest, round_id: str) -> CentralConfig:
        if request.model != "central":
            raise ConfigError(f"algorithm {request.encoder!r} runs in the central model, not {request.model!r}")
        algorithm = "auto" if request.encoder == "maxcover" else request.encoder
        return derive_central_round(request.n_expected, request.dim, request.k, request.epsilon, request.delta,
                                    request.bound, algorithm=algorithm, seed=secrets.randbits(31), round_id=round_id,
                                    **request.tuning)

    def direct_model(self, config: CentralConfig) -> type[BaseModel] | str:
        return (f"round {config.round_id} is a central round: points travel sealed to the server, through the "
                "shuffler (POST /rounds/{id}/shuffled), never in the clear")

    def sealed_model(self, config: CentralConfig) -> type[BaseModel] | str:
        return PointMessage

    def rows(self, config: CentralConfig, messages: Sequence[BaseModel]) -> NDArray[np.float64]:
        return point_rows([m for m in messages if isinstance(m, PointMessage)], config.dim, config.records_per_device)

    def row_width(self, config: CentralConfig) -> tuple[int, type[np.uint64] | type[np.float64]]:
        return config.records_per_device * config.dim, np.float64

    def accumulator(self, config: CentralConfig) -> PointRows:
        return PointRows(config.dim)

    def decode(self, config: CentralConfig, acc: PointRows, rounds: RoundsView, round_id: str) -> dict[str, Any]:
        x = acc.points()
        if x.shape[0] == 0:
            raise DecodeError(f"round {round_id} has no points to decode")
        fit = central_kmeans(x, config.spec, np.random.default_rng(secrets.randbits(128)))
        centers = config.bound.project_ball(fit.centers)
        out = {
            "round_id": round_id,
            "centers": config.bound.from_ball(centers).tolist(),
            "ball_centers": centers.tolist(),
            "sizes": [float(s) for s in fit.sizes],
            "privacy": _statement(config, fit.lift_steps),
            "diagnostics": dict(fit.diagnostics, algorithm=config.spec.algorithm),
        }
        if fit.elbow is not None:  # greedy-001: the centers are ordered; the first k' answer k'
            out["elbow"] = {"costs": fit.elbow, "suggested_k": fit.suggested_k, "objective": config.spec.objective,
                            "units": "the data mapped into the unit ball (the round's bound)",
                            "rule": "the largest k' whose cost drop from k' - 1 is at least half of cost(k') "
                                    "and 3 noise deviations (server/decoders/central/greedy.py)"}
        return out

    def privacy(self, config: CentralConfig) -> tuple[object, dict[str, Any]]:
        return config.event, _statement(config)


def _statement(config: CentralConfig, steps: int | None = None) -> dict[str, Any]:
    """The run's statement (per record) and what it means for a device with all its records."""
    out = privacy_statement(config.spec, steps)
    eps, delta = config.device_guarantee()
    out["records_per_device"] = config.records_per_device
    out["device_level"] = {"epsilon": eps, "delta": delta,
                           "rule": "one record" if config.records_per_device == 1 else
                           f"group privacy over {config.records_per_device} records"}
    return out


KIND = CentralServer()
