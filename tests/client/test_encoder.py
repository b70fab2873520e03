"""Encoder: only randomiser outputs depend on the point; the vector binding is unbiased."""

import json

import numpy as np
import pytest

from shoal.client.encoder import encode, encode_arrays
from shoal.common.errors import ReportError
from shoal.common.hadamard import hadamard_sign
from shoal.common.messages import DeviceMessage, ReportBatch
from shoal.common.nets import node_space
from shoal.common.tree_round import derive_config


def test_no_report_field_but_randomiser_outputs_depends_on_the_point():
    cfg = derive_config(100_000, 10, 4, 4.0, seed=5)
    rng = np.random.default_rng
    x1 = np.full((500, 10), 0.05)
    x2 = -np.full((500, 10), 0.2)
    a = encode_arrays(x1, cfg, rng(9))
    b = encode_arrays(x2, cfg, rng(9))
    # Same device randomness: the data-independent choices coincide exactly.
    for f in ("hist_level", "hist_seed", "vec_level", "vec_row", "vec_nonce"):
        assert np.array_equal(getattr(a, f), getattr(b, f))
    # The randomiser outputs do differ.
    assert not np.array_equal(a.hist_bucket, b.hist_bucket)
    assert not np.array_equal(a.vec_index, b.vec_index)
    msg = encode(x1[0], cfg).model_dump()
    assert set(msg) == {"round_id", "message_id", "hist", "vec"}
    assert set(msg["hist"]) == {"level", "seed_index", "bucket"}
    assert set(msg["vec"]) == {"level", "row", "nonce", "index"}


def test_signed_vector_report_is_unbiased_for_the_node_sum():
    cfg = derive_config(100_000, 6, 2, 4.0, seed=6, vec_candidates=64)
    space = node_space(cfg)
    n = 100_000
    x = np.tile([0.5, 0.1, 0, 0, 0, -0.2], (n, 1))
    batch = encode_arrays(x, cfg, np.random.default_rng(2))
    vec = batch.vectors(cfg)
    path = space.paths(cfg.bound.to_ball(x[:1]))
    j = 3
    key = space.keys(j, path[j])
    col = (key >> np.uint64(64 - cfg.vec_columns_log2)).astype(np.int64)
    at = batch.vec_level == j
    s = hadamard_sign(batch.vec_row[at], np.repeat(col, at.sum()))
    mean = (vec[at] * s[:, None]).mean(axis=0)
    se = np.sqrt(cfg.vec_params.expected_sq_norm / cfg.dim / at.sum())
    assert np.all(np.abs(mean - x[0]) < 5 * se)


def test_messages_round_trip_through_json():
    cfg = derive_config(100_000, 4, 2, 2.0, seed=1)
    batch = encode_arrays(np.random.default_rng(0).uniform(-0.3, 0.3, (20, 4)), cfg)
    msgs = batch.to_messages()
    back = [DeviceMessage.model_validate(json.loads(m.model_dump_json())) for m in msgs]
    again = ReportBatch.from_messages(back, cfg)
    assert np.array_equal(again.hist_bucket, batch.hist_bucket)
    assert np.array_equal(again.vec_nonce, batch.vec_nonce) and np.array_equal(again.vec_index, batch.vec_index)
    assert np.array_equal(again.vectors(cfg), batch.vectors(cfg))


def test_a_simulation_batch_cannot_be_sent():
    cfg = derive_config(100_000, 4, 2, 2.0, seed=1)
    batch = encode_arrays(np.zeros((3, 4)), cfg, wire=False)
    with pytest.raises(ReportError, match="simulation batch"):
        batch.to_messages()
