"""Seed 001's greedy under continual observation (server/decoders/continual/stream.py):
one item's insertion and deletion stay within each counter family's stated
sensitivity, the generalized sums are unbiased, the released centers are never
worse than the private one-center answer, the greedy follows well-separated
clusters as they appear and vanish, and the privacy statement is built from
the event record."""

from __future__ import annotations

import math

import numpy as np
import pytest

from shoal.common.errors import ConfigError
from shoal.common.kinds.continual import (
    MEAN_BITS,
    ContinualParams,
    Q,
    continual_guarantee,
    continual_statement,
)
from shoal.common.mechanisms.continual_noise import tree_height
from shoal.server.decoders.central.greedy import fixed_point_weights
from shoal.server.decoders.continual.stream import ContinualGreedy


def _greedy(**kw) -> ContinualGreedy:
    args = {"dim": 2, "k": 3, "epsilon": 1.0, "horizon": 16, "levels": 4, "seed": 1} | kw
    return ContinualGreedy(ContinualParams(**args), np.random.default_rng(0))


@pytest.mark.parametrize(("field", "value", "match"), [
    ("dim", 0, "dim must be in"), ("dim", 9, "dim must be in"), ("k", 0, "k must be"),
    ("epsilon", 0.0, "epsilon must be"), ("epsilon", math.inf, "epsilon must be"),
    ("horizon", 0, "horizon must be"), ("levels", 0, "levels must be"), ("levels", 13, "levels must be"),
    ("objective", "kcenter", "objective must be"), ("levels", 9, "counters, more than")])
def test_continual_params_reject_invalid(field, value, match):
    args = {"dim": 2 if field != "levels" or value != 9 else 6, "k": 3, "epsilon": 1.0, "horizon": 16} | {field: value}
    with pytest.raises(ConfigError, match=match):
        ContinualParams(**args)


def test_one_items_insertion_and_deletion_stay_within_each_familys_sensitivity():
    """Per step, one point moves the values by <= L Q, the counts by 1, the mean's vector by
    ceil(sqrt(d) 2^b) + d + 2^b in L1; it reaches ``height`` nodes at its insertion and as
    many at its deletion: the families' stated sensitivities are twice height times these."""
    g = _greedy(dim=3, horizon=1024, levels=5)
    h = tree_height(1024)
    worst = np.array([[1.0, 1.0, 1.0]]) / math.sqrt(3)  # the mean's worst point: on the diagonal
    for p in np.vstack([worst, np.random.default_rng(1).normal(size=(50, 3))]):
        p = p / max(1.0, float(np.linalg.norm(p)))
        values, counts, mean = g._leaves(p[None, :])
        assert np.abs(values).sum() <= 5 * Q and np.abs(counts).sum() == 1
        assert np.abs(mean).sum() <= math.ceil(math.sqrt(3) * 2**MEAN_BITS) + 3 + 2**MEAN_BITS
    assert g.values_noise.sensitivity == 2 * h * 5 * Q and g.counts_noise.sensitivity == 2 * h
    assert g.mean_noise.sensitivity == 2 * h * (math.ceil(math.sqrt(3) * 2**MEAN_BITS) + 3 + 2**MEAN_BITS)
    finest = g.grids[-1]
    at_center = finest.centers(finest.index(np.zeros((1, 3))))
    values, _, _ = g._leaves(at_center)
    assert values[int(g.offsets[-2]):].sum() == Q  # the finest cell's own center weighs Q: the bound is attained


def test_the_generalized_sums_are_unbiased():
    g = _greedy()
    p = np.array([[0.13, -0.41]])
    many = np.repeat(p, 40_000, axis=0)
    values, _, _ = g._leaves(many)
    for level, (grid, r) in enumerate(zip(g.grids, g.radii, strict=True)):
        ids = np.flatnonzero(values[int(g.offsets[level]):int(g.offsets[level + 1])])
        assert ids.size <= 1
        c = grid.centers(grid.index(p))
        w = Q * np.clip(1 - np.linalg.norm(p - c) / r, 0, 1) ** 2
        got = values[int(g.offsets[level]):int(g.offsets[level + 1])].sum() / many.shape[0]
        frac = w - math.floor(w)
        assert abs(got - w) <= 5 * math.sqrt(frac * (1 - frac) / many.shape[0]) + 1e-12
        assert np.all(fixed_point_weights(many[:10], np.repeat(c, 10, axis=0), r, 2, Q, g.rng) <= Q)


def test_the_released_centers_are_never_worse_than_the_private_one_center_answer():
    rng = np.random.default_rng(3)
    g = _greedy(k=4, horizon=64, epsilon=0.5)
    alive = np.zeros((0, 2))
    for _ in range(64):
        new = rng.normal(0, 0.3, size=(int(rng.integers(0, 40)), 2))
        new /= np.maximum(1, np.linalg.norm(new, axis=1, keepdims=True))
        drop = rng.random(alive.shape[0]) < 0.05
        release = g.step(new, alive[drop])
        alive = np.vstack([alive[~drop], new])
        if alive.shape[0]:
            d2 = ((alive[:, None] - release.centers[None]) ** 2).sum(2)
            assert d2.min(1).mean() <= d2[:, -1].mean() + 1e-12  # the last center is the private mean


def test_the_greedy_follows_clusters_that_appear_and_vanish():
    """At a large eps: two clusters, a third appears at step 9, the first vanishes at 13."""
    g = _greedy(k=4, horizon=16, epsilon=200.0, levels=5)
    a, b, c = np.array([0.5, 0.5]), np.array([-0.5, 0.1]), np.array([0.1, -0.6])
    rng = np.random.default_rng(4)
    born = {name: [] for name in "abc"}
    for t in range(1, 17):
        ins = [m + rng.normal(0, 0.02, size=(300, 2)) for m, on in ((a, t < 13), (b, True), (c, t >= 9)) if on]
        gone = np.vstack(born["a"]) if t == 13 else np.zeros((0, 2))
        if t < 13:
            born["a"].append(ins[0])
        release = g.step(np.vstack(ins), gone)
        live = [m for m, on in ((a, t < 13), (b, True), (c, t >= 9)) if on]
        near = [float(np.linalg.norm(release.centers - m, axis=1).min()) for m in live]
        if t in (8, 12, 16):
            assert max(near) < 0.1, (t, near, release.centers)
        if t == 16:  # a is gone: the greedy's first two centers are b's and c's
            first = release.centers[:2]
            assert sorted(np.linalg.norm(first[:, None] - np.array([b, c])[None], axis=2).argmin(1)) == [0, 1]
            assert np.linalg.norm(first - a, axis=1).min() > 0.5


def test_a_step_outside_the_unit_ball_is_refused():
    with pytest.raises(ConfigError, match="inside the unit ball"):
        _greedy().step(np.array([[2.0, 0.0]]), np.zeros((0, 2)))


def test_the_statement_is_built_from_the_event_and_sums_to_epsilon():
    g = _greedy(epsilon=2.0, horizon=1024)
    assert continual_guarantee(g.event) == (pytest.approx(2.0), 0.0)
    words = continual_statement(g.event)
    assert words["horizon"] == 1024 and words["delta"] == 0.0 and "event-level" in words["level"]
    assert words["parts"]["values"]["tree_height"] == 11 and "not the curator" in words["covers"]
    with pytest.raises(ConfigError, match="no continual privacy rule"):
        continual_guarantee(object())


def test_an_eps_delta_round_draws_gaussian_nodes_and_spends_within_its_delta():
    g = _greedy(epsilon=1.0, horizon=1024, levels=5, delta=1e-6)
    eps, delta = continual_guarantee(g.event)
    assert eps == pytest.approx(1.0) and 0 < delta <= 1e-6
    words = continual_statement(g.event)
    assert "discrete Gaussian" in words["parts"]["values"]["mechanism"] and words["delta"] == delta
    h = tree_height(1024)
    assert g.values_noise.l2_sq == 2 * h * 5 * Q**2  # type: ignore[union-attr]
    pure = _greedy(epsilon=1.0, horizon=1024, levels=5)
    # the Gaussian's node deviation grows with sqrt(height L), Laplace's with height L
    assert g.values_noise.node_variance < pure.values_noise.node_variance / 4
    rng = np.random.default_rng(6)
    release = g.step(rng.normal(0, 0.1, size=(500, 2)), np.zeros((0, 2)))
    assert release.centers.shape == (3, 2)


def test_continual_params_reject_a_delta_of_one():
    with pytest.raises(ConfigError, match="delta must be in"):
        ContinualParams(dim=2, k=3, epsilon=1.0, horizon=16, delta=1.0)
