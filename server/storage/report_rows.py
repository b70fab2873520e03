"""How a report is laid out in the store: one fixed-width binary row.

A tree report is 22 bytes (``TREE_ROW``: levels, OLH seed index and bucket,
Hadamard row, codebook nonce and index, little-endian); a secure-sum share
or a local sketch is its values as little-endian 8-byte words. With the
16-byte message id and a small integer round key, a stored report costs
about twice its binary payload (issue 13: rows keyed by two hex strings with
seven columns cost 152 bytes each). Packing and unpacking are vectorised.
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

from shoal.common.errors import ShoalError
from shoal.common.wire.binary import (  # the wire row is the stored row
    TREE_ROW,
    batch_from_rows,
    tree_rows,
)
from shoal.common.wire.messages import ReportBatch


class StoreError(ShoalError):
    """The store cannot do what was asked (bad URL, bad state name, a row
    without the layout its round needs)."""


def message_keys(message_ids: list[str]) -> list[bytes]:
    """The 16 bytes of each 32-hex-digit message id (one ``bytes.fromhex`` of
    them all, split by numpy)."""
    if not message_ids:
        return []
    if set(map(len, message_ids)) != {32}:
        raise StoreError("message ids must be 32 hex digits")
    try:
        raw = bytes.fromhex("".join(message_ids))
    except ValueError as exc:
        raise StoreError(f"message ids must be 32 hex digits: {exc}") from exc
    if len(raw) != 16 * len(message_ids):  # fromhex skips spaces: "ab cd..." is 32 characters, 15 bytes
        raise StoreError("message ids must be 32 hex digits")
    return list(np.frombuffer(raw, dtype="V16").tolist())


def pack_tree(batch: ReportBatch) -> list[bytes]:
    """Each report of a wire batch as its ``TREE_ROW`` bytes."""
    if not batch.is_wire:
        raise StoreError("a simulation batch (decoded vectors, no codebook indices) cannot be stored")
    return pack_tree_rows(tree_rows(batch))


def pack_tree_rows(rows: NDArray[np.void]) -> list[bytes]:
    """``TREE_ROW``s as stored: a report without a vector has codebook index 0
    (what ``tree_rows`` writes for it), whatever a device sent there."""
    stored = np.array(rows, dtype=TREE_ROW)  # a copy: the caller's rows (a request body's view) stay as sent
    stored["vec_index"][stored["vec_level"] < 0] = 0
    return list(np.frombuffer(stored.tobytes(), dtype=f"V{TREE_ROW.itemsize}").tolist())


def unpack_tree(raw: bytes, round_id: str) -> ReportBatch:
    """The ``ReportBatch`` of concatenated ``TREE_ROW`` rows."""
    if len(raw) % TREE_ROW.itemsize:
        raise StoreError(f"stored rows are not {TREE_ROW.itemsize}-byte tree reports")
    return batch_from_rows(np.frombuffer(raw, dtype=TREE_ROW), round_id)


def pack_words(rows: NDArray[np.uint64] | NDArray[np.float64]) -> list[bytes]:
    """Each row of shares (uint64) or sketch reals (float64) as little-endian words."""
    le = np.ascontiguousarray(rows, dtype="<u8" if rows.dtype == np.uint64 else "<f8")
    return [le[i].tobytes() for i in range(le.shape[0])]


Word = TypeVar("Word", bound=np.uint64 | np.float64)  # a stored row's word: a share or a sketch real


def unpack_words(raw: bytes, count: int, width: int, dtype: type[Word]) -> NDArray[Word]:
    if len(raw) != 8 * width * count:
        raise StoreError(f"stored rows do not have width {width}")
    le = "<u8" if dtype is np.uint64 else "<f8"
    return np.frombuffer(raw, dtype=le).reshape(count, width).astype(dtype)
