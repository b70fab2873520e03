"""What a device sends: pydantic wire models, and the same reports as arrays.

A report carries only data-independent choices (level, OLH seed index,
Hadamard row) and randomiser outputs (GRR bucket, PrivUnit vector), plus the
round id and a random message id (DESIGN.md, "Encoders"). ``ReportBatch`` is
the columnar form used on every hot path; ``DeviceMessage`` is the JSON wire
form of one device's reports.

Over 300 lines because every kind's wire model is here: devices, the
shuffler and the server must parse one definition of each message.
"""

from __future__ import annotations

import base64
import secrets
from dataclasses import dataclass
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

from shoal.common.envelope import seal
from shoal.common.errors import ReportError
from shoal.common.privunit import decode
from shoal.common.public_random import PublicRandomness
from shoal.common.public_stream import PROTOCOL_VERSION, PROTOCOLS
from shoal.common.secure_sum import SecureSumParams
from shoal.common.sketch import MAX_SKETCH, SketchParams, off_grid
from shoal.common.sketch_round import MAX_DEVICE_RECORDS
from shoal.common.tree_round import RoundConfig


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
    """A local-model sketch round's report (``sketch_round.py``): the scrambled
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
    """A local refine round's report (``local_refine_round.py``): one codebook
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


MAX_POINT_DIM = 100_000
MAX_RECORDS = 64  # a central device's records in one sealed message (``CentralConfig.records_per_device``)


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


def ball_rows(points: NDArray[np.float64]) -> NDArray[np.float64]:
    """(m, dim) points checked to lie in the unit ball, with a little float slack
    (1e-6) that is then clipped away, so the curator's sensitivity holds exactly;
    all-NaN rows (no point) pass through. Raises ``ReportError`` naming the norm."""
    norms = np.linalg.norm(points, axis=1)
    if np.any(norms > 1 + 1e-6):
        raise ReportError(f"a point has norm {float(np.nanmax(norms)):.6g}: points are sent in the unit ball "
                          "(clip into the round's bound, then PublicBound.to_ball)")
    return points / np.where(np.isnan(norms), 1.0, np.maximum(norms, 1.0))[:, None]


class StreamMessage(BaseModel):
    """A continual round's event (``common/continual_round.py``): the insertion
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
    point: list[FiniteFloat] | None = Field(None, min_length=1, max_length=MAX_POINT_DIM)

    @model_validator(mode="after")
    def _point_for_inserts_only(self) -> StreamMessage:
        if (self.op == "insert") != (self.point is not None):
            raise ValueError("an insert carries its point; a delete carries only the item's token")
        return self


def new_message_id() -> str:
    """A random 128-bit id (hex): lets a server drop a retried duplicate."""
    return secrets.token_hex(16)


@dataclass
class ReportBatch:
    """Reports of many devices as columns; rows with level -1 carry no report.

    A vector report is its codebook nonce and index (what travels and is
    stored); ``vectors(config)`` decodes them. A simulation batch
    (``encode_arrays(..., wire=False)``) carries the decoded vectors in
    ``vec`` instead, index -1, and cannot be sent or stored."""

    round_id: str
    hist_level: NDArray[np.int64]
    hist_seed: NDArray[np.int64]
    hist_bucket: NDArray[np.int64]
    vec_level: NDArray[np.int64]
    vec_row: NDArray[np.int64]
    vec: NDArray[np.float64]
    vec_nonce: NDArray[np.uint64]
    vec_index: NDArray[np.int64]

    def __len__(self) -> int:
        return int(self.hist_level.shape[0])

    def select(self, rows: NDArray[np.bool_] | NDArray[np.int64] | slice) -> ReportBatch:
        """The reports at ``rows`` (a mask, indices or a slice)."""
        vec = self.vec[rows] if self.vec.shape[0] == len(self) else self.vec
        return ReportBatch(self.round_id, self.hist_level[rows], self.hist_seed[rows], self.hist_bucket[rows],
                           self.vec_level[rows], self.vec_row[rows], vec, self.vec_nonce[rows], self.vec_index[rows])

    @property
    def is_wire(self) -> bool:
        """Every vector report is a codebook index (not a simulation batch)."""
        return bool(np.all(self.vec_index[self.vec_level >= 0] >= 0))

    def vectors(self, config: RoundConfig) -> NDArray[np.float64]:
        """The decoded vector reports (n, d): zero rows where none was sent."""
        n = len(self)
        if config.vec_params is None and config.root_params is None:
            return np.zeros((n, 0))
        if self.vec.shape == (n, config.dim):
            return self.vec
        out = np.zeros((n, config.dim))
        if np.any(self.vec_index[self.vec_level >= 0] < 0):
            raise ReportError("vector reports carry neither codebook indices nor decoded vectors")
        key = PublicRandomness.from_config(config).vec_key
        for root in (True, False):
            has = (self.vec_level == 0) if root else (self.vec_level > 0)
            params = config.root_params if root else config.vec_params
            if params is not None and np.any(has):
                out[has] = decode(self.vec_nonce[has], self.vec_index[has], params, key)
        return out

    def validate(self, config: RoundConfig) -> None:
        """Raise ReportError unless every report fits ``config``."""
        n = len(self)
        for name in ("hist_seed", "hist_bucket", "vec_level", "vec_row"):
            if getattr(self, name).shape != (n,):
                raise ReportError(f"{name} has shape {getattr(self, name).shape}, expected ({n},)")
        has_h = self.hist_level >= 0
        has_v = self.vec_level >= 0
        root = has_v & (self.vec_level == 0)
        tree = ~root
        # A device sends every report its round kind requires (issue 13: 200,000
        # empty messages were counted as devices and inflated published sizes):
        # a root device its root report alone, every other device the tree's.
        if config.root_params is None and np.any(root):
            raise ReportError("this round takes no root (level-0) vector reports")
        if np.any(root & has_h):
            raise ReportError(f"{int(np.sum(root & has_h))} message(s) carry a root report and a hist report; "
                              "a root device sends its root report alone")
        if config.levels == 0 and np.any(tree):
            raise ReportError(f"{int(np.sum(tree))} message(s) carry no root report; this mean-only round needs one in every message")
        if config.hist_params is not None and np.any(tree & ~has_h):
            raise ReportError(f"{int(np.sum(tree & ~has_h))} message(s) carry neither a root report nor a hist report; "
                              "this round needs one of them in every message")
        if config.vec_params is not None and np.any(tree & ~has_v):
            raise ReportError(f"{int(np.sum(tree & ~has_v))} message(s) carry no vec report; this round needs one in every tree message")
        if config.hist_params is None and np.any(has_h):
            raise ReportError("this round takes no histogram reports")
        if np.any(has_h & ((self.hist_level < 1) | (self.hist_level > config.levels))):
            raise ReportError(f"histogram level outside 1..{config.levels}")
        if np.any(has_h & ((self.hist_seed < 0) | (self.hist_seed >= config.hist_pool))):
            raise ReportError(f"histogram seed index outside 0..{config.hist_pool - 1}")
        if np.any(has_h & ((self.hist_bucket < 0) | (self.hist_bucket >= config.hist_buckets))):
            raise ReportError(f"histogram bucket outside 0..{config.hist_buckets - 1}")
        if config.vec_params is None and np.any(has_v & ~root):
            raise ReportError("this round takes no vector reports below the root")
        if np.any(has_v & (self.vec_level > config.levels)):
            raise ReportError(f"vector level outside 0..{config.levels}")
        m = 1 << config.vec_columns_log2
        if np.any(has_v & ((self.vec_row < 0) | (self.vec_row >= m))):
            raise ReportError(f"vector row outside 0..{m - 1}")
        if self.vec_nonce.shape != (n,) or self.vec_index.shape != (n,):
            raise ReportError(f"codebook columns have shapes {self.vec_nonce.shape}, {self.vec_index.shape}, expected ({n},)")
        if self.vec.shape == (n, config.dim):
            if not np.all(np.isfinite(self.vec)):
                raise ReportError("vectors contain NaN or infinite values")
            return
        for sel, params in ((root, config.root_params), (has_v & ~root, config.vec_params)):
            if params is not None and np.any(sel & ((self.vec_index < 0) | (self.vec_index >= params.candidates))):
                raise ReportError(f"vector index outside 0..{params.candidates - 1}")

    def to_messages(self) -> list[DeviceMessage]:
        """The wire form, one message per device (with fresh message ids)."""
        if not self.is_wire:
            raise ReportError("a simulation batch (decoded vectors, no codebook indices) cannot be sent")
        out = []
        for i in range(len(self)):
            hist = vec = None
            if self.hist_level[i] >= 0:
                hist = HistReport(
                    level=int(self.hist_level[i]),
                    seed_index=int(self.hist_seed[i]),
                    bucket=int(self.hist_bucket[i]),
                )
            if self.vec_level[i] >= 0:
                vec = VecReport(
                    level=int(self.vec_level[i]), row=int(self.vec_row[i]),
                    nonce=f"{int(self.vec_nonce[i]):016x}", index=int(self.vec_index[i]),
                )
            out.append(
                DeviceMessage(
                    round_id=self.round_id, message_id=new_message_id(), hist=hist, vec=vec
                )
            )
        return out

    @classmethod
    def from_messages(cls, messages: list[DeviceMessage], config: RoundConfig) -> ReportBatch:
        """Columns from wire messages; validated against ``config``."""
        n = len(messages)
        hl = np.full(n, -1, dtype=np.int64)
        hs = np.zeros(n, dtype=np.int64)
        hb = np.zeros(n, dtype=np.int64)
        vl = np.full(n, -1, dtype=np.int64)
        vr = np.zeros(n, dtype=np.int64)
        vn = np.zeros(n, dtype=np.uint64)
        vi = np.full(n, -1, dtype=np.int64)
        for i, msg in enumerate(messages):
            if msg.round_id != config.round_id:
                raise ReportError(f"message for round {msg.round_id!r} sent to {config.round_id!r}")
            if msg.hist is not None:
                hl[i], hs[i], hb[i] = msg.hist.level, msg.hist.seed_index, msg.hist.bucket
            if msg.vec is not None:
                vl[i], vr[i] = msg.vec.level, msg.vec.row
                vn[i], vi[i] = int(msg.vec.nonce, 16), msg.vec.index
        batch = cls(config.round_id, hl, hs, hb, vl, vr, np.zeros((n, 0)), vn, vi)
        batch.validate(config)
        return batch


def share_messages(shares: NDArray[np.uint64], round_id: str) -> list[list[ShareMessage]]:
    """Wire form of ``secure_sum.encode_devices`` output (n, s, L + 1): per device, its s share messages."""
    le = np.ascontiguousarray(shares, dtype="<u8")
    return [
        [ShareMessage(round_id=round_id, message_id=new_message_id(), share=base64.b64encode(le[i, j].tobytes()).decode())
         for j in range(le.shape[1])]
        for i in range(le.shape[0])
    ]


def sealed_share_parts(shares: NDArray[np.uint64], key: bytes, round_id: str) -> list[list[str]]:
    """Per device, its share messages each sealed on its own to the server (base64):
    the ``parts`` a device submits to the shuffler."""
    return [[base64.b64encode(seal(m.model_dump_json().encode(), key, round_id)).decode() for m in msgs]
            for msgs in share_messages(shares, round_id)]


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
