"""The pydantic wire models of every message, and the server's checks of them.

The server (and the shuffler) parse and validate each message with these
models; a device never imports them (issue 45, Build 5: pydantic was a
third of the device's import): it writes the same JSON with the standard
library (``wire/messages.py``, ``device_json``), whose limits and
helpers these models import (the import goes one way only).

Every message names the wire protocol it was built under (issue 45, Build
2): a version this build does not speak is refused (the server answers 422
naming it).
"""

from __future__ import annotations

import base64
from typing import Annotated, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    FiniteFloat,
    StrictInt,
    model_validator,
)

from shoal.common.errors import ReportError
from shoal.common.kinds.base import MAX_RECORDS
from shoal.common.kinds.sketch import MAX_DEVICE_RECORDS
from shoal.common.mechanisms.secure_sum import SecureSumParams
from shoal.common.mechanisms.sketch import MAX_SKETCH, SketchParams, off_grid
from shoal.common.randomness.public_stream import PROTOCOL_VERSION, PROTOCOLS
from shoal.common.wire.fields import MAX_POINT_DIM, ball_rows, new_message_id


def _spoken(version: int) -> int:
    if version not in PROTOCOLS:
        raise ValueError(f"protocol version {version} is not spoken here: this server accepts protocol "
                         f"{', '.join(map(str, PROTOCOLS))}")
    return version


# Every message names the wire protocol it was built under (issue 45, Build 2): a
# version this build does not speak is refused (the server answers 422 naming it).
# Absent means the current one: a device of an older protocol cannot build a message
# for a round of this one (it refuses the config, whose "protocol" field it does not know).
Protocol = Annotated[StrictInt, AfterValidator(_spoken)]


class HistReport(BaseModel):
    """OLH report on the device's node at one sampled level."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    level: int = Field(ge=1, le=62)
    seed_index: int = Field(ge=0, lt=1 << 16)
    bucket: int = Field(ge=0, lt=1 << 20)


class VecReport(BaseModel):
    """Codebook PrivUnit (``privunit.py``) of the point signed by its node's
    Hadamard column: a 64-bit nonce (hex) naming the device's public
    candidates, and the index of the candidate it picked."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    level: int = Field(ge=0, le=62)
    row: int = Field(ge=0, lt=1 << 20)
    nonce: str = Field(pattern=r"^[0-9a-f]{16}$")
    index: int = Field(ge=0, lt=1 << 16)


class DeviceMessage(BaseModel):
    """One device's contribution to one round."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    round_id: str = Field(min_length=1, max_length=64)
    message_id: str = Field(pattern=r"^[0-9a-f]{32}$")
    protocol: Protocol = PROTOCOL_VERSION
    hist: HistReport | None = None
    vec: VecReport | None = None


class ShareMessage(BaseModel):
    """One additive share of a device's secure-sum vector (``secure_sum.py``):
    ``share`` is base64 of (length + 1) little-endian uint64 values mod q.
    Sealed to the server and mixed by the shuffler with every other share."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    round_id: str = Field(min_length=1, max_length=64)
    message_id: str = Field(pattern=r"^[0-9a-f]{32}$")
    protocol: Protocol = PROTOCOL_VERSION
    share: str = Field(min_length=4, max_length=2_000_000)


class SketchMessage(BaseModel):
    """A local-model sketch round's report (``kinds/sketch.py``): the scrambled
    sketch as 2m reals (real parts, then imaginary parts) and the number of
    records n0 it summarises (public under seed 002's replace-one relation)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    round_id: str = Field(min_length=1, max_length=64)
    message_id: str = Field(pattern=r"^[0-9a-f]{32}$")
    protocol: Protocol = PROTOCOL_VERSION
    sketch: list[FiniteFloat] = Field(min_length=2, max_length=2 * MAX_SKETCH)
    n0: int = Field(ge=1, le=MAX_DEVICE_RECORDS)


def sketch_rows(messages: list[SketchMessage], params: SketchParams) -> NDArray[np.float64]:
    """(n, 2m + 1) float64: each sketch's 2m reals then its n0, checked against
    the round's m and the public noise grid of each device's n0."""
    size = params.size
    bad = next((len(m.sketch) for m in messages if len(m.sketch) != 2 * size), None)
    if bad is not None:
        raise ReportError(f"sketch has {bad} reals, the round's m = {size} needs {2 * size}")
    rows = np.array([[*m.sketch, m.n0] for m in messages], dtype=np.float64).reshape(len(messages), 2 * size + 1)
    stray = off_grid(rows[:, :-1], rows[:, -1].astype(np.int64), params)
    if stray:
        raise ReportError(f"{stray} sketch values are not on the round's public noise grid for their n0")
    return rows


class CodebookMessage(BaseModel):
    """A local refine round's report (``kinds/local_refine.py``): one codebook
    PrivUnit draw, its 64-bit nonce (hex) and the picked candidate's index."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    round_id: str = Field(min_length=1, max_length=64)
    message_id: str = Field(pattern=r"^[0-9a-f]{32}$")
    protocol: Protocol = PROTOCOL_VERSION
    nonce: str = Field(pattern=r"^[0-9a-f]{16}$")
    index: int = Field(ge=0, lt=1 << 16)


def codebook_rows(messages: list[CodebookMessage], candidates: int) -> NDArray[np.uint64]:
    """(n, 2) uint64: each report's nonce and index, the index checked against
    the round's number of candidates N."""
    rows = np.array([[int(m.nonce, 16), m.index] for m in messages], dtype=np.uint64).reshape(len(messages), 2)
    if rows.shape[0] and int(rows[:, 1].max()) >= candidates:
        raise ReportError(f"report index {int(rows[:, 1].max())} is not one of the round's {candidates} candidates")
    return rows



class PointMessage(BaseModel):
    """A central round's report: the device's records (one or up to the
    round's ``records_per_device``), each clipped into the round's bound and
    mapped into the unit ball (``PublicBound.to_ball``). Raw data: it travels
    sealed to the server (the curator), never in the clear, and in one
    message, so the server can hold a device to its number of records even
    after the shuffler has mixed the messages."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    round_id: str = Field(min_length=1, max_length=64)
    message_id: str = Field(pattern=r"^[0-9a-f]{32}$")
    protocol: Protocol = PROTOCOL_VERSION
    points: list[Annotated[list[FiniteFloat], Field(min_length=1, max_length=MAX_POINT_DIM)]] = Field(
        min_length=1, max_length=MAX_RECORDS)


def point_rows(messages: list[PointMessage], dim: int, per_device: int = 1) -> NDArray[np.float64]:
    """(messages, per_device * dim) float64: each message's points of the unit
    ball (a little float slack allowed, then clipped), NaN rows where a
    device sent fewer than ``per_device``."""
    many = next((len(m.points) for m in messages if len(m.points) > per_device), None)
    if many is not None:
        raise ReportError(f"a device sent {many} records, the round takes at most {per_device} per device")
    bad = next((len(p) for m in messages for p in m.points if len(p) != dim), None)
    if bad is not None:
        raise ReportError(f"point has {bad} coordinates, the round has dim {dim}")
    rows = np.full((len(messages), per_device, dim), np.nan)
    for i, m in enumerate(messages):  # one row per message: at most per_device short lists each
        rows[i, :len(m.points)] = m.points
    return ball_rows(rows.reshape(-1, dim)).reshape(len(messages), per_device * dim)


class StreamMessage(BaseModel):
    """A continual round's event (``common/kinds/continual.py``): the insertion
    of one item (the device's point, clipped into the bound and mapped into
    the unit ball) or its deletion, named by a random 128-bit token the
    device chose at insertion. Raw data: sealed to the server (the curator)
    through the shuffler; the server assigns it to the step open when it
    commits it (``server/rounds/steps.py``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    round_id: str = Field(min_length=1, max_length=64)
    message_id: str = Field(pattern=r"^[0-9a-f]{32}$")
    protocol: Protocol = PROTOCOL_VERSION
    op: Literal["insert", "delete"]
    item: str = Field(pattern=r"^[0-9a-f]{32}$")
    point: list[FiniteFloat] | None = Field(default=None, min_length=1, max_length=MAX_POINT_DIM)

    @model_validator(mode="after")
    def _point_for_inserts_only(self) -> StreamMessage:
        if (self.op == "insert") != (self.point is not None):
            raise ValueError("an insert carries its point; a delete carries only the item's token")
        return self


def share_messages(shares: NDArray[np.uint64], round_id: str) -> list[list[ShareMessage]]:
    """Wire form of ``secure_sum.encode_devices`` output (n, s, L + 1): per device, its s share messages."""
    le = np.ascontiguousarray(shares, dtype="<u8")
    return [
        [ShareMessage(round_id=round_id, message_id=new_message_id(), share=base64.b64encode(le[i, j].tobytes()).decode())
         for j in range(le.shape[1])]
        for i in range(le.shape[0])
    ]


def share_array(messages: list[ShareMessage], params: SecureSumParams) -> NDArray[np.uint64]:
    """(m, L + 1) share values from wire messages; each must have L + 1 values below q."""
    out = np.empty((len(messages), params.length + 1), dtype=np.uint64)
    for i, msg in enumerate(messages):
        try:
            raw = base64.b64decode(msg.share, validate=True)
        except ValueError as exc:
            raise ReportError(f"share is not base64: {exc}") from exc
        if len(raw) != 8 * (params.length + 1):
            raise ReportError(f"share has {len(raw)} bytes, expected {8 * (params.length + 1)}")
        out[i] = np.frombuffer(raw, dtype="<u8")
    if np.any(out >= np.uint64(params.modulus)):
        raise ReportError(f"share values must be below q = 2^{params.bits}")
    return out
