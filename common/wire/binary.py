"""A compact binary form of a tree round's reports (issue 19, Build 4).

JSON spends about 230 bytes on a device's tree report (field names, a hex
nonce, decimal integers, a 32-hex-digit message id); its randomiser output
is 22 bytes: the histogram report's level, OLH seed index and bucket, the
vector report's level, Hadamard row, codebook nonce and index (the vector
itself travels as its codebook index, ``privunit.py``, so there are no
floats to narrow). The binary form is that row, little-endian, after the
message id's 16 bytes, behind a 4-byte header:

    b"SHB" + format (1 byte, = 2) + protocol (1 byte, = 1)
        | n x (message id: 16 bytes | TREE_ROW: 22 bytes)

Format 1 had no protocol byte (its reports were protocol 0's); format 2
adds the wire protocol the reports were built under (issue 45, Build 2),
refused unless this build speaks it.

38 bytes per device (1.0 x the randomiser output and ids), against ~230
for JSON. The round comes from the URL (``POST /rounds/{id}/reports/binary``,
Content-Type ``application/octet-stream``: the header, not a media type,
says what the bytes are); a level of -1 means "no such report". Parsing is one ``np.frombuffer``; the server validates the columns
exactly as it validates JSON reports (``ReportBatch.validate``). The store
keeps the same 22-byte row (``server/storage/report_rows.py``).
"""

from __future__ import annotations

import base64
import json
import secrets
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from shoal.common.errors import ReportError
from shoal.common.randomness.public_stream import PROTOCOL_VERSION, PROTOCOLS
from shoal.common.wire.messages import ReportBatch

if TYPE_CHECKING:
    from shoal.common.mechanisms.sketch import SketchParams
    from shoal.common.wire.models import DeviceMessage, SketchMessage

MAGIC = b"SHB"
VERSION = 2  # the batch format
HEADER = MAGIC + bytes([VERSION, PROTOCOL_VERSION])
CONTENT_TYPE = "application/octet-stream"
TREE_ROW = np.dtype([("hist_level", "i1"), ("hist_seed", "<u2"), ("hist_bucket", "<u4"), ("vec_level", "i1"),
                     ("vec_row", "<u4"), ("vec_nonce", "<u8"), ("vec_index", "<u2")])
RECORD = np.dtype([("message_id", "V16"), ("row", TREE_ROW)])


def tree_rows(batch: ReportBatch) -> NDArray[np.void]:
    """Each report of a wire batch as a ``TREE_ROW`` (absent reports: level -1)."""
    if not batch.is_wire:
        raise ReportError("a simulation batch (decoded vectors, no codebook indices) has no wire form")
    rows = np.zeros(len(batch), dtype=TREE_ROW)
    for name in ("hist_level", "hist_seed", "hist_bucket", "vec_level", "vec_row", "vec_nonce"):
        rows[name] = getattr(batch, name)
    rows["vec_index"] = np.maximum(batch.vec_index, 0)
    return rows


def batch_from_rows(rows: NDArray[np.void], round_id: str) -> ReportBatch:
    """The ``ReportBatch`` of ``TREE_ROW`` rows (unvalidated)."""
    n = rows.shape[0]
    vec_level = rows["vec_level"].astype(np.int64)
    index = np.where(vec_level >= 0, rows["vec_index"].astype(np.int64), -1)
    return ReportBatch(round_id, rows["hist_level"].astype(np.int64), rows["hist_seed"].astype(np.int64),
                       rows["hist_bucket"].astype(np.int64), vec_level, rows["vec_row"].astype(np.int64),
                       np.zeros((n, 0)), rows["vec_nonce"].astype(np.uint64), index)


def encode_reports(batch: ReportBatch, message_ids: list[str] | None = None) -> bytes:
    """The binary body of many devices' reports (fresh random message ids unless given)."""
    n = len(batch)
    ids = message_ids if message_ids is not None else [secrets.token_hex(16) for _ in range(n)]
    if len(ids) != n:
        raise ReportError(f"{len(ids)} message ids for {n} reports")
    records = np.zeros(n, dtype=RECORD)
    try:
        records["message_id"] = np.frombuffer(b"".join(bytes.fromhex(m) for m in ids), dtype="V16")
    except ValueError as exc:
        raise ReportError(f"message ids must be 32 hex digits: {exc}") from exc
    records["row"] = tree_rows(batch)
    return HEADER + records.tobytes()


def _check_header(body: bytes, magic: bytes, version: int, what: str, after_magic: str = "") -> None:
    """The three header bytes every binary body starts with (magic, format
    version, protocol version); ReportError naming what is wrong."""
    if body[:3] != magic:
        raise ReportError(f"not a {what}: it must start with {magic!r}{after_magic}")
    if len(body) < 4 or body[3] != version:
        raise ReportError(f"{what} version {body[3] if len(body) > 3 else None}; this server reads version {version}")
    if len(body) < 5 or body[4] not in PROTOCOLS:
        raise ReportError(f"{what} of protocol {body[4] if len(body) > 4 else None}; this server accepts "
                          f"protocol {', '.join(map(str, PROTOCOLS))}")


def decode_records(body: bytes) -> NDArray[np.void]:
    """The ``RECORD``s of a binary body (a view of it: message id, ``TREE_ROW``);
    ReportError if it is not one (wrong header, format or protocol version, a
    length that is not whole records)."""
    _check_header(body, MAGIC, VERSION, "binary report batch", " and a version byte")
    payload = memoryview(body)[len(HEADER):]
    if not len(payload) or len(payload) % RECORD.itemsize:
        raise ReportError(f"binary report batch of {len(payload)} bytes is not a positive number of "
                          f"{RECORD.itemsize}-byte records")
    return np.frombuffer(payload, dtype=RECORD)


def decode_reports(body: bytes, round_id: str) -> tuple[list[str], ReportBatch]:
    """Message ids (hex) and the reports of a binary body (``decode_records``)."""
    records = decode_records(body)
    ids = records["message_id"].tobytes().hex()
    return [ids[32 * i:32 * (i + 1)] for i in range(records.shape[0])], batch_from_rows(records["row"], round_id)


def tree_json_to_binary(message: str) -> bytes | None:
    """A device's recorded tree report (``DeviceMessage``'s JSON) as its binary
    body, read with the standard library (no pydantic on the device); None for
    any other message."""
    try:
        m = json.loads(message)
    except ValueError:
        return None
    if not isinstance(m, dict) or set(m) != {"round_id", "message_id", "protocol", "hist", "vec"}:
        return None
    hist, vec = m["hist"] or {}, m["vec"] or {}
    batch = ReportBatch(str(m["round_id"]), np.array([hist.get("level", -1)]), np.array([hist.get("seed_index", 0)]),
                        np.array([hist.get("bucket", 0)]), np.array([vec.get("level", -1)]),
                        np.array([vec.get("row", 0)]), np.zeros((1, 0)),
                        np.array([int(vec.get("nonce", "0"), 16)], dtype=np.uint64), np.array([vec.get("index", -1)]))
    return encode_reports(batch, [str(m["message_id"])])


def messages_to_binary(messages: list[DeviceMessage]) -> bytes:
    """The binary body of tree reports held as wire messages, with their own
    message ids (a device converts its recorded JSON message when it sends:
    a retry resends the same id, so the server still counts it once)."""
    n = len(messages)
    cols = {name: np.full(n, -1 if name.endswith("level") else 0, dtype=np.int64)
            for name in ("hist_level", "hist_seed", "hist_bucket", "vec_level", "vec_row", "vec_index")}
    nonce = np.zeros(n, dtype=np.uint64)
    for i, m in enumerate(messages):
        if m.hist is not None:
            cols["hist_level"][i], cols["hist_seed"][i], cols["hist_bucket"][i] = m.hist.level, m.hist.seed_index, m.hist.bucket
        if m.vec is not None:
            cols["vec_level"][i], cols["vec_row"][i], cols["vec_index"][i] = m.vec.level, m.vec.row, m.vec.index
            nonce[i] = int(m.vec.nonce, 16)
    cols["vec_index"][cols["vec_level"] < 0] = -1
    batch = ReportBatch(messages[0].round_id if n else "", cols["hist_level"], cols["hist_seed"], cols["hist_bucket"],
                        cols["vec_level"], cols["vec_row"], np.zeros((n, 0)), nonce, cols["vec_index"])
    return encode_reports(batch, [m.message_id for m in messages])


# -- the local sketch report (issue 45, Build 5) --
#
# A local-model sketch is 2m reals on its public noise grid: each is k 2^e with
# k an integer (``sketch.scramble``: rounded to the grid, plus exact discrete
# Laplace noise in grid steps) and e = ``SketchParams.noise_grid(n0).exponent``.
# The binary form sends the integers k, so it is exact (no float narrowing):
#
#     b"SHS" + format (1 byte, = 1) + protocol (1 byte, = 1)
#         | message id (16 bytes) | n0 (u32) | e (i16) | width (1 byte: 4 or 8)
#         | 2m signed little-endian integers of ``width`` bytes (real parts, then imaginary parts)
#
# 28 bytes of header and 4 bytes per real (width 4, when every |k| < 2^31; a
# device at small eps may need width 8, chosen from the noisy output alone, so
# the width is post-processing): 8 m + 28 bytes, against ~34 per complex entry
# as JSON. The server reads it into the same ``SketchMessage`` it reads from
# JSON (``POST /rounds/{id}/reports/binary``), so both are checked alike
# (length m, the grid of n0).

SKETCH_MAGIC = b"SHS"
SKETCH_VERSION = 1
SKETCH_HEADER = SKETCH_MAGIC + bytes([SKETCH_VERSION, PROTOCOL_VERSION])
SKETCH_FIXED = np.dtype([("message_id", "V16"), ("n0", "<u4"), ("exponent", "<i2"), ("width", "u1")])


def encode_sketch(units: NDArray[np.int64], n0: int, exponent: int, message_id: str) -> bytes:
    """The binary body of one device's sketch: its 2m grid integers ``units``
    (values units * 2^exponent), n0 and message id."""
    units = np.asarray(units, dtype=np.int64)
    width = 4 if units.size == 0 or int(np.abs(units).max()) < 1 << 31 else 8
    fixed = np.zeros(1, dtype=SKETCH_FIXED)
    try:
        fixed["message_id"] = np.frombuffer(bytes.fromhex(message_id), dtype="V16")
    except ValueError as exc:
        raise ReportError(f"message ids must be 32 hex digits: {exc}") from exc
    fixed["n0"], fixed["exponent"], fixed["width"] = n0, exponent, width
    return SKETCH_HEADER + fixed.tobytes() + units.astype(f"<i{width}").tobytes()


def decode_sketch(body: bytes) -> dict[str, Any]:
    """The fields of a binary sketch body, as ``SketchMessage`` takes them
    (``round_id`` is the caller's: it comes from the URL); ReportError if the
    bytes are not one."""
    _check_header(body, SKETCH_MAGIC, SKETCH_VERSION, "binary sketch")
    start = len(SKETCH_HEADER) + SKETCH_FIXED.itemsize
    if len(body) < start:
        raise ReportError(f"binary sketch of {len(body)} bytes is shorter than its {start}-byte header")
    fixed = np.frombuffer(body[len(SKETCH_HEADER):start], dtype=SKETCH_FIXED)[0]
    width = int(fixed["width"])
    payload = body[start:]
    if width not in (4, 8) or len(payload) % width:
        raise ReportError(f"binary sketch of width {width} and {len(payload)} value bytes")
    units = np.frombuffer(payload, dtype=f"<i{width}").astype(np.int64)
    if np.any(np.abs(units) >= 1 << 53):
        raise ReportError("binary sketch values must be below 2^53 grid steps")
    values = np.ldexp(units.astype(np.float64), int(fixed["exponent"]))
    return {"message_id": bytes(fixed["message_id"]).hex(), "sketch": values.tolist(), "n0": int(fixed["n0"])}


def sketch_message(body: bytes, round_id: str) -> SketchMessage:
    """The ``SketchMessage`` a binary sketch body carries (validated by the model)."""
    from shoal.common.wire.models import SketchMessage

    fields = decode_sketch(body)
    try:
        return SketchMessage(round_id=round_id, protocol=body[4], **fields)
    except ValueError as exc:  # pydantic's ValidationError: a ReportError at the boundary (a 4xx, not a 500)
        raise ReportError(f"binary sketch does not fit a sketch report: {exc}") from None


def sketch_units(values: NDArray[np.float64], n0: int, params: SketchParams) -> tuple[NDArray[np.int64], int]:
    """A device's sketch reals (on its grid) as grid integers and the grid's exponent."""
    exponent = params.noise_grid(int(n0)).exponent
    return np.rint(np.ldexp(np.asarray(values, dtype=np.float64), -exponent)).astype(np.int64), exponent


_RECORDED_HEAD, _RECORDED_TAIL = '{"binary": "', '"}'


def recorded_binary(body: bytes) -> str:
    """A binary body as the string the device's ledger keeps (``Device`` sends its bytes):
    ``json.dumps({"binary": <base64>})``, built by concatenation (base64 needs no escaping)."""
    return _RECORDED_HEAD + base64.b64encode(body).decode() + _RECORDED_TAIL


def recorded_body(message: str) -> bytes | None:
    """The bytes of a ``recorded_binary`` string; None for any other message."""
    if not message.startswith('{"binary"'):
        return None
    if message.startswith(_RECORDED_HEAD) and message.endswith(_RECORDED_TAIL) and '"' not in message[12:-2]:
        return base64.b64decode(message[len(_RECORDED_HEAD):-len(_RECORDED_TAIL)])
    return base64.b64decode(json.loads(message)["binary"])
