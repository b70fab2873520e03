"""HTTP-edge models: separate input and output shapes, mirroring the dataclasses."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from shoal.common.messages import DeviceMessage, SketchMessage


class BoundIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    radius: float | None = Field(default=None, gt=0)
    low: list[float] | None = Field(default=None, max_length=10_000)
    high: list[float] | None = Field(default=None, max_length=10_000)

    @model_validator(mode="after")
    def _finite(self) -> BoundIn:
        for v in [self.radius or 1.0, *(self.low or []), *(self.high or [])]:
            if not math.isfinite(v):
                raise ValueError("bounds must be finite numbers")
        return self


class CreateRoundIn(BaseModel):
    """What an operator gives; every other parameter is derived (``derive_config``)."""

    model_config = ConfigDict(extra="forbid")
    k: int = Field(ge=1, le=1000)
    dim: int = Field(ge=1, le=10_000)
    epsilon: float = Field(gt=0, le=50)
    n_expected: int = Field(ge=1, le=10**9)
    encoder: Literal["lsh", "nettree", "sketch"] = Field(
        "lsh", description="sketch: scrambled compressive sketches decoded by CL-OMPR (common/sketch_round.py)")
    model: Literal["local", "shuffle"] = Field(
        "local", description="shuffle: epsilon/delta are the central target for batches of >= min_batch")
    delta: float | None = Field(None, gt=0, lt=1, description="shuffle model only")
    min_batch: int | None = Field(None, ge=2, le=10**9, description=(
        "shuffle model only: smallest batch released (sketch rounds: fewest devices whose noise shares give the guarantee)"))
    bound: BoundIn = Field(default_factory=lambda: BoundIn(radius=1.0))
    tuning: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _shuffle_fields(self) -> CreateRoundIn:
        if self.model == "shuffle" and (self.delta is None or self.min_batch is None):
            raise ValueError("a shuffle round needs delta and min_batch")
        if self.model == "local" and (self.delta is not None or self.min_batch is not None):
            raise ValueError("delta and min_batch apply to shuffle rounds only")
        return self

    @field_validator("epsilon")
    @classmethod
    def _finite_eps(cls, v: float) -> float:
        if not math.isfinite(v):
            raise ValueError("epsilon must be finite")
        return v


class RefineIn(BaseModel):
    """A refine round on a done shuffle/local round: one Lloyd step through secure summation."""

    model_config = ConfigDict(extra="forbid")
    epsilon: float = Field(gt=0, le=50, description="central epsilon of the refine round (composes with the parent's)")
    delta: float = Field(gt=0, lt=1)
    min_devices: int = Field(ge=16, le=10**9, description="fewest devices whose noise shares give the guarantee")
    max_devices: int | None = Field(None, ge=16, le=10**9, description="most devices decoded (overflow bound); default 100 x min")

    @model_validator(mode="after")
    def _order(self) -> RefineIn:
        if not math.isfinite(self.epsilon):
            raise ValueError("epsilon must be finite")
        if self.max_devices is not None and self.max_devices < self.min_devices:
            raise ValueError("max_devices must be >= min_devices")
        return self


class RoundOut(BaseModel):
    id: str
    state: str
    reports: int
    created: float
    config: dict[str, Any]
    server_public_key: str
    error: str | None = None


class BatchIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    messages: list[DeviceMessage | SketchMessage] = Field(min_length=1)


class AcceptedOut(BaseModel):
    accepted: int
    duplicates: int


class SealedBatchIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sealed: list[str] = Field(min_length=1, description="base64 sealed messages")


class ResultOut(BaseModel):
    round_id: str
    centers: list[list[float]]
    sizes: list[float]
    privacy: dict[str, Any]
    diagnostics: dict[str, Any]
    ball_centers: list[list[float]] | None = None
