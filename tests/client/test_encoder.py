"""Encoder: only randomiser outputs depend on the point; the vector binding is unbiased."""

import json

import numpy as np
import pytest

from shoal.client.encoder import encode_arrays
from shoal.common.errors import ReportError
from shoal.common.kinds.tree import derive_config
from shoal.common.kinds.tree_nets import node_space
from shoal.common.mechanisms.hadamard import hadamard_sign
from shoal.common.wire.messages import ReportBatch
from shoal.common.wire.models import DeviceMessage


def test_no_report_field_but_randomiser_outputs_depends_on_the_point():
    cfg = derive_config(100_000, 10, 4, 4.0, seed=5, hist_only_share=0.0)
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
    msgs = [m.model_dump() for m in encode_arrays(x1[:200], cfg).to_messages()]
    tree = next(m for m in msgs if m["hist"] is not None)
    root = next(m for m in msgs if m["hist"] is None)
    assert set(tree) == {"round_id", "message_id", "protocol", "hist", "vec"}
    assert set(tree["hist"]) == {"level", "seed_index", "bucket"}
    assert set(tree["vec"]) == {"level", "row", "nonce", "index"} and tree["vec"]["level"] >= 1
    assert root["vec"]["level"] == 0  # a root device: its root report alone


def test_root_devices_are_a_root_share_of_all_and_send_only_the_root_report():
    cfg = derive_config(100_000, 10, 4, 1.0, seed=5, hist_only_share=0.0)
    batch = encode_arrays(np.zeros((20_000, 10)), cfg, np.random.default_rng(3))
    root = batch.vec_level == 0
    se = np.sqrt(cfg.root_share * (1 - cfg.root_share) / 20_000)
    assert abs(root.mean() - cfg.root_share) < 5 * se
    assert np.all(batch.hist_level[root] == -1) and np.all(batch.hist_level[~root] >= 1)
    assert np.all(batch.vec_level[~root] >= 1)


def test_with_a_hist_only_share_each_tree_device_sends_exactly_one_report_in_that_proportion():
    cfg = derive_config(100_000, 10, 4, 1.0, seed=5)
    assert cfg.hist_only_share == 0.5
    batch = encode_arrays(np.zeros((20_000, 10)), cfg, np.random.default_rng(3))
    root = batch.vec_level == 0
    has_h, has_v = batch.hist_level >= 1, batch.vec_level >= 1
    assert np.all(has_h ^ has_v ^ root) and not np.any(has_h & has_v)
    m = int((~root).sum())
    se = np.sqrt(0.25 / m)
    assert abs(has_h[~root].mean() - 0.5) < 5 * se
    batch.validate(cfg)


def test_the_hist_only_choice_does_not_depend_on_the_point():
    cfg = derive_config(100_000, 10, 4, 1.0, seed=5)
    a = encode_arrays(np.full((3000, 10), 0.05), cfg, np.random.default_rng(9))
    b = encode_arrays(-np.full((3000, 10), 0.2), cfg, np.random.default_rng(9))
    for f in ("hist_level", "hist_seed", "vec_level", "vec_row", "vec_nonce"):
        assert np.array_equal(getattr(a, f), getattr(b, f))
    assert not np.array_equal(a.hist_bucket, b.hist_bucket) and not np.array_equal(a.vec_index, b.vec_index)


def test_a_tree_message_with_both_reports_is_refused_in_a_one_report_round():
    cfg = derive_config(100_000, 4, 2, 2.0, seed=1)
    batch = encode_arrays(np.zeros((200, cfg.dim)), cfg, np.random.default_rng(1))
    h = int(np.flatnonzero(batch.hist_level >= 1)[0])
    v = int(np.flatnonzero(batch.vec_level >= 1)[0])
    for f in ("hist_level", "hist_seed", "hist_bucket"):
        getattr(batch, f)[v] = getattr(batch, f)[h]
    with pytest.raises(ReportError, match="carry a hist and a vec report"):
        batch.validate(cfg)


def test_an_empty_tree_message_is_refused_in_a_one_report_round():
    cfg = derive_config(100_000, 4, 2, 2.0, seed=1)
    batch = encode_arrays(np.zeros((200, cfg.dim)), cfg, np.random.default_rng(1))
    batch.hist_level[int(np.flatnonzero(batch.hist_level >= 1)[0])] = -1
    with pytest.raises(ReportError, match="carry no report"):
        batch.validate(cfg)


def test_root_report_is_unbiased_for_the_mean():
    cfg = derive_config(100_000, 6, 2, 1.0, seed=6, root_candidates=64)
    x = np.tile([0.5, 0.1, 0, 0, 0, -0.2], (60_000, 1))
    batch = encode_arrays(x, cfg, np.random.default_rng(4))
    at = batch.vec_level == 0
    vec = batch.vectors(cfg)[at]
    s = hadamard_sign(batch.vec_row[at], np.zeros(int(at.sum()), dtype=np.int64) + int(
        node_space(cfg).keys(0, node_space(cfg).root())[0] >> np.uint64(64 - cfg.vec_columns_log2)))
    mean = (vec * s[:, None]).mean(axis=0)
    se = np.sqrt(cfg.root_params.expected_sq_norm / cfg.dim / at.sum())
    assert np.all(np.abs(mean - x[0]) < 5 * se)


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
    """A simulation batch's vector reports are decoded vectors, which no device sends. (Enough devices,
    seeded: in a one-report round a batch of a few hist-only devices carries no vector and is a wire batch.)"""
    cfg = derive_config(100_000, 4, 2, 2.0, seed=1)
    batch = encode_arrays(np.zeros((200, 4)), cfg, np.random.default_rng(2), wire=False)
    assert (batch.vec_level >= 0).any()
    with pytest.raises(ReportError, match="simulation batch"):
        batch.to_messages()


def _one_of_each(cfg):
    batch = encode_arrays(np.zeros((200, cfg.dim)), cfg, np.random.default_rng(1))
    root = int(np.flatnonzero(batch.vec_level == 0)[0])
    tree = int(np.flatnonzero(batch.vec_level > 0)[0])
    return batch, root, tree


def test_a_root_report_sent_with_a_hist_report_is_refused():
    cfg = derive_config(100_000, 4, 2, 2.0, seed=1, hist_only_share=0.0)
    batch, root, tree = _one_of_each(cfg)
    for f in ("hist_level", "hist_seed", "hist_bucket"):
        getattr(batch, f)[root] = getattr(batch, f)[tree]
    with pytest.raises(ReportError, match="a root device sends its root report alone"):
        batch.validate(cfg)


def test_a_tree_message_without_its_hist_report_is_refused():
    cfg = derive_config(100_000, 4, 2, 2.0, seed=1, hist_only_share=0.0)
    batch, _, tree = _one_of_each(cfg)
    batch.hist_level[tree] = -1
    with pytest.raises(ReportError, match="carry neither a root report nor a hist report"):
        batch.validate(cfg)


def test_a_root_report_in_a_round_without_root_devices_is_refused():
    cfg = derive_config(100_000, 4, 2, 2.0, seed=1)
    batch, root, _ = _one_of_each(cfg)
    none = cfg.with_overrides(root_share=0.0, root_candidates=0, root_cap=0)
    with pytest.raises(ReportError, match="takes no root"):
        batch.select(np.array([root])).validate(none)


def test_a_root_index_outside_the_root_codebook_is_refused():
    cfg = derive_config(100_000, 4, 2, 2.0, seed=1, root_candidates=16)
    batch, root, _ = _one_of_each(cfg)
    batch.vec_index[root] = 16
    with pytest.raises(ReportError, match="vector index outside 0..15"):
        batch.validate(cfg)
