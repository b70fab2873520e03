"""Decoding a partition round (server/decoders/partition.py): planted clusters
are found from noisy bucket sums, and fewer kept buckets than k still give k
centers; the statement says whom the secure sum's guarantee covers."""

from __future__ import annotations

import numpy as np
import pytest

from shoal.common.bounds import PublicBound
from shoal.common.kinds.partition import codes, contributions, derive_partition
from shoal.server.decoders.partition import partition_centers, partition_statement


@pytest.mark.parametrize("seed", range(6))
def test_planted_clusters_alone_in_their_bucket_are_found_from_noisy_bucket_sums(seed):
    """A cluster whose bucket (the public hyperplanes' sign code) holds no other
    cluster is found (a center within 0.2 of it; measured 0.005-0.14 over seeds 0-5); clusters that share a bucket
    are averaged by construction (the round releases bucket means), so which
    clusters are separated depends on the public seed, not on the decoder."""
    rng = np.random.default_rng(2)
    true = rng.normal(size=(4, 8))
    true *= 0.6 / np.linalg.norm(true, axis=1, keepdims=True)
    x = true[rng.integers(0, 4, 20_000)] + rng.normal(0, 0.01, (20_000, 8))
    cfg = derive_partition(20_000, 8, 4, 1.0, 1e-6, PublicBound(radius=1.0), min_devices=20_000, seed=seed)
    total = contributions(x, cfg).sum(0) + rng.normal(0, cfg.secure_sum.noise_std, cfg.secure_sum.length)
    centers, sizes, kept = partition_centers(total, cfg, rng)
    gaps = np.linalg.norm(true[:, None, :] - centers[None, :, :], axis=2).min(axis=1)
    code = codes(true, cfg)
    alone = np.array([np.sum(code == c) == 1 for c in code])
    assert kept >= len(set(code.tolist())) and abs(sizes.sum() - 20_000) < 2000
    assert gaps[alone].max(initial=0.0) < 0.2  # a third of the clusters' radius (0.6)
    assert alone.sum() >= 1 or seed == 0  # seed 0's hyperplanes pair the four clusters (nothing alone)


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
