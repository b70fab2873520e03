"""The binary-tree mechanism (server/decoders/continual/binary_tree.py): its
releases are unbiased prefix sums with the stated variance at every step, it
keeps O(log T) state, refuses steps beyond its horizon, and the sequence of
all its releases is eps-DP on neighbouring streams (one insertion and its
later deletion), while a mechanism that forgets the tree's height is caught."""

from __future__ import annotations

import math

import numpy as np
import pytest

from shoal.common.errors import ConfigError
from shoal.common.mechanisms.continual_noise import BinaryTreeGaussian, BinaryTreeNoise, tree_height
from shoal.server.decoders.continual.binary_tree import BinaryTree
from tests.dp_audit import delta_lower_bound, joint_counts, simultaneous_lower_bound

EPS = 1.0


def _releases(stream: np.ndarray, noise: BinaryTreeNoise, seed: int) -> np.ndarray:
    """(T, counters) releases of the same stream fed to every counter: each counter is
    one independent run of the mechanism (the audit's trials, vectorised)."""
    tree = BinaryTree(stream.shape[1], noise, np.random.default_rng(seed))
    return np.stack([tree.step(row) for row in stream])


def test_tree_height_counts_the_levels_one_step_lies_in():
    assert [tree_height(t) for t in (1, 2, 3, 8, 1023, 1024)] == [1, 2, 2, 4, 10, 11]


def test_releases_are_unbiased_prefix_sums_with_one_node_of_noise_per_set_bit():
    noise = BinaryTreeNoise(horizon=16, sensitivity=8, epsilon=EPS)
    runs = 40_000
    rng = np.random.default_rng(0)
    values = rng.integers(-5, 20, size=16)
    out = _releases(np.repeat(values[:, None], runs, axis=1), noise, 1)
    err = out - np.cumsum(values)[:, None]
    for t in range(1, 17):
        var = noise.prefix_variance(t)
        assert var == pytest.approx(bin(t).count("1") * noise.node_variance)
        assert abs(err[t - 1].mean()) <= 5 * math.sqrt(var / runs)
        assert err[t - 1].var() == pytest.approx(var, rel=0.05)


def test_the_state_is_log_t_per_counter_whatever_the_horizon():
    tree = BinaryTree(7, BinaryTreeNoise(horizon=1024, sensitivity=1, epsilon=EPS), np.random.default_rng(2))
    assert tree.exact.shape == tree.noisy.shape == (11, 7)


def test_a_step_beyond_the_horizon_is_refused():
    tree = BinaryTree(2, BinaryTreeNoise(horizon=2, sensitivity=1, epsilon=EPS), np.random.default_rng(3))
    tree.step(np.zeros(2, dtype=np.int64))
    tree.step(np.zeros(2, dtype=np.int64))
    with pytest.raises(ConfigError, match="horizon is 2 steps; step 3"):
        tree.step(np.zeros(2, dtype=np.int64))


def test_a_step_of_the_wrong_width_is_refused():
    tree = BinaryTree(3, BinaryTreeNoise(horizon=4, sensitivity=1, epsilon=EPS), np.random.default_rng(4))
    with pytest.raises(ConfigError, match="feeds 3 counters, got shape"):
        tree.step(np.zeros(2, dtype=np.int64))


@pytest.mark.parametrize(("field", "value"), [("horizon", 0), ("sensitivity", 0), ("epsilon", 0.0),
                                              ("epsilon", math.nan)])
def test_binary_tree_noise_rejects_invalid(field, value):
    args = {"horizon": 8, "sensitivity": 4, "epsilon": 1.0, field: value}
    with pytest.raises(ConfigError, match=field if field != "sensitivity" else "L1 sensitivity"):
        BinaryTreeNoise(**args)


T, W = 8, 16  # the audit's horizon and one event's weight (the greedy's fixed-point unit)
_STEPS = np.arange(1, T + 1)
_PARENT = _STEPS & (_STEPS - 1)  # t with its lowest bit cleared (0 for powers of two)


def _neighbours(insert: int, delete: int | None) -> tuple[np.ndarray, np.ndarray]:
    """A stream and the same stream with one more item of weight W inserted at ``insert``
    (and deleted at ``delete``)."""
    base = np.array([3, 0, 5, 1, 0, 2, 7, 4]) * W
    other = base.copy()
    other[insert - 1] += W
    if delete is not None:
        other[delete - 1] -= W
    return base, other


def _nodes(prefix: np.ndarray) -> np.ndarray:
    """The released nodes behind releases S_1..S_T (axis 0): node_t = S_t - S_{t's parent}."""
    padded = np.concatenate([np.zeros((1,) + prefix.shape[1:], dtype=prefix.dtype), prefix])
    return padded[_STEPS] - padded[_PARENT]


def _audit(stated_sensitivity: int, insert: int, delete: int | None, runs: int = 200_000) -> float:
    """95% simultaneous lower bound on the log likelihood ratio of the whole release
    sequence (S_1..S_T, the integers the curator publishes) for a stream vs the same
    stream with one more item of weight W inserted at ``insert`` (and deleted at
    ``delete``). The releases determine the T released nodes (node_t = S_t -
    S_{t with its lowest bit cleared}); the score is the discrete Laplace product's
    likelihood ratio over them against both streams' exact node sums."""
    noise = BinaryTreeNoise(horizon=T, sensitivity=stated_sensitivity, epsilon=EPS)
    base, other = _neighbours(insert, delete)
    a, b = _nodes(np.cumsum(base)), _nodes(np.cumsum(other))
    scores = []
    for seed, stream in enumerate((base, other)):
        out = _nodes(_releases(np.repeat(stream[:, None], runs, axis=1), noise, 10 + seed))
        scores.append((np.abs(out - a[:, None]) - np.abs(out - b[:, None])).sum(0))
    reach = float(np.abs(a - b).sum()) + 1
    codes = [np.digitize(s, np.linspace(-reach, reach, 41)) for s in scores]
    return simultaneous_lower_bound(*joint_counts(*codes))


@pytest.mark.parametrize(("insert", "delete"), [(1, None), (1, 5), (1, 6), (3, 4), (5, None)])
def test_the_release_sequence_is_eps_dp_on_neighbouring_streams(insert, delete):
    """Stated sensitivity 2 x height x W: an item's insertion and its later deletion."""
    assert _audit(2 * tree_height(T) * W, insert, delete) <= EPS


def test_the_audit_catches_a_tree_that_forgets_its_height():
    """Noise for one node per event (sensitivity 2 W) leaks ~height x eps."""
    assert _audit(2 * W, 1, None) > EPS


def test_the_audit_catches_a_tree_that_forgets_the_deletion():
    """Noise for the insertion alone (height x W): an item inserted at step 1 and deleted
    at step 5 moves 5 released nodes ([1], [1-2], [1-4]; [5], [5-6]): ~5/4 eps."""
    assert _audit(tree_height(T) * W, 1, 5) > EPS


DELTA = 0.02  # large enough to measure


def test_the_gaussian_tree_spends_within_its_delta_and_is_unbiased():
    noise = BinaryTreeGaussian(horizon=16, l2_sq=2 * tree_height(16) * W**2, epsilon=EPS, delta_target=1e-6,
                               counters=1000)
    assert noise.delta <= 1e-6 and noise.sigma_sq <= 2**20
    runs = 40_000
    values = np.arange(16) * 3 - 7
    err = _releases(np.repeat(values[:, None], runs, axis=1), noise, 5) - np.cumsum(values)[:, None]
    for t in (1, 7, 15, 16):
        var = noise.prefix_variance(t)
        assert abs(err[t - 1].mean()) <= 5 * math.sqrt(var / runs)
        assert err[t - 1].var() == pytest.approx(var, rel=0.05)


def test_a_gaussian_tree_beyond_one_draws_variance_sums_shares():
    noise = BinaryTreeGaussian(horizon=1024, l2_sq=2 * 11 * 6 * 16**2, epsilon=0.1, delta_target=1e-6, counters=10)
    assert noise.shares > 1 and noise.sigma_sq <= 2**20 and noise.delta <= 1e-6


@pytest.mark.parametrize(("field", "value"), [("horizon", 0), ("l2_sq", 0), ("counters", 0), ("epsilon", -1.0),
                                              ("delta_target", 0.0), ("delta_target", 1.0)])
def test_binary_tree_gaussian_rejects_invalid(field, value):
    args = {"horizon": 8, "l2_sq": 4, "epsilon": 1.0, "delta_target": 1e-6, "counters": 1, field: value}
    with pytest.raises(ConfigError, match="Gaussian binary tree needs"):
        BinaryTreeGaussian(**args)


def _gaussian_audit(l2_sq: int, insert: int, delete: int | None, runs: int = 200_000) -> float:
    """Lower bound on max P(A | S) - e^eps P(A | S') over upper and lower sets of the
    Gaussian likelihood ratio's statistic sum_j node_j (b_j - a_j) (the released nodes
    recovered from the releases as in ``_audit``)."""
    noise = BinaryTreeGaussian(horizon=T, l2_sq=l2_sq, epsilon=EPS, delta_target=DELTA, counters=runs)
    base, other = _neighbours(insert, delete)
    a, b = _nodes(np.cumsum(base)), _nodes(np.cumsum(other))
    stats_ = [((_nodes(_releases(np.repeat(s[:, None], runs, axis=1), noise, 20 + i)) - a[:, None])
               * (b - a)[:, None]).sum(0) for i, s in enumerate((base, other))]
    return delta_lower_bound(*stats_, EPS)


@pytest.mark.parametrize(("insert", "delete"), [(1, None), (1, 5)])
def test_the_gaussian_release_sequence_is_eps_delta_dp_on_neighbouring_streams(insert, delete):
    assert _gaussian_audit(2 * tree_height(T) * W**2, insert, delete) <= DELTA


def test_the_gaussian_audit_catches_a_tree_that_forgets_its_height():
    assert _gaussian_audit(2 * W**2, 1, 5) > DELTA
