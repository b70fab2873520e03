"""Private max coverage (seed 003, Alg. 1): covers what Lemma 5 promises on a planted
instance, is DP on neighbouring point sets, and treats the empty-set block as empty."""

import math

import numpy as np
import pytest
from scipy import sparse

from shoal.common.errors import ConfigError
from shoal.server.decoders.central.maxcover import private_max_coverage, step_epsilon
from tests.dp_audit import simultaneous_lower_bound


def _planted(rng, groups=10, size=100, decoys=200, decoy_size=5):
    n = groups * size
    rows, cols = [], []
    for g in range(groups):
        rows += [g] * size
        cols += list(range(g * size, (g + 1) * size))
    for j in range(decoys):
        rows += [groups + j] * decoy_size
        cols += rng.choice(n, decoy_size, replace=False).tolist()
    return sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(groups + decoys, n)), n


def test_greedy_covers_what_lemma_5_promises_on_a_planted_instance():
    # z = 10 sets cover U; after 2 z ln(1/a) private picks the cover is >= (1 - a)|U| minus the
    # exponential mechanism's loss, m ln(#sets) / eps' (here 656 of 1000); a uniform pick gets ~300.
    rng = np.random.default_rng(0)
    inc, n = _planted(rng)
    a, eps_step = 0.1, 1.0
    m = math.ceil(2 * 10 * math.log(1 / a))
    out = private_max_coverage(inc, np.ones(n, dtype=bool), m, eps_step, rng)
    bound = (1 - a) * n - m * math.log(inc.shape[0]) / eps_step
    assert out.covered.sum() >= bound
    assert out.covered.sum() >= 0.95 * n
    assert set(out.picked[:10].tolist()) == set(range(10))


def test_only_the_private_points_count():
    rng = np.random.default_rng(1)
    inc, n = _planted(rng)
    active = np.zeros(n, dtype=bool)
    active[:100] = True  # only group 0's points are in R
    out = private_max_coverage(inc, active, 1, 1.0, rng)
    assert out.picked[0] == 0 and out.covered.sum() == 100 and not out.covered[100:].any()


def test_a_pick_from_the_empty_block_covers_nothing():
    inc = sparse.csr_matrix(np.array([[1, 1, 0], [0, 0, 1]]))
    out = private_max_coverage(inc, np.ones(3, dtype=bool), 5, 0.1, np.random.default_rng(2), empty_sets=10**40)
    assert np.all(out.picked == -1) and not out.covered.any()


def _sequences(active, n_runs, seed, step_eps):
    inc = sparse.csr_matrix(np.array([[1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 0, 1]]))
    rng = np.random.default_rng(seed)
    codes = np.empty(n_runs, dtype=np.int64)
    for i in range(n_runs):
        p = private_max_coverage(inc, active, 2, step_eps, rng).picked
        codes[i] = 3 * p[0] + p[1]
    return codes


def test_two_steps_are_dp_by_basic_composition_on_neighbouring_point_sets():
    # R and R minus point 1 (in two sets): each step is 2 eps'-DP, two steps 4 eps' = 1.
    full = np.ones(4, dtype=bool)
    less = full.copy()
    less[1] = False
    a, b = _sequences(full, 6_000, 3, 0.25), _sequences(less, 6_000, 4, 0.25)
    c1, c2 = np.bincount(a, minlength=9), np.bincount(b, minlength=9)
    assert simultaneous_lower_bound(c1, c2) <= 1.0


def test_step_epsilon_is_seed_003s():
    assert step_epsilon(1.0, 1e-6) == pytest.approx(1 / (2 * math.log(math.e * 1e6)))


@pytest.mark.parametrize("kw,match", [
    (dict(steps=-1), "steps must be"),
    (dict(step_eps=0.0), "step_eps must be"),
    (dict(empty_sets=-1), "empty_sets must be"),
    (dict(active=np.ones(5, dtype=bool)), "active has shape"),
    (dict(incidence=sparse.csr_matrix((0, 3))), "no sets"),
])
def test_rejects_invalid_parameter(kw, match):
    args = dict(incidence=sparse.csr_matrix(np.eye(3)), active=np.ones(3, dtype=bool), steps=1, step_eps=1.0,
                empty_sets=0)
    args.update(kw)
    with pytest.raises(ConfigError, match=match):
        private_max_coverage(args["incidence"], args["active"], args["steps"], args["step_eps"],
                             np.random.default_rng(0), empty_sets=args["empty_sets"])


@pytest.mark.parametrize("eps,delta,match", [(0.0, 1e-6, "epsilon must be"), (1.0, 0.0, "delta must be")])
def test_step_epsilon_rejects_invalid_parameter(eps, delta, match):
    with pytest.raises(ConfigError, match=match):
        step_epsilon(eps, delta)


def test_one_pick_is_the_exponential_mechanism_over_every_set_of_the_universe():
    """Sets of equal gain are drawn as one group, then a member uniformly; gain-0
    rows and the empty sets are one block, then one of them uniformly: the law
    of the pick must still be the mechanism over every set (rows 0..4, and the
    3 empty sets as one outcome, -1)."""
    from shoal.common.mechanisms.exponential_mechanism import probabilities
    from shoal.server.decoders.central.maxcover import _pick

    gains = np.array([0, 2, 2, 1, 0])
    beta = 0.7
    probs = probabilities(np.append(gains, [0, 0, 0]), 2 * beta)
    expected = np.append(probs[:5], probs[5:].sum())
    rng = np.random.default_rng(11)
    draws = np.array([_pick(gains, 3, beta, rng) for _ in range(12_000)])
    counts = np.bincount(np.where(draws < 0, 5, draws), minlength=6)
    from scipy import stats
    assert stats.chisquare(counts, expected * draws.size).pvalue > 1e-4


def test_uniform_below_is_uniform_and_handles_numbers_beyond_64_bits():
    from scipy import stats

    from shoal.server.decoders.central.maxcover import uniform_below

    rng = np.random.default_rng(12)
    draws = np.array([uniform_below(7, rng) for _ in range(7_000)])
    assert stats.chisquare(np.bincount(draws, minlength=7)).pvalue > 1e-4
    big = [uniform_below(10**40, rng) for _ in range(200)]
    assert all(0 <= v < 10**40 for v in big) and max(big) > 10**39
