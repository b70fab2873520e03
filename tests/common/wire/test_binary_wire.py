"""The binary form of tree reports (``common/wire/binary.py``): exact round
trip, 38 bytes a device, and a clear refusal of anything else."""

import numpy as np
import pytest

from shoal.client.encoder import encode_arrays
from shoal.common.errors import ReportError
from shoal.common.kinds.tree import derive_config
from shoal.common.wire.binary import HEADER, RECORD, decode_reports, encode_reports


def _batch(n=300, root_share=0.3):
    cfg = derive_config(10_000, 4, 3, 4.0, seed=2, root_share=root_share)
    return cfg, encode_arrays(np.random.default_rng(0).uniform(-0.5, 0.5, (n, 4)), cfg, np.random.default_rng(1))


def test_binary_reports_round_trip_every_column_exactly():
    cfg, batch = _batch()
    ids = [f"{i:032x}" for i in range(len(batch))]
    back_ids, back = decode_reports(encode_reports(batch, ids), "r")
    assert back_ids == ids
    for name in ("hist_level", "hist_seed", "hist_bucket", "vec_level", "vec_row", "vec_nonce", "vec_index"):
        assert np.array_equal(getattr(back, name), getattr(batch, name)), name
    back.validate(cfg)
    assert np.any(batch.hist_level < 0) and np.any(batch.vec_level == 0)  # root devices: absent reports survive


def test_a_device_costs_its_randomiser_output_and_id_38_bytes():
    _, batch = _batch(1000)
    body = encode_reports(batch)
    assert RECORD.itemsize == 16 + 22 and len(body) == len(HEADER) + 38 * 1000


def test_fresh_message_ids_are_random_and_distinct():
    _, batch = _batch(500)
    ids, _ = decode_reports(encode_reports(batch), "r")
    assert len(set(ids)) == 500 and all(len(i) == 32 for i in ids)


@pytest.mark.parametrize("body,needle", [
    (b"{\"messages\": []}", "must start with"),
    (b"SHB\x03\x01" + bytes(38), "version 3"),
    (b"SHB\x01" + bytes(38), "version 1; this server reads version 2"),  # format 1: protocol 0's reports
    (b"SHB\x02\x00" + bytes(38), "protocol 0; this server accepts protocol 2"),
    (b"SHB\x02\x07" + bytes(38), "protocol 7"),
    (b"SHB\x02", "protocol None"),
    (b"SHB\x02\x02" + bytes(37), "not a positive number of 38-byte records"),
    (b"SHB\x02\x02", "not a positive number"),
])
def test_anything_else_is_refused_with_what_is_wrong(body, needle):
    with pytest.raises(ReportError, match=needle):
        decode_reports(body, "r")


def test_a_simulation_batch_has_no_wire_form():
    cfg, _ = _batch()
    sim = encode_arrays(np.zeros((3, 4)), cfg, np.random.default_rng(0), wire=False)
    with pytest.raises(ReportError, match="simulation batch"):
        encode_reports(sim)


def test_message_ids_must_match_the_reports():
    _, batch = _batch(3)
    with pytest.raises(ReportError, match="2 message ids for 3 reports"):
        encode_reports(batch, ["0" * 32] * 2)
    with pytest.raises(ReportError, match="32 hex digits"):
        encode_reports(batch, ["zz" * 16] * 3)


def test_recorded_json_messages_convert_to_the_same_binary_rows_and_ids():
    from shoal.common.wire.binary import messages_to_binary
    from shoal.common.wire.messages import ReportBatch

    cfg, batch = _batch(50)
    messages = batch.to_messages()
    ids, back = decode_reports(messages_to_binary(messages), "r")
    assert ids == [m.message_id for m in messages]
    want = ReportBatch.from_messages(messages, cfg)
    for name in ("hist_level", "hist_seed", "hist_bucket", "vec_level", "vec_row", "vec_nonce", "vec_index"):
        assert np.array_equal(getattr(back, name), getattr(want, name)), name
