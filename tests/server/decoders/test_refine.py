"""Decoding a refine round (server/decoders/refine.py): a split round separates
two tight clusters that one parent center sits between, which a plain Lloyd
step cannot; a round without a split is the plain Lloyd step; a round of a
chain combines its means with the parent's centers by their stated noise
variance (converged: the two average; still travelling: the new mean)."""

from __future__ import annotations

import numpy as np
import pytest

from shoal.common.bounds import PublicBound
from shoal.common.kinds.refine import contributions, derive_refine
from shoal.server.decoders.kmeans import kmeans_cost
from shoal.server.decoders.refine import refine_answer


def _merged(seed):
    """Three tight clusters; the parent put one center between A and B, two on C."""
    rng = np.random.default_rng(seed)
    a, b, c = np.array([0.6, 0.3, 0.0]), np.array([0.2, -0.6, 0.1]), np.array([-0.5, 0.1, -0.4])
    x = np.concatenate([m + rng.normal(0, 0.01, (2000, 3)) for m in (a, b, c)])
    parent = np.array([(a + b) / 2, c + [0.02, 0, 0], c - [0.02, 0, 0]])
    return x, parent, np.array([a, b, c]), rng


def _decode(x, parent, split, rng, seed, eps=1.0, prior=None):
    cfg = derive_refine("p", parent, PublicBound(radius=1.0), eps, 1e-7, x.shape[0], split=split, seed=seed)
    total = contributions(x, cfg).sum(0) + rng.normal(0, cfg.secure_sum.noise_std, cfg.secure_sum.length)
    return refine_answer(total, cfg, rng, prior)


def test_a_split_refine_separates_two_clusters_merged_in_one_parent_center():
    for seed in range(5):
        x, parent, true, rng = _merged(seed)
        answer = _decode(x, parent, 2, rng, seed)
        centers, sizes = answer.centers, answer.sizes
        assert centers.shape == (3, 3) and sizes.shape == (3,)
        assert np.all(answer.variance > 0) and np.all(answer.lam == 1.0)  # each center the mean of its parts
        gaps = np.linalg.norm(true[:, None] - centers[None], axis=2).min(axis=1)
        assert gaps.max() < 0.05, (seed, gaps)  # merged: 0.5
        assert abs(sizes.sum() - 6000) < 300


def test_without_a_split_the_merged_center_stays_between_its_clusters():
    x, parent, true, rng = _merged(0)
    plain = _decode(x, parent, 1, rng, 0).centers
    split = _decode(x, parent, 2, rng, 0).centers
    assert np.linalg.norm(plain[0] - parent[0]) < 0.02  # a fixed point of the Lloyd step
    assert kmeans_cost(x, split) < 0.01 * kmeans_cost(x, plain)


def _converged(seed):
    """Three tight clusters whose parent centers already sit at their means (a converged chain)."""
    rng = np.random.default_rng(seed)
    true = np.array([[0.6, 0.3, 0.0], [0.2, -0.6, 0.1], [-0.5, 0.1, -0.4]])
    x = np.concatenate([m + rng.normal(0, 0.01, (300, 3)) for m in true])
    return x, true, rng


def test_a_chain_round_on_converged_centers_averages_them_with_its_means():
    """Parent centers carrying noise variance w (as a refine round's result states it), this
    round's means variance v = w: combined, the error falls to about half of either's."""
    errors = {"parent": [], "plain": [], "combined": []}
    for seed in range(40):
        x, true, rng = _converged(seed)
        means = np.stack([x[i * 300:(i + 1) * 300].mean(0) for i in range(3)])
        v = _decode(x, means, 1, np.random.default_rng(seed), seed).variance
        parent = means + rng.normal(0, np.sqrt(v / 3)[:, None], (3, 3))  # a parent as noisy as this round
        plain = _decode(x, parent, 1, np.random.default_rng(1000 + seed), seed)
        combined = _decode(x, parent, 1, np.random.default_rng(1000 + seed), seed, prior=v)
        assert np.all((combined.lam > 0) & (combined.lam < 1)) and np.all(combined.variance < v)
        for name, c in (("parent", parent), ("plain", plain.centers), ("combined", combined.centers)):
            errors[name].append(((c - means) ** 2).sum())
    parent, plain, combined = (float(np.mean(errors[n])) for n in ("parent", "plain", "combined"))
    assert combined < 0.75 * min(parent, plain), (parent, plain, combined)


def test_a_chain_round_moves_a_far_parent_center_all_the_way_to_its_mean():
    x, true, rng = _converged(0)
    parent = true + np.array([[0.3, 0, 0], [0, 0, 0], [0, 0, 0]])  # the first center still travels
    answer = _decode(x, parent, 1, rng, 0, eps=4.0, prior=np.full(3, 1e-8))
    assert answer.lam[0] > 0.99 and np.linalg.norm(answer.centers[0] - true[0]) < 0.1


def test_a_parent_center_with_no_stated_variance_takes_the_plain_step():
    x, true, rng = _converged(1)
    parent = true + 0.02
    plain = _decode(x, parent, 1, np.random.default_rng(5), 1)
    unknown = _decode(x, parent, 1, np.random.default_rng(5), 1, prior=np.full(3, np.nan))
    assert np.array_equal(plain.centers, unknown.centers) and np.all(unknown.lam == 1.0)


def test_a_prior_of_the_wrong_length_is_refused():
    x, true, rng = _converged(2)
    with pytest.raises(ValueError, match="one value per parent center"):
        _decode(x, true, 1, rng, 2, prior=np.ones(2))
