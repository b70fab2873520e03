"""The server half of a round kind (``common/kinds/__init__.py`` explains the three halves).

Domain objects only: the edge turns its pydantic models into a
:class:`RoundRequest` / :class:`RefineRequest`; a kind never sees HTTP.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel

from shoal.common.bounds import PublicBound
from shoal.common.wire.messages import ReportBatch

# How a kind's reports are kept: "reports" is the compact per-report row table
# (tree rounds, committed in groups); "payloads" is fixed-width rows (sketches, shares).
# "events" is payload rows whose word 0 the store stamps with the step open at commit (continual rounds,
# stepped by ``rounds/steps.py`` instead of decoded in one pass).
Storage = Literal["reports", "payloads", "events"]
Rows: TypeAlias = ReportBatch | NDArray[Any]


@dataclass(frozen=True)
class RoundRequest:
    """What an operator asks for (``POST /rounds``); every other parameter is
    derived by the kind that serves ``encoder``."""

    k: int
    dim: int
    epsilon: float
    n_expected: int
    encoder: str
    model: str = "local"
    delta: float = 0.0
    min_batch: int = 0
    bound: PublicBound = field(default_factory=lambda: PublicBound(radius=1.0))
    tuning: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RefineRequest:
    """A refine round on a done round's centers (``POST /rounds/{id}/refine``)."""

    epsilon: float
    delta: float
    min_devices: int
    max_devices: int | None = None
    split: int | None = None  # candidates per parent center; None: the parent kind's ``refine_split``
    model: str | None = None  # "local" or "shuffle"; None: the parent round's model


@dataclass(frozen=True)
class ElbowRequest:
    """An elbow round on a done round's ordered centers (``POST /rounds/{id}/elbow``)."""

    epsilon: float
    delta: float
    min_devices: int
    max_devices: int | None = None


def parent_ball_centers(parent_result: dict[str, Any], bound: PublicBound) -> NDArray[np.float64]:
    """A done parent's centers in the unit ball, as a round opened on it takes them
    (older results carry only ``centers``, in the data's space)."""
    ball = parent_result.get("ball_centers") or bound.to_ball(np.asarray(parent_result["centers"])).tolist()
    return np.asarray(ball, dtype=np.float64)


class RoundsView(Protocol):
    """What a decoder may ask of the service about other rounds (composition)."""

    def privacy_of(self, round_id: str) -> tuple[object, dict[str, Any]]:
        """A decoded round's event record and privacy statement."""
        ...

    def opened_on(self) -> dict[str, list[tuple[str, str, Any]]]:
        """(round id, kind, parsed config) of every round opened on another round
        (refine and elbow rounds), by the parent's id, siblings in round-id order:
        one read of the rounds, however deep a family is (``shares.descendants``
        walks it)."""
        ...

    def parent_of(self, round_id: str) -> str | None:
        """The round ``round_id`` was opened on (None: a first round)."""
        ...

    def result_of(self, round_id: str) -> dict[str, Any] | None:
        """A round's stored result (None: not decoded)."""
        ...


class Accumulator(Protocol):
    """Linear and mergeable: the sum of the round's reports in the form its
    decoder reads; two accumulators of one round merge into the one of the
    union of their reports (the unit a distributed decode reduces)."""

    def add(self, rows: Any) -> None: ...

    def merge(self, other: Any) -> None: ...


class ServerKind(Protocol):
    name: str
    encoders: tuple[str, ...]  # the ``encoder`` values of POST /rounds it serves (none: made another way)
    refinable: bool  # can a refine round be opened on its centers
    refine_split: int  # candidates per center a refine round on it takes by default (``kinds/refine.py``)
    storage: Storage
    # Does ``decode`` draw private randomness on what the server holds (a
    # curator's noise on raw points)? Then its first result is the round's one
    # release: ``/cluster`` never decodes it again (issue 44). False: the
    # devices did all the randomising, and a re-decode is post-processing.
    decode_draws_noise: bool

    def derive(self, request: RoundRequest, round_id: str) -> Any:
        """The round's config from an operator's request (ConfigError if it cannot be met)."""
        ...

    def direct_model(self, config: Any) -> type[BaseModel] | str:
        """The wire model of a report posted directly to the server, or why there is none."""
        ...

    def sealed_model(self, config: Any) -> type[BaseModel] | str:
        """The wire model of one item of a shuffled batch, or why there is none."""
        ...

    def rows(self, config: Any, messages: Sequence[BaseModel]) -> Rows:
        """A batch of parsed messages checked against the config and turned into
        stored rows; a ShoalError refuses the whole batch."""
        ...

    def row_width(self, config: Any) -> tuple[int, type[np.uint64] | type[np.float64]]:
        """A payload row's width and type (``storage == "payloads"``)."""
        ...

    def accumulator(self, config: Any) -> Accumulator:
        ...

    def decode(self, config: Any, acc: Any, rounds: RoundsView, round_id: str) -> dict[str, Any]:
        """The result document of ``GET /rounds/{id}/result``, privacy statement included."""
        ...

    def privacy(self, config: Any) -> tuple[object, dict[str, Any]]:
        """The round's event record and privacy statement (a child round composes them)."""
        ...
