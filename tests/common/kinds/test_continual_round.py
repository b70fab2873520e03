"""A continual round's public half (``common/kinds/continual.py``): the config
validates every parameter, the public cell count agrees with the curator's
grids, and the device-level guarantee is the statement's."""

from __future__ import annotations

import math

import numpy as np
import pytest

from shoal.common.bounds import PublicBound
from shoal.common.errors import ConfigError
from shoal.common.kinds.continual import (
    ContinualConfig,
    ContinualParams,
    continual_from_dict,
    continual_statement,
    derive_continual_round,
)
from shoal.server.decoders.continual.stream import level_grids


@pytest.mark.parametrize(("dim", "levels"), [(1, 12), (2, 6), (3, 5), (5, 3), (8, 1)])
def test_the_public_cell_count_is_the_curators_grids(dim, levels):
    params = ContinualParams(dim=dim, k=2, epsilon=1.0, horizon=8, levels=levels, seed=3)
    assert params.cells() == tuple(g.universe() for g in level_grids(params))


def test_the_horizon_is_capped():
    with pytest.raises(ConfigError, match="horizon must be in"):
        ContinualParams(dim=2, k=2, epsilon=1.0, horizon=(1 << 20) + 1)


def test_a_config_whose_bound_has_another_dimension_is_refused():
    with pytest.raises(ConfigError):
        ContinualConfig("r", PublicBound(low=(0.0, 0.0, 0.0), high=(1.0, 1.0, 1.0)),
                        ContinualParams(dim=2, k=2, epsilon=1.0, horizon=8))


def test_a_published_config_without_params_is_not_a_continual_config():
    with pytest.raises(ConfigError, match="not a continual config"):
        continual_from_dict({"kind": "continual", "round_id": "r", "bound": {"radius": 1.0}})


def test_the_device_guarantee_is_the_statements_and_names_the_curator_threat():
    cfg = derive_continual_round(2, 3, 2.0, 1e-6, PublicBound(radius=1.0), horizon=128, levels=4)
    eps, delta = cfg.device_guarantee()
    words = continual_statement(cfg.event)
    assert math.isclose(eps, 2.0) and 0 < delta <= 1e-6 + 1e-18
    assert words["central_epsilon"] == eps and words["device_epsilon"] is None and words["model"] == "central"
    (g,) = words["guarantees"]
    assert g["against"] == ["readers of the result"] and "128 steps" in g["words"]


def test_the_decode_memory_grows_with_the_counters_and_the_tree_height():
    small = derive_continual_round(2, 3, 1.0, 0.0, PublicBound(radius=1.0), horizon=16, levels=4)
    big = derive_continual_round(2, 3, 1.0, 0.0, PublicBound(radius=1.0), horizon=1 << 16, levels=6)
    assert big.decode_bytes() > 10 * small.decode_bytes()
    assert np.isfinite(small.decode_bytes())
