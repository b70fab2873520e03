"""What a device sends: the same reports as arrays, and their JSON without pydantic.

A report carries only data-independent choices (level, OLH seed index,
Hadamard row) and randomiser outputs (GRR bucket, PrivUnit vector), plus the
round id and a random message id (DESIGN.md, "Encoders"). ``ReportBatch`` is
the columnar form used on every hot path.

The pydantic wire models (``DeviceMessage``, ``SketchMessage``, ...) and the
server's checks of them live in ``wire/models.py``, which imports this
module and never the other way round: the server and the shuffler parse
and validate every message with them, but a device only *writes* messages
(``device_json``: the same JSON with the standard library), so
``import shoal.client.device`` never loads pydantic (issue 45, Build 5: it
was a third of the device's import time).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from shoal.common.errors import ReportError
from shoal.common.randomness.public_stream import PROTOCOL_VERSION
from shoal.common.wire.envelope import seal
from shoal.common.wire.fields import new_message_id

if TYPE_CHECKING:
    from shoal.common.kinds.tree import RoundConfig
    from shoal.common.wire.models import DeviceMessage

__all__ = ["ReportBatch", "device_json", "sealed_share_parts", "share_json", "submission_json"]


def device_json(round_id: str, **fields: Any) -> str:
    """A device's message as the JSON its pydantic model reads (``wire/models.py``):
    round id, a fresh message id, the protocol, then ``fields`` in order
    (compact separators; floats as Python's shortest round-trip repr, which
    the server parses back to the same doubles)."""
    body = {"round_id": round_id, "message_id": new_message_id(), "protocol": PROTOCOL_VERSION, **fields}
    return json.dumps(body, separators=(",", ":"), allow_nan=False)


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
        # the server's decode: not on a device's import path (issue 45, Build 5)
        from shoal.common.kinds.tree_randomness import PublicRandomness
        from shoal.common.mechanisms.privunit import decode

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
        if config.hist_only_share > 0:
            # One report per tree device: its histogram report or its vector report, never both
            # (each is at up to the device's whole epsilon) and never neither.
            if np.any(tree & has_h & has_v):
                raise ReportError(f"{int(np.sum(tree & has_h & has_v))} message(s) carry a hist and a vec report; in this "
                                  "round (hist_only_share > 0) a tree device sends one of them")
            if np.any(tree & ~has_h & ~has_v):
                raise ReportError(f"{int(np.sum(tree & ~has_h & ~has_v))} message(s) carry no report; this round needs a "
                                  "root, hist or vec report in every message")
        else:
            if config.hist_params is not None and np.any(tree & ~has_h):
                raise ReportError(f"{int(np.sum(tree & ~has_h))} message(s) carry neither a root report nor a hist report; "
                                  "this round needs one of them in every message")
            if config.vec_params is not None and np.any(tree & ~has_v):
                raise ReportError(f"{int(np.sum(tree & ~has_v))} message(s) carry no vec report; this round needs one in "
                                  "every tree message")
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
        from shoal.common.wire.models import DeviceMessage, HistReport, VecReport

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


def sealed_share_parts(shares: NDArray[np.uint64], key: bytes, round_id: str) -> list[list[str]]:
    """Per device, its share messages (``ShareMessage``'s JSON: base64 of the
    L + 1 little-endian uint64 values mod q) each sealed on its own to the
    server (base64): the ``parts`` a device submits to the shuffler."""
    le = np.ascontiguousarray(shares, dtype="<u8")
    return [[base64.b64encode(seal(share_json(round_id, le[i, j].tobytes()), key, round_id)).decode()
             for j in range(le.shape[1])]
            for i in range(le.shape[0])]


def share_json(round_id: str, share: bytes) -> bytes:
    """``device_json(round_id, share=<base64 of share>)`` as bytes (the same
    bytes: base64 text needs no JSON escaping), without json's per-character
    pass over the long base64 string and its str round trips (a sketch's
    share is 128 KB)."""
    head = device_json(round_id)
    return b"".join((head[:-1].encode(), b',"share":"', base64.b64encode(share), b'"}'))


def submission_json(parts: list[str], config_digest: str) -> str:
    """``json.dumps({"parts": parts, "config_digest": config_digest})`` for
    ``parts`` that are base64 text (``sealed_share_parts``), built by
    concatenation: the same text without json's per-character escaping pass
    over megabytes of base64 (what a secure-sum device hands the shuffler).
    Parts with a quote, a backslash or a non-ASCII character go through json."""
    if not all(p.isascii() and '"' not in p and "\\" not in p for p in parts):
        return json.dumps({"parts": parts, "config_digest": config_digest})
    return '{"parts": ["' + '", "'.join(parts) + '"], "config_digest": ' + json.dumps(config_digest) + "}" if parts \
        else json.dumps({"parts": parts, "config_digest": config_digest})
