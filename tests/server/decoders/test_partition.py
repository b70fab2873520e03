"""Decoding a partition round (server/decoders/partition.py): planted clusters
are found from noisy bucket sums, and fewer kept buckets than k still give k
centers; the statement says whom the secure sum's guarantee covers."""

from __future__ import annotations

import numpy as np

from shoal.common.bounds import PublicBound
from shoal.common.partition_round import contributions, derive_partition
from shoal.server.decoders.partition import partition_centers, partition_statement


def test_planted_clusters_are_found_from_noisy_bucket_sums():
    rng = np.random.default_rng(2)
    true = rng.normal(size=(4, 8))
    true *= 0.6 / np.linalg.norm(true, axis=1, keepdims=True)
    x = true[rng.integers(0, 4, 20_000)] + rng.normal(0, 0.01, (20_000, 8))
    cfg = derive_partition(20_000, 8, 4, 1.0, 1e-6, PublicBound(radius=1.0), min_devices=20_000, seed=3)
    total = contributions(x, cfg).sum(0) + rng.normal(0, cfg.secure_sum.noise_std, cfg.secure_sum.length)
    centers, sizes, kept = partition_centers(total, cfg, rng)
    gaps = np.linalg.norm(true[:, None, :] - centers[None, :, :], axis=2).min(axis=1)
    assert kept >= 4 and gaps.max() < 0.1 and abs(sizes.sum() - 20_000) < 2000


def test_fewer_kept_buckets_than_k_still_give_k_centers():
    x = np.tile([[0.4, 0.0]], (5000, 1))
    cfg = derive_partition(5000, 2, 6, 1.0, 1e-6, PublicBound(radius=1.0), min_devices=5000, seed=1)
    centers, sizes, kept = partition_centers(contributions(x, cfg).sum(0), cfg, np.random.default_rng(0))
    assert kept == 1 and centers.shape == (6, 2) and np.allclose(centers, [0.4, 0.0])


def test_the_statement_is_central_with_no_local_guarantee_against_curious_and_hostile_servers():
    cfg = derive_partition(5000, 2, 6, 1.0, 1e-6, PublicBound(radius=1.0), min_devices=5000, seed=1)
    st = partition_statement(cfg)
    assert st["central_epsilon"] == 1.0 and st["device_epsilon"] is None
    assert st["guarantees"][0]["against"] == ["curious server", "hostile server"]
