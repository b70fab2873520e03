"""Bit-level DP audits: an attacker who holds the exact wire values, replays
the device's sampler and public randomness for each candidate input, and
bins what it finds (issue 12, Build 2). Each audit compares the two
candidates' bin counts over >= 10^5 messages per input: the simultaneous 95%
lower bound on the log likelihood ratio must stay <= the claimed eps.
The same attacks against shoal 0.1's floating-point samplers
(``legacy_samplers.py``) must exceed it: the audits have teeth."""

import copy
import dataclasses
import math

import numpy as np
import pytest
from dp_audit import joint_counts, simultaneous_lower_bound
from legacy_samplers import (
    LegacyPrivUnit,
    laplace_reachable,
    legacy_laplace,
    privunit_reachable_from_axis,
)

from shoal.client.encoder import encode_arrays
from shoal.client.kinds.local_refine import codebook_messages
from shoal.common.bounds import PublicBound
from shoal.common.kinds.local_refine import block_vectors, derive_local_refine
from shoal.common.kinds.tree import derive_config
from shoal.common.kinds.tree_nets import node_space
from shoal.common.kinds.tree_randomness import PublicRandomness
from shoal.common.mechanisms.hadamard import hadamard_sign
from shoal.common.mechanisms.privunit import PrivUnitParams, cap_members, round_to_sphere, select
from shoal.common.mechanisms.sketch import SketchParams, record_features, scramble
from shoal.common.randomness.hashing import bucket_hash

SAMPLES = 100_000
EPS = (1.0, 4.0, 8.0)
KEY = 0x5EED


def _unit(d, axis=0, sign=1.0):
    e = np.zeros(d)
    e[axis] = sign
    return e


# -- codebook PrivUnit alone ------------------------------------------------------------------

def _privunit_codes(x, hypotheses, params, seed):
    """Messages for input x; each one's code says, for every hypothesis h, whether
    its index is in the cap of +h and of -h (the device rounds h to +-h/|h|)."""
    rng = np.random.default_rng(seed)
    nonces, index = select(np.repeat(x[None, :], SAMPLES, axis=0), params, KEY, rng)
    dirs = []
    for h in hypotheses:
        u = round_to_sphere(h[None, :], np.random.default_rng(0))[0] if np.linalg.norm(h) == 0 else h / np.linalg.norm(h)
        dirs += [u, -u]
    member = cap_members(nonces, index, np.broadcast_to(np.array(dirs), (SAMPLES, len(dirs), x.size)), params, KEY)
    return member.astype(np.int64) @ (1 << np.arange(len(dirs)))


PAIRS = {
    "axis e1 vs e2": (_unit(6, 0), _unit(6, 1)),
    "axis e1 vs -e1": (_unit(6, 0), _unit(6, 0, -1.0)),
    "ball center vs e1": (np.zeros(6), _unit(6, 0)),
    "records 1e-6 apart": (np.full(6, 0.3), np.full(6, 0.3) + 1e-6),
}


@pytest.mark.parametrize("eps", EPS)
@pytest.mark.parametrize("pair", list(PAIRS))
def test_vec_report_is_eps_ldp_on_the_wire(eps, pair):
    x1, x2 = PAIRS[pair]
    params = PrivUnitParams.calibrate(6, eps, candidates=32)
    c1, c2 = joint_counts(_privunit_codes(x1, (x1, x2), params, 1), _privunit_codes(x2, (x1, x2), params, 2))
    assert simultaneous_lower_bound(c1, c2) <= eps


@pytest.mark.parametrize("eps", EPS)
@pytest.mark.parametrize("dim", [16, 100])
@pytest.mark.parametrize("pair", ["axis e1 vs e2", "axis e1 vs -e1", "records 1e-6 apart"])
def test_shared_codebook_vec_report_is_eps_ldp_on_the_wire(eps, dim, pair):
    """From d = 16 the candidates are the round's codebook under a per-nonce
    signed permutation (``privunit_codebook``): the same replay, the same bound."""
    x1, x2 = {"axis e1 vs e2": (_unit(dim, 0), _unit(dim, 1)),
              "axis e1 vs -e1": (_unit(dim, 0), _unit(dim, 0, -1.0)),
              "records 1e-6 apart": (np.full(dim, 0.2), np.full(dim, 0.2) + 1e-6)}[pair]
    params = PrivUnitParams.calibrate(dim, eps, candidates=32)
    c1, c2 = joint_counts(_privunit_codes(x1, (x1, x2), params, 1), _privunit_codes(x2, (x1, x2), params, 2))
    assert simultaneous_lower_bound(c1, c2) <= eps


def test_the_shared_codebook_audit_catches_a_device_that_overspends():
    """The same replay against a device whose cap coin is calibrated at eps 3
    while eps 1 is claimed: the lower bound exceeds the claim."""
    x1, x2 = _unit(16, 0), _unit(16, 1)
    params = PrivUnitParams.calibrate(16, 3.0, candidates=32)
    c1, c2 = joint_counts(_privunit_codes(x1, (x1, x2), params, 1), _privunit_codes(x2, (x1, x2), params, 2))
    assert simultaneous_lower_bound(c1, c2) > 1.0


@pytest.mark.parametrize("eps", EPS)
def test_the_wire_audit_catches_floating_point_privunit(eps):
    """shoal 0.1's PrivUnit at vector eps on axis inputs e1 vs e2: the replay of
    q on the 2^-53 grid separates them beyond eps."""
    mech = LegacyPrivUnit.calibrate(10, eps)
    rng = np.random.default_rng(3)
    codes = []
    for axis in (0, 1):
        z0 = mech.privatise(np.repeat(_unit(10, axis)[None, :], SAMPLES, axis=0), rng)[:, 0]
        tail = np.digitize(z0 * mech.scale, [-0.5, 0.0, mech.gamma, (1 + mech.gamma) / 2, 0.9])
        codes.append(tail * 2 + privunit_reachable_from_axis(z0, mech))
    c1, c2 = joint_counts(*codes)
    assert simultaneous_lower_bound(c1, c2) > eps


# -- whole tree messages (OLH + codebook PrivUnit) ----------------------------------------------

def _message_codes(batch, cfg, points):
    """Replay for each candidate raw point h (h-th 4 bits of the code): did the
    histogram report keep its bucket, and is the vector index in the cap of
    +-(Hadamard sign x direction)? Bit 4 h + 3: a root device. Every
    hypothesis' caps in one pass over the messages' candidates. With
    hist_only_share > 0 a tree message carries one report: bit 4 len(points)
    says which (the choice is public, data independent, and part of what
    the attacker sees)."""
    space = node_space(cfg)
    public = PublicRandomness.from_config(cfg)
    root = batch.vec_level == 0  # a root device: its root report alone, at the full epsilon
    has_h, has_v = batch.hist_level >= 1, batch.vec_level >= 1
    code = np.zeros(len(batch), dtype=np.int64)
    dirs = []
    for h, point in enumerate(points):
        x = cfg.bound.to_ball(point[None, :])
        paths = space.paths(x)
        keys = np.array([space.keys(j, paths[j])[0] for j in range(cfg.levels + 1)], dtype=np.uint64)
        hit = bucket_hash(public.hist_seeds[batch.hist_seed], keys[np.maximum(batch.hist_level, 0)], cfg.hist_params.buckets)
        code += (has_h & (batch.hist_bucket == hit)).astype(np.int64) << (4 * h)
        cols = (keys[np.maximum(batch.vec_level, 0)] >> np.uint64(64 - cfg.vec_columns_log2)).astype(np.int64)
        sign = hadamard_sign(batch.vec_row, cols)
        norm = np.linalg.norm(x)
        u = x[0] / norm if norm > 0 else _unit(cfg.dim)
        dirs += [sign[:, None] * u[None, :], -sign[:, None] * u[None, :]]
    dirs = np.stack(dirs, axis=1)
    member = np.zeros((len(batch), dirs.shape[1]), dtype=np.int64)
    for sel, params in ((root, cfg.root_params), (has_v, cfg.vec_params)):
        member[sel] = cap_members(batch.vec_nonce[sel], batch.vec_index[sel], dirs[sel], params, public.vec_key)
    for h in range(len(points)):
        code += (2 * member[:, 2 * h] + 4 * member[:, 2 * h + 1] + 8 * root) << (4 * h)
    return code + ((~root & ~has_v).astype(np.int64) << (4 * len(points)))


BOX = PublicBound(low=(-1.0,) * 4, high=(1.0,) * 4)
MESSAGE_PAIRS = {
    "box midpoint vs corner": (np.zeros(4), np.array([0.9, -0.9, 0.9, -0.9])),
    "axis-aligned": (np.array([0.8, 0, 0, 0]), np.array([0, 0.8, 0, 0])),
    "clipped from far outside": (np.array([1e308, 0, 0, 0]), np.array([-1e308, 0, 0, 0])),
    "records 1e-6 apart": (np.full(4, 0.2), np.full(4, 0.2) + 1e-6),
}


# Each tree device sends both reports (eps / 2 each: shuffle rounds) or one of them at the whole eps
# (hist_only_share: local rounds, issue 41).
SPLITS = {"both reports": dict(vec_share=0.5), "one report": dict(hist_only_share=0.5)}


@pytest.mark.parametrize("encoder", ["lsh", "nettree"])
@pytest.mark.parametrize("eps", EPS)
@pytest.mark.parametrize("pair", list(MESSAGE_PAIRS))
@pytest.mark.parametrize("split", list(SPLITS))
def test_tree_message_is_eps_ldp_on_the_wire(encoder, eps, pair, split):
    p1, p2 = MESSAGE_PAIRS[pair]
    cfg = derive_config(100_000, 4, 4, eps, encoder=encoder, bound=BOX, seed=5, levels=3,
                        vec_candidates=32, root_candidates=32, root_share=0.3, **SPLITS[split])
    assert (cfg.hist_only_share > 0) == (split == "one report")
    codes = []
    for i, p in enumerate((p1, p2)):
        batch = encode_arrays(np.repeat(p[None, :], SAMPLES, axis=0), cfg, np.random.default_rng(10 + i))
        codes.append(_message_codes(batch, cfg, (p1, p2)))
    c1, c2 = joint_counts(*codes)
    assert cfg.device_epsilon <= eps
    assert simultaneous_lower_bound(c1, c2) <= eps


def test_the_wire_audit_catches_a_one_report_device_that_sends_both_reports():
    """A tree device of a hist_only_share round that sent both of its reports, each at the whole eps,
    would spend 2 eps: the audit of the one-report round must see it (measured 1.60 against eps 1)."""
    p1, p2 = MESSAGE_PAIRS["axis-aligned"]
    cfg = derive_config(100_000, 4, 4, 1.0, encoder="lsh", bound=BOX, seed=5, levels=3,
                        vec_candidates=32, root_candidates=32, root_share=0.3, hist_only_share=0.5)
    both = copy.copy(cfg)
    object.__setattr__(both, "hist_only_share", 0.0)  # past validation: what a broken device would do
    codes = [_message_codes(encode_arrays(np.repeat(p[None, :], SAMPLES, axis=0), both, np.random.default_rng(10 + i)),
                            cfg, (p1, p2)) for i, p in enumerate((p1, p2))]
    assert simultaneous_lower_bound(*joint_counts(*codes)) > cfg.device_epsilon


# -- local refine reports ---------------------------------------------------------------------

def _local_refine_codes(x, hypotheses, cfg, seed):
    """Wire messages of a local refine round for input x (the device's own code
    path), coded by cap membership of each hypothesis' block vector, +-."""
    msgs = codebook_messages(np.repeat(x[None, :], SAMPLES, axis=0), cfg, np.random.default_rng(seed))
    nonces = np.array([int(m.nonce, 16) for m in msgs], dtype=np.uint64)
    index = np.array([m.index for m in msgs], dtype=np.int64)
    blocks = block_vectors(np.array(hypotheses), cfg)
    u = blocks / np.linalg.norm(blocks, axis=1, keepdims=True)
    dirs = np.concatenate([u, -u])
    member = cap_members(nonces, index, np.broadcast_to(dirs, (SAMPLES,) + dirs.shape), cfg.privunit, cfg.codebook_key)
    return member.astype(np.int64) @ (1 << np.arange(dirs.shape[0]))


REFINE_PAIRS = {
    "nearest to different centers": (np.array([0.9, 0.1]), np.array([-0.9, -0.1])),
    "1e-7 either side of the Voronoi boundary": (np.array([-1e-7, 0.3]), np.array([1e-7, 0.3])),
    "a center vs the ball's edge in its cell": (np.array([0.5, 0.0]), np.array([0.0, 1.0])),
}


@pytest.mark.parametrize("eps", EPS)
@pytest.mark.parametrize("pair", list(REFINE_PAIRS))
def test_local_refine_report_is_eps_ldp_on_the_wire(eps, pair):
    x1, x2 = REFINE_PAIRS[pair]
    cfg = derive_local_refine("parent", np.array([[0.5, 0.0], [-0.5, 0.0]]), PublicBound(radius=1.0), eps, seed=9)
    cfg = dataclasses.replace(cfg, privunit=PrivUnitParams.calibrate(cfg.privunit.dim, eps, candidates=32))
    c1, c2 = joint_counts(_local_refine_codes(x1, (x1, x2), cfg, 1), _local_refine_codes(x2, (x1, x2), cfg, 2))
    assert simultaneous_lower_bound(c1, c2) <= eps


# -- sketch noise -----------------------------------------------------------------------------

def _sketch_params(eps, m=8):
    return SketchParams(dim=2, size=m, measurements=m, epsilon=eps, seed=3, scale_low=0.05, scale_high=1.0)


SKETCH_PAIRS = {
    "records 1e-6 apart": (np.array([0.3, 0.1]), np.array([0.3, 0.1 + 1e-6])),
    "axis-aligned": (np.array([0.9, 0.0]), np.array([0.0, 0.9])),
    "ball center vs boundary": (np.zeros(2), np.array([0.6, 0.8])),
}


@pytest.mark.parametrize("eps", EPS)
@pytest.mark.parametrize("pair", list(SKETCH_PAIRS))
def test_sketch_report_is_eps_ldp_on_the_wire(eps, pair):
    """Exact sketch noise: the replay finds every output on the grid from either
    record, and the integer residuals' extreme statistics stay within eps."""
    p = _sketch_params(eps)
    from shoal.common.mechanisms.sketch import frequencies

    omega = frequencies(p)
    noise = p.noise_grid(1)
    codes = []
    for i, rec in enumerate(SKETCH_PAIRS[pair]):
        s = scramble(np.repeat(rec[None, :], SAMPLES, axis=0), np.ones(SAMPLES, dtype=np.int64), p, omega,
                     np.random.default_rng(20 + i))
        reals = np.concatenate([s.real, s.imag], axis=1)
        units = np.ldexp(reals, -noise.exponent)
        code = np.zeros(SAMPLES, dtype=np.int64)
        for cand in SKETCH_PAIRS[pair]:
            centre = np.rint(np.ldexp(record_features(cand[None, :], omega), -noise.exponent))
            resid = (units - centre) / (noise.scale_num / noise.scale_den)  # in noise scales
            on_grid = np.all(units == np.rint(units), axis=1)
            stat = np.digitize(resid.max(axis=1), [-1, 0, 1, 2, 3])
            code = code * 12 + on_grid * 6 + stat
        codes.append(code)
    c1, c2 = joint_counts(*codes)
    assert simultaneous_lower_bound(c1, c2) <= eps


@pytest.mark.parametrize("eps", EPS)
def test_the_wire_audit_catches_floating_point_sketch_noise(eps):
    """shoal 0.1's sketch noise, records 1e-6 apart: replaying numpy's Laplace
    from the true record reproduces every coordinate, from the other rarely
    (each coordinate is reproduced by chance about 86% of the time, so 2m = 64)."""
    p = _sketch_params(eps, m=32)
    from shoal.common.mechanisms.sketch import frequencies

    omega = frequencies(p)
    b = float(p.laplace_scale(1))
    r1, r2 = SKETCH_PAIRS["records 1e-6 apart"]
    loc1, loc2 = record_features(r1[None, :], omega)[0], record_features(r2[None, :], omega)[0]
    rng = np.random.default_rng(6)
    codes = []
    for loc in (loc1, loc2):
        out = legacy_laplace(np.repeat(loc[None, :], SAMPLES, axis=0), b, rng)
        codes.append(np.all(laplace_reachable(out, loc1[None, :], b), axis=1).astype(np.int64)
                     + 2 * np.all(laplace_reachable(out, loc2[None, :], b), axis=1))
    c1, c2 = joint_counts(*codes)
    assert simultaneous_lower_bound(c1, c2) > eps


def test_sketch_values_are_exact_doubles_on_the_grid():
    p = _sketch_params(1.0)
    from shoal.common.mechanisms.sketch import frequencies

    s = scramble(np.array([[0.1, 0.2]]), np.array([1]), p, frequencies(p), np.random.default_rng(0))
    units = np.ldexp(np.concatenate([s.real, s.imag], axis=1), -p.noise_grid(1).exponent)
    assert np.array_equal(units, np.rint(units)) and np.all(np.abs(units) < 2**53)
    assert math.isclose(p.noise_grid(1).epsilon, 1.0, rel_tol=1e-6) and p.noise_grid(1).epsilon <= 1.0
