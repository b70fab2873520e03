"""PrivUnit's candidates (``privunit_codebook``): the per-nonce signed
permutation is the one the spec writes out, the shared form's candidates and
scores agree, and one round's codebook is unbiased to within 1% of c (exact
expectations over the device's coins, 2e4 transforms), while the signs-only
variant this design rejected is caught by the same measurement."""

import numpy as np
import pytest

import shoal.common.mechanisms.privunit_codebook as pc
from shoal.common.mechanisms.privunit import PrivUnitParams, cap_mask

M64 = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15


def mix64(x: int) -> int:
    z = (x + GAMMA) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def test_a_nonce_transform_is_the_signed_permutation_the_spec_derives():
    key, nonce, dim = 0x0123456789ABCDEF, 2**64 - 3, 40
    base = mix64(mix64(nonce ^ key) ^ M64)
    w = [mix64((base + i * GAMMA) & M64) for i in range(dim)]
    want_perm = sorted(range(dim), key=lambda i: (w[i] >> 1, i))
    want_signs = [-1.0 if w[i] & 1 else 1.0 for i in range(dim)]
    perm, signs = pc.nonce_transform(key, np.array([nonce], dtype=np.uint64), dim)
    assert perm[0].tolist() == want_perm and signs[0].tolist() == want_signs


def test_shared_candidates_are_the_codebook_rows_signed_and_permuted_and_score_as_they_read():
    key, dim, n = 991, 24, 64
    nonces = np.array([5, 2**63 + 1, 5], dtype=np.uint64)
    book = pc.codebook(key, n, dim)
    assert not book.flags.writeable and np.allclose(np.linalg.norm(book, axis=1), 1.0)
    assert np.array_equal(book[7], pc.candidate_vectors(key, np.zeros(1, np.uint64), np.array([7]), dim)[0])
    perm, signs = pc.nonce_transform(key, nonces, dim)
    v = pc.candidates(key, nonces, np.array([7, 7, 7]), dim, n)
    assert np.array_equal(v[1], signs[1] * book[7][perm[1]]) and np.array_equal(v[0], v[2])
    assert not np.array_equal(v[0], v[1])
    u = np.random.default_rng(0).standard_normal((3, 2, dim))
    every = np.arange(n)
    full = np.stack([pc.candidates(key, np.full(n, nonce, np.uint64), every, dim, n) for nonce in nonces])
    assert np.allclose(pc.scores(key, nonces, u, n), np.einsum("ncd,nhd->nhc", full, u), atol=1e-12)


def test_below_the_shared_dimension_candidates_are_fresh_per_nonce():
    v = pc.candidates(3, np.array([1, 2], dtype=np.uint64), np.array([0, 0]), pc.SHARED_MIN_DIM - 1, 32)
    assert not pc.shared(pc.SHARED_MIN_DIM - 1) and pc.shared(pc.SHARED_MIN_DIM)
    assert np.array_equal(v, pc.candidate_vectors(3, np.array([1, 2], dtype=np.uint64), np.array([0, 0]), 15))


def _round_bias(dim: int, eps: float, u: np.ndarray, transforms: int, signs_only: bool = False) -> tuple[float, float]:
    """E[V_J | u] / c for one round's codebook, exactly over the device's coins
    (cap coin and picks) and averaged over ``transforms`` nonces: (component
    along u minus 1, norm of the orthogonal part)."""
    p = PrivUnitParams.calibrate(dim, eps)
    n, k, q = p.candidates, p.cap, p.cap_probability
    alpha, beta = q / k - (1 - q) / (n - k), (1 - q) / (n - k)
    key = 424242
    book = pc.codebook(key, n, dim)
    nonces = np.random.default_rng(dim).integers(0, 2**63, size=transforms, dtype=np.uint64)
    perm, signs = pc.nonce_transform(key, nonces, dim)
    if signs_only:
        perm = np.broadcast_to(np.arange(dim), perm.shape).copy()
    w = np.empty((transforms, dim))
    np.put_along_axis(w, perm, signs * u, axis=1)
    mask = cap_mask(w @ book.T, k)
    m = alpha * (mask.astype(float) @ book) + beta * book.sum(axis=0)  # E over the coins, codebook coordinates
    f = (signs * np.take_along_axis(m, perm, axis=1)).mean(axis=0) / p.scale
    along = float(f @ u)
    return along - 1.0, float(np.linalg.norm(f - along * u))


@pytest.mark.parametrize("dim", [16, 100])
def test_one_rounds_shared_codebook_is_unbiased_within_one_percent(dim):
    u = np.random.default_rng(1).standard_normal(dim)
    for direction in (np.eye(dim)[0], u / np.linalg.norm(u)):
        along, orth = _round_bias(dim, 1.0, direction, 20_000)
        assert abs(along) < 0.01 and orth < 0.015, (along, orth)


def test_the_measurement_catches_a_signs_only_transform():
    u = np.random.default_rng(1).standard_normal(100)
    along, orth = _round_bias(100, 0.5, u / np.linalg.norm(u), 20_000, signs_only=True)
    assert orth > 0.025, (along, orth)
