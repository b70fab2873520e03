"""How a report is laid out in the store (``server/storage/report_rows.py``):
message ids as their 16 bytes, a tree report as its 22-byte ``TREE_ROW``."""

import numpy as np
import pytest

from shoal.client.encoder import encode_arrays
from shoal.common.kinds.tree import derive_config
from shoal.common.wire.binary import batch_from_rows, decode_records, encode_reports
from shoal.common.wire.fields import new_message_id
from shoal.server.storage.report_rows import message_keys, pack_tree, pack_tree_rows, unpack_tree
from shoal.server.storage.store import StoreError


def test_message_keys_are_the_ids_bytes_in_order():
    ids = [new_message_id() for _ in range(5)]
    assert message_keys(ids) == [bytes.fromhex(m) for m in ids]
    assert message_keys([]) == []


@pytest.mark.parametrize("bad", ["ab" * 15, "ab" * 17, "zz" * 16, "ab cd" + "ef" * 13 + "a"])
def test_a_message_id_that_is_not_32_hex_digits_is_refused(bad):
    assert len(bad) != 32 or bad.count(" ") or not all(c in "0123456789abcdef" for c in bad)
    with pytest.raises(StoreError, match="message ids must be 32 hex digits"):
        message_keys([new_message_id(), bad])


def test_the_rows_a_binary_batch_carries_are_stored_as_its_batch_would_be():
    cfg = derive_config(1000, 4, 2, 2.0, seed=1)
    batch = encode_arrays(np.random.default_rng(0).uniform(-0.4, 0.4, (50, 4)), cfg)
    records = np.array(decode_records(encode_reports(batch)))
    assert pack_tree_rows(records["row"]) == pack_tree(batch)
    rows = records["row"].copy()
    rows["vec_level"][:10] = -1  # ten reports without a vector, junk in their codebook index
    rows["vec_index"][:10] = 7
    stored = pack_tree_rows(rows)
    assert stored == pack_tree(batch_from_rows(rows, "r"))  # as the column route stored them
    back = unpack_tree(b"".join(stored), "r")
    assert back.vec_index[:10].tolist() == [-1] * 10 and np.array_equal(back.vec_index[10:], batch.vec_index[10:])
