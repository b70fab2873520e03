"""The sketch encoder on devices: wire layout, unbiased through the wire,
shares that add up to the feature sum; wrong-model calls refused."""

import numpy as np
import pytest

from shoal.client.sketch_encoder import sketch_messages, sketch_shares
from shoal.common.bounds import PublicBound
from shoal.common.errors import ConfigError
from shoal.common.kinds.sketch import derive_sketch_round
from shoal.common.mechanisms.secure_sum import add_shares, decode_total
from shoal.common.mechanisms.sketch import exact_sketch, record_features, sketch_from_sum
from shoal.common.wire.models import sketch_rows

BOUND = PublicBound(radius=4.0)


def test_messages_carry_real_then_imaginary_parts_and_n0():
    cfg = derive_sketch_round(100, 2, 2, 50.0, bound=BOUND, seed=3)
    x = np.random.default_rng(0).normal(size=(30, 2))
    msgs = sketch_messages(x, np.array([10, 20]), cfg, np.random.default_rng(1))
    assert [m.n0 for m in msgs] == [10, 20] and len({m.message_id for m in msgs}) == 2
    rows = sketch_rows(msgs, cfg.sketch)
    assert rows.shape == (2, 2 * cfg.sketch.size + 1) and list(rows[:, -1]) == [10, 20]


def test_device_sketches_average_to_the_exact_sketch():
    """E[s] = z (seed 002, Def. 3) survives the wire: 400 devices of 5 records
    averaged with Def. 4's weights land within 5 standard errors of z."""
    cfg = derive_sketch_round(2000, 2, 2, 4.0, bound=BOUND, seed=3)
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2000, 2))
    rows = sketch_rows(sketch_messages(x, np.full(400, 5), cfg, rng), cfg.sketch)
    m = cfg.sketch.size
    mean = (rows[:, -1] @ (rows[:, :m] + 1j * rows[:, m:-1])) / rows[:, -1].sum()
    z = exact_sketch(cfg.bound.to_ball(x), cfg.omega())
    b = cfg.sketch.laplace_scale(5)
    se = np.sqrt(2 * b**2 / 400)  # per real coordinate, the Laplace noise dominates
    assert np.max(np.abs(mean.real - z.real)) < 5 * se
    assert np.max(np.abs(mean.imag - z.imag)) < 5 * se


def test_shares_add_up_to_the_feature_sum_within_the_noise():
    cfg = derive_sketch_round(500, 2, 2, 1.0, bound=BOUND, seed=3, model="shuffle", delta=1e-6, min_devices=100)
    assert cfg.secure_sum is not None
    x = np.random.default_rng(3).normal(size=(500, 2))
    shares = sketch_shares(x, cfg, np.random.default_rng(4))
    total, devices = decode_total(add_shares(shares, cfg.secure_sum), shares.shape[0] * shares.shape[1], cfg.secure_sum)
    assert devices == 500
    expected = record_features(cfg.bound.to_ball(x), cfg.omega()).sum(axis=0)
    sd = cfg.secure_sum.noise_std * np.sqrt(devices / cfg.secure_sum.min_devices)  # noise_std is at min_devices
    assert np.max(np.abs(total - expected)) < 6 * sd + 500 / cfg.secure_sum.scale
    z = exact_sketch(cfg.bound.to_ball(x), cfg.omega())
    assert np.max(np.abs(sketch_from_sum(total, devices) - z)) < 8 * sd / 500


def test_local_encoder_refuses_a_shuffle_round():
    cfg = derive_sketch_round(500, 2, 2, 1.0, bound=BOUND, seed=3, model="shuffle", delta=1e-6, min_devices=100)
    with pytest.raises(ConfigError, match="sketch_shares"):
        sketch_messages(np.zeros((1, 2)), np.array([1]), cfg)


def test_share_encoder_refuses_a_local_round():
    cfg = derive_sketch_round(500, 2, 2, 1.0, bound=BOUND, seed=3)
    with pytest.raises(ConfigError, match="sketch_messages"):
        sketch_shares(np.zeros((1, 2)), cfg)
