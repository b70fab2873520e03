"""Sketch rounds: derivation, the wire form, validation (one test per invalid
field), the event records and what they imply."""

import math
from dataclasses import replace

import numpy as np
import pytest

from shoal.common.bounds import PublicBound
from shoal.common.errors import ConfigError
from shoal.common.kinds import dump_config, kind_name, parse_config
from shoal.common.kinds.sketch import (
    derive_sketch_round,
    sketch_round_from_dict,
    sketch_round_to_dict,
)
from shoal.common.mechanisms.sketch import frequencies
from shoal.common.privacy.accounting import central_guarantee
from shoal.common.privacy.events import ScrambledSketchEvent, SecureSumEvent, local_epsilon


def _local(**kw):
    return derive_sketch_round(10_000, 3, 4, 1.0, bound=PublicBound(radius=2.0), seed=7, **kw)


def _shuffle(**kw):
    return derive_sketch_round(10_000, 3, 4, 1.0, bound=PublicBound(radius=2.0), seed=7, model="shuffle",
                               delta=1e-6, min_devices=1000, **kw)


def test_local_round_defaults_follow_seed_002():
    cfg = _local()
    assert cfg.sketch.size == 10 * 4 * 3 and cfg.sketch.measurements == cfg.sketch.size
    assert cfg.secure_sum is None
    assert np.array_equal(cfg.omega(), frequencies(cfg.sketch))


@pytest.mark.parametrize("make", [_local, _shuffle])
def test_sketch_round_survives_the_wire(make):
    cfg = make()
    data = sketch_round_to_dict(cfg)
    assert kind_name(data) == "sketch"
    assert sketch_round_from_dict(data) == cfg == parse_config(dump_config("sketch", cfg))


def test_local_round_is_eps_ldp_per_device():
    event = _local().event
    assert isinstance(event, ScrambledSketchEvent)
    assert local_epsilon(event) == 1.0 and central_guarantee(event) == (1.0, 0.0)


def test_shuffle_round_is_central_with_no_local_guarantee():
    cfg = _shuffle()
    assert isinstance(cfg.event, SecureSumEvent)
    assert central_guarantee(cfg.event) == (1.0, 1e-6)
    assert math.isinf(local_epsilon(cfg.event))
    assert cfg.secure_sum is not None and cfg.secure_sum.length == 2 * cfg.sketch.size


def test_rejects_k_below_one():
    with pytest.raises(ConfigError, match="k must be"):
        replace(_local(), k=0)


def test_rejects_dim_other_than_the_sketch():
    with pytest.raises(ConfigError, match="!= sketch dim"):
        replace(_local(), dim=4)


def test_rejects_unknown_model():
    with pytest.raises(ConfigError, match="model must be"):
        replace(_local(), model="central")


def test_rejects_n_expected_below_one():
    with pytest.raises(ConfigError, match="n_expected"):
        replace(_local(), n_expected=0)


def test_rejects_restarts_out_of_range():
    with pytest.raises(ConfigError, match="restarts"):
        replace(_local(), restarts=0)


def test_rejects_a_secure_sum_in_the_local_model():
    with pytest.raises(ConfigError, match="has no secure sum"):
        replace(_local(), secure_sum=_shuffle().secure_sum)


def test_rejects_a_shuffle_round_without_secure_sum():
    with pytest.raises(ConfigError, match="needs its secure-sum"):
        replace(_shuffle(), secure_sum=None)


def test_rejects_a_secure_sum_of_the_wrong_length():
    other = derive_sketch_round(10_000, 3, 5, 1.0, bound=PublicBound(radius=2.0), seed=7, model="shuffle",
                                delta=1e-6, min_devices=1000).secure_sum
    with pytest.raises(ConfigError, match="length"):
        replace(_shuffle(), secure_sum=other)


def test_rejects_a_secure_sum_at_another_epsilon():
    cfg = _shuffle()
    with pytest.raises(ConfigError, match="epsilon"):
        replace(cfg, sketch=replace(cfg.sketch, epsilon=2.0))


def test_rejects_masks_in_the_shuffle_model():
    with pytest.raises(ConfigError, match="r = m"):
        _shuffle(measurements=60)


def test_rejects_a_bound_of_another_dimension():
    with pytest.raises(ConfigError, match="box has"):
        replace(_local(), bound=PublicBound(low=(0.0, 0.0), high=(1.0, 1.0)))


def test_derive_rejects_shuffle_fields_in_the_local_model():
    with pytest.raises(ConfigError, match="belong to shuffle"):
        _local(min_devices=100)


def test_derive_rejects_a_shuffle_round_without_devices():
    with pytest.raises(ConfigError, match="min_devices"):
        derive_sketch_round(100, 3, 4, 1.0, bound=PublicBound(radius=1.0), seed=1, model="shuffle", delta=1e-6)


def test_from_dict_rejects_a_tree_config():
    with pytest.raises(ConfigError, match="not a sketch round"):
        sketch_round_from_dict({"kind": "sketch", "k": 3})
