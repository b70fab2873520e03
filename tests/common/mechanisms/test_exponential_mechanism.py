"""The exponential mechanism: its law is exactly McSherry-Talwar's, the block stands
for its size in candidates, it is eps-DP on worst-case neighbouring scores, and
its interval arithmetic encloses the Gumbel variables it compares."""

import decimal

import numpy as np
import pytest
from scipy import stats

from shoal.common.errors import ConfigError
from shoal.common.mechanisms import exponential_mechanism as em
from tests.dp_audit import simultaneous_lower_bound


def _draws(scores, eps, n, seed, block=None):
    rng = np.random.default_rng(seed)
    return np.array([em.choose(scores, eps, rng, block=block) for _ in range(n)])


def _chi2_pvalue(draws, probs):
    counts = np.bincount(draws, minlength=probs.size)
    return stats.chisquare(counts, probs * draws.size).pvalue


def test_law_is_the_exponential_mechanism():
    scores = np.array([0, 3, 1, 7, 2])
    draws = _draws(scores, 0.8, 10_000, seed=1)
    assert _chi2_pvalue(draws, em.probabilities(scores, 0.8)) > 1e-4


def test_law_is_exact_when_every_comparison_goes_to_the_decimal_refinement(monkeypatch):
    monkeypatch.setattr(em, "_MARGIN", 1e3)  # no float interval separates anything
    scores = np.array([2, 0, 4, 1])
    draws = _draws(scores, 1.0, 2_000, seed=2)
    assert _chi2_pvalue(draws, em.probabilities(scores, 1.0)) > 1e-4


def test_a_block_stands_for_its_size_in_equal_candidates():
    # 10^31 empty cells (score 0) against cells covering 140 and 146 points at eps = 1:
    # weights e^70, e^73 and 10^31 = e^71.4, so the block gets 0.16 of the mass.
    scores, block = np.array([140, 146]), (10**31, 0)
    probs = em.probabilities(scores, 1.0, block=block)
    assert 0.1 < probs[2] < 0.3
    draws = _draws(scores, 1.0, 10_000, seed=3, block=block)
    assert _chi2_pvalue(draws, probs) > 1e-4


def _worst_pair(eps, n, seed, run_eps=None):
    """One candidate against a block of 40: scores (1 | 0 x 40) and (0 | 1 x 40),
    every score moved by the sensitivity, the pair on which the ratio nears e^eps."""
    run = eps if run_eps is None else run_eps
    a = _draws(np.array([1]), run, n, seed, block=(40, 0))
    b = _draws(np.array([0]), run, n, seed + 1, block=(40, 1))
    return simultaneous_lower_bound(np.bincount(a, minlength=2), np.bincount(b, minlength=2))


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
def test_choice_is_eps_dp_on_worst_case_neighbouring_scores(eps):
    assert _worst_pair(eps, 15_000, seed=10) <= eps


def test_the_audit_catches_a_mechanism_run_at_twice_its_epsilon():
    assert _worst_pair(1.0, 15_000, seed=20, run_eps=2.0) > 1.0


@pytest.mark.parametrize("k", [0, 1, 2**32, 2**63 - 1, 2**63, 2**64 - 2, 2**64 - 1])
def test_float_and_decimal_intervals_enclose_the_gumbel_of_every_u_in_the_cell(k):
    g_lo, g_hi = em._gumbel_float(np.array([k], dtype=np.uint64))
    d_lo = em._gumbel_decimal(k, 64, up=False)
    d_hi = em._gumbel_decimal(k + 1, 64, up=True)
    if d_lo is not None:
        assert g_lo[0] <= float(d_lo)
    else:
        assert g_lo[0] == -np.inf
    if d_hi is not None:
        assert g_hi[0] >= float(d_hi)
        assert d_lo is None or d_lo < d_hi
    else:
        assert g_hi[0] == np.inf
    # A finer cell inside this one has a narrower enclosure inside the coarse one.
    if 0 < k < 2**64 - 1:
        fine_lo = em._gumbel_decimal(k << 64 | 12345, 128, up=False)
        fine_hi = em._gumbel_decimal((k << 64 | 12345) + 1, 128, up=True)
        assert fine_lo is not None and fine_hi is not None and d_lo is not None and d_hi is not None
        assert d_lo <= fine_lo < fine_hi <= d_hi


def test_decimal_gumbel_matches_a_high_precision_reference():
    k, bits = 3 * 2**62 + 17, 64
    with decimal.localcontext() as ctx:
        ctx.prec = 200
        u = decimal.Decimal(k) / decimal.Decimal(2**bits)
        ref = -((-(u.ln())).ln())
    lo, hi = em._gumbel_decimal(k, bits, up=False), em._gumbel_decimal(k, bits, up=True)
    assert lo is not None and hi is not None and lo <= ref <= hi and hi - lo < decimal.Decimal(10) ** -80


@pytest.mark.parametrize("kw,match", [
    (dict(epsilon=0.0), "epsilon must be"),
    (dict(epsilon=float("inf")), "epsilon must be"),
    (dict(sensitivity=-1.0), "sensitivity must be"),
    (dict(block=(0, 0)), "block size must be"),
    (dict(block=(5, 0.5)), "block score must be"),
    (dict(scores=np.array([0.5, 1.0])), "must be integers"),
    (dict(scores=np.array([], dtype=np.int64)), "non-empty 1-D"),
    (dict(scores=np.zeros((2, 2), dtype=np.int64)), "non-empty 1-D"),
])
def test_rejects_invalid_parameter(kw, match):
    args = dict(scores=np.array([1, 2]), epsilon=1.0, sensitivity=1.0, block=None)
    args.update(kw)
    with pytest.raises(ConfigError, match=match):
        em.choose(args["scores"], args["epsilon"], np.random.default_rng(0), sensitivity=args["sensitivity"],
                  block=args["block"])


def test_counts_stand_for_that_many_candidates_of_one_score():
    # Grouped: scores (0, 3, 1) standing for (5, 2, 1) candidates is the law of the
    # expanded list 0 x5, 3 x2, 1 summed per group.
    scores, counts = np.array([0, 3, 1]), np.array([5, 2, 1])
    expanded = em.probabilities(np.repeat(scores, counts), 1.2)
    grouped = np.add.reduceat(expanded, [0, 5, 7])
    np.testing.assert_allclose(em.probabilities(scores, 1.2, counts=counts), grouped, rtol=1e-12)
    rng = np.random.default_rng(5)
    draws = np.array([em.choose(scores, 1.2, rng, counts=counts) for _ in range(8_000)])
    assert _chi2_pvalue(draws, grouped) > 1e-4


def test_counts_keep_the_law_exact_in_the_decimal_refinement(monkeypatch):
    monkeypatch.setattr(em, "_MARGIN", 1e3)
    scores, counts = np.array([2, 0, 1]), np.array([1, 30, 4])
    rng = np.random.default_rng(6)
    draws = np.array([em.choose(scores, 1.0, rng, counts=counts) for _ in range(2_000)])
    assert _chi2_pvalue(draws, em.probabilities(scores, 1.0, counts=counts)) > 1e-4


@pytest.mark.parametrize("counts,match", [
    (np.array([1, 0]), "counts must be integers >= 1"),
    (np.array([1.0, 2.0]), "counts must be integers >= 1"),
    (np.array([1, 2, 3]), "shaped like the scores"),
])
def test_rejects_invalid_counts(counts, match):
    with pytest.raises(ConfigError, match=match):
        em.choose(np.array([1, 2]), 1.0, np.random.default_rng(0), counts=counts)
