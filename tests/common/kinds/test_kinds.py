"""The shared half of round kinds (common/kinds/__init__.py): every published config
names its kind, parses back to itself, and tells the shuffler how to mix it."""

from __future__ import annotations

import numpy as np
import pytest

from shoal.common.bounds import PublicBound
from shoal.common.errors import ConfigError
from shoal.common.kinds import config_kinds, dump_config, kind_name, parse_config
from shoal.common.kinds.base import Mixing
from shoal.common.kinds.central import derive_central_round
from shoal.common.kinds.continual import derive_continual_round
from shoal.common.kinds.elbow import derive_elbow
from shoal.common.kinds.refine import derive_refine
from shoal.common.kinds.sketch import derive_sketch_round
from shoal.common.kinds.tree import derive_config


def _configs():
    bound = PublicBound(radius=2.0)
    return {
        "tree local": derive_config(10_000, 3, 4, 4.0),
        "tree shuffle": derive_config(100_000, 3, 4, 1.0, model="shuffle", delta=1e-6, min_batch=5000),
        "sketch local": derive_sketch_round(10_000, 3, 4, 1.0, bound=bound, seed=7),
        "sketch shuffle": derive_sketch_round(10_000, 3, 4, 1.0, bound=bound, seed=7, model="shuffle", delta=1e-6,
                                              min_devices=1000),
        "refine": derive_refine("parent", np.eye(3)[:2] * 0.5, bound, 1.0, 1e-7, 100),
        "elbow": derive_elbow("parent", np.eye(3)[:2] * 0.5, bound, "kmedian", 0.1, 1e-8, 100),
        "central 003": derive_central_round(10_000, 3, 4, 1.0, 1e-6, bound, algorithm="maxcover-003", seed=3),
        "central 000": derive_central_round(10_000, 20, 4, 1.0, 1e-6, bound, algorithm="maxcover-000", seed=3),
        "continual pure": derive_continual_round(2, 3, 1.0, 0.0, PublicBound(radius=2.0), horizon=64, seed=5),
        "continual gaussian": derive_continual_round(3, 3, 1.0, 1e-6, bound, horizon=64, levels=4, seed=5),
    }


@pytest.mark.parametrize("name", list(_configs()))
def test_a_published_config_names_its_kind_and_parses_back_to_itself(name):
    cfg = _configs()[name]
    kind = name.split()[0]
    data = dump_config(kind, cfg)
    assert data["kind"] == kind == kind_name(data)
    assert parse_config(data) == cfg


def test_the_shuffler_releases_tree_and_local_sketch_rounds_in_batches_of_their_min_batch():
    c = _configs()
    tree, sketch = config_kinds()["tree"], config_kinds()["sketch"]
    assert tree.mixing(c["tree local"]) == Mixing(0, True, 1)
    assert tree.mixing(c["tree shuffle"]) == Mixing(5000, True, 1)
    assert sketch.mixing(c["sketch local"]) == Mixing(0, True, 1)


@pytest.mark.parametrize("name", ["sketch shuffle", "refine", "elbow"])
def test_secure_sum_rounds_mix_every_share_of_min_devices_in_one_flush(name):
    cfg = _configs()[name]
    ss = cfg.secure_sum
    assert config_kinds()[name.split()[0]].mixing(cfg) == Mixing(ss.min_devices * ss.shares, False, ss.shares)


def test_the_shuffler_carries_central_points_without_a_mixing_rule():
    assert config_kinds()["central"].mixing(_configs()["central 000"]) == Mixing(0, True, 1)


def test_mixing_refuses_a_negative_minimum():
    with pytest.raises(ConfigError, match="min_messages=-1"):
        Mixing(-1, True, 1)


def test_mixing_refuses_zero_parts_per_device():
    with pytest.raises(ConfigError, match="parts_per_device=0"):
        Mixing(10, True, 0)


def test_a_config_of_one_kind_does_not_parse_as_another():
    data = dump_config("sketch", _configs()["sketch local"])
    with pytest.raises(ConfigError):
        config_kinds()["tree"].parse(data)
