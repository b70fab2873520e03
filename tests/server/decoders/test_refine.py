"""Decoding a refine round (server/decoders/refine.py): a split round separates
two tight clusters that one parent center sits between, which a plain Lloyd
step cannot; a round without a split is the plain Lloyd step."""

from __future__ import annotations

import numpy as np

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


def _decode(x, parent, split, rng, seed):
    cfg = derive_refine("p", parent, PublicBound(radius=1.0), 1.0, 1e-7, x.shape[0], split=split, seed=seed)
    total = contributions(x, cfg).sum(0) + rng.normal(0, cfg.secure_sum.noise_std, cfg.secure_sum.length)
    return refine_answer(total, cfg, rng)


def test_a_split_refine_separates_two_clusters_merged_in_one_parent_center():
    for seed in range(5):
        x, parent, true, rng = _merged(seed)
        centers, sizes = _decode(x, parent, 2, rng, seed)
        assert centers.shape == (3, 3) and sizes.shape == (3,)
        gaps = np.linalg.norm(true[:, None] - centers[None], axis=2).min(axis=1)
        assert gaps.max() < 0.05, (seed, gaps)  # merged: 0.5
        assert abs(sizes.sum() - 6000) < 300


def test_without_a_split_the_merged_center_stays_between_its_clusters():
    x, parent, true, rng = _merged(0)
    plain, _ = _decode(x, parent, 1, rng, 0)
    split, _ = _decode(x, parent, 2, rng, 0)
    assert np.linalg.norm(plain[0] - parent[0]) < 0.02  # a fixed point of the Lloyd step
    assert kmeans_cost(x, split) < 0.01 * kmeans_cost(x, plain)
