"""How a report is laid out in the store: one fixed-width binary row.

A tree report is 22 bytes (``TREE_ROW``: levels, OLH seed index and bucket,
Hadamard row, codebook nonce and index, little-endian); a secure-sum share
or a local sketch is its values as little-endian 8-byte words. With the
16-byte message id and a small integer round key, a stored report costs
about twice its binary payload (issue 13: rows keyed by two hex strings with
seven columns cost 152 bytes each). Packing and unpacking are vectorised.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from shoal.common.errors import ShoalError
from shoal.common.messages import ReportBatch

TREE_ROW = np.dtype([("hist_level", "i1"), ("hist_seed", "<u2"), ("hist_bucket", "<u4"), ("vec_level", "i1"),
                     ("vec_row", "<u4"), ("vec_nonce", "<u8"), ("vec_index", "<u2")])


class StoreError(ShoalError):
    """The store cannot do what was asked (bad URL, bad state name, a row
    without the layout its round needs)."""


def message_keys(message_ids: list[str]) -> list[bytes]:
    """The 16 bytes of each 32-hex-digit message id."""
    try:
        keys = [bytes.fromhex(m) for m in message_ids]
    except ValueError as exc:
        raise StoreError(f"message ids must be 32 hex digits: {exc}") from exc
    if any(len(k) != 16 for k in keys):
        raise StoreError("message ids must be 32 hex digits")
    return keys


def pack_tree(batch: ReportBatch) -> list[bytes]:
    """Each report of a wire batch as its ``TREE_ROW`` bytes."""
    if not batch.is_wire:
        raise StoreError("a simulation batch (decoded vectors, no codebook indices) cannot be stored")
    rows = np.zeros(len(batch), dtype=TREE_ROW)
    rows["hist_level"] = batch.hist_level
    rows["hist_seed"] = batch.hist_seed
    rows["hist_bucket"] = batch.hist_bucket
    rows["vec_level"] = batch.vec_level
    rows["vec_row"] = batch.vec_row
    rows["vec_nonce"] = batch.vec_nonce
    rows["vec_index"] = np.maximum(batch.vec_index, 0)
    raw = rows.tobytes()
    w = TREE_ROW.itemsize
    return [raw[i * w:(i + 1) * w] for i in range(len(batch))]


def unpack_tree(raw: bytes, round_id: str) -> ReportBatch:
    """The ``ReportBatch`` of concatenated ``TREE_ROW`` rows."""
    if len(raw) % TREE_ROW.itemsize:
        raise StoreError(f"stored rows are not {TREE_ROW.itemsize}-byte tree reports")
    rows = np.frombuffer(raw, dtype=TREE_ROW)
    n = rows.shape[0]
    vec_level = rows["vec_level"].astype(np.int64)
    index = np.where(vec_level >= 0, rows["vec_index"].astype(np.int64), -1)
    return ReportBatch(round_id, rows["hist_level"].astype(np.int64), rows["hist_seed"].astype(np.int64),
                       rows["hist_bucket"].astype(np.int64), vec_level, rows["vec_row"].astype(np.int64),
                       np.zeros((n, 0)), rows["vec_nonce"].astype(np.uint64), index)


def pack_words(rows: NDArray[np.uint64] | NDArray[np.float64]) -> list[bytes]:
    """Each row of shares (uint64) or sketch reals (float64) as little-endian words."""
    le = np.ascontiguousarray(rows, dtype="<u8" if rows.dtype == np.uint64 else "<f8")
    return [le[i].tobytes() for i in range(le.shape[0])]


def unpack_words(raw: bytes, count: int, width: int, dtype: type[np.uint64] | type[np.float64]) -> NDArray[np.generic]:
    if len(raw) != 8 * width * count:
        raise StoreError(f"stored rows do not have width {width}")
    le = "<u8" if dtype is np.uint64 else "<f8"
    return np.frombuffer(raw, dtype=le).reshape(count, width).astype(dtype)
