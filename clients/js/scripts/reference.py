"""Reference values from the Python implementation, for the TypeScript tests.

Run from the repository root with the project's venv:

    .venv/bin/python clients/js/scripts/reference.py

It writes clients/js/test/fixtures/reference.json: the public stream
(docs/protocol/public-randomness.md) for a few (seed, label) pairs, the
SplitMix64 hashes, the exact calibration integers (GRR keep numerator,
PrivUnit cap numerator) and, for a few tree-round configs, every public
object and every deterministic intermediate of the device (ball point, path,
node keys, true OLH bucket, Hadamard sign, PrivUnit candidates and cap)
that the TypeScript device must reproduce. u64 values are decimal strings;
floats are Python's repr (round-trip exact through JSON.parse).

This is a stop-gap until protocol/vectors/ exists: it fixes no device
randomness (the Python device draws it from numpy's Generator), so message
bytes are not compared here.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from shoal.common.bounds import PublicBound
from shoal.common.kinds import config_kinds
from shoal.common.kinds.tree import derive_config
from shoal.common.kinds.tree_nets import node_space
from shoal.common.kinds.tree_randomness import PublicRandomness, projection_scale
from shoal.common.mechanisms.exact_sampling import grr_keep_numerator
from shoal.common.mechanisms.hadamard import hadamard_sign
from shoal.common.mechanisms.privunit import PrivUnitParams, cap_mask
from shoal.common.mechanisms.privunit_codebook import candidates, scores
from shoal.common.randomness import public_stream as ps
from shoal.common.randomness.hashing import bucket_hash, mix64, node_keys

OUT = Path(__file__).resolve().parents[1] / "test" / "fixtures" / "reference.json"


def u64s(a: object) -> list[str]:
    return [str(int(v)) for v in np.asarray(a, dtype=np.uint64).ravel()]


def floats(a: object) -> list[float]:
    return [float(v) for v in np.asarray(a, dtype=np.float64).ravel()]


def stream_cases() -> list[dict[str, object]]:
    out = []
    for seed, label in ((1, "ab"), (0, ""), (7, "shoal/v1/tree/node-keys"), ((1 << 63) - 1, "shoal/v1/tree/projection"),
                        (123456789, "ünïcødé/λ")):
        out.append({
            "seed": str(seed), "label": label,
            "encoded": ps.encode(seed, label).hex(),
            "bytes": ps.stream_bytes(seed, label, 200).hex(),
            "words": u64s(ps.words(seed, label, 25)),
            "uniforms": floats(ps.uniforms(seed, label, 25)),
            "signs": [int(v) for v in ps.signs(seed, label, 77)],
            "gaussians": floats(ps.gaussians(seed, label, 2001)),
            "integers": {str(b): u64s(ps.integers_below(seed, label, b, 40))
                         for b in (1, 2, 3, 10, 1000, 1 << 32, (1 << 63) + 12345, (1 << 64) - 1, 1 << 64)},
        })
    return out


def hash_cases() -> dict[str, object]:
    rng = np.random.default_rng(1)
    xs = np.concatenate([np.array([0, 1, 2**63, 2**64 - 1], dtype=np.uint64),
                         rng.integers(0, 1 << 64, size=60, dtype=np.uint64)])
    coords = rng.integers(-40, 40, size=(20, 6)).astype(np.int64)
    key = int(rng.integers(0, 1 << 64, dtype=np.uint64))
    seeds = rng.integers(0, 1 << 64, size=20, dtype=np.uint64)
    keys = rng.integers(0, 1 << 64, size=20, dtype=np.uint64)
    return {
        "x": u64s(xs), "mix64": u64s(mix64(xs)),
        "level_key": str(key), "coords": coords.tolist(), "node_keys": u64s(node_keys(key, coords)),
        "coords1": coords[:, 0].tolist(), "node_keys1": u64s(node_keys(key, coords[:, 0])),
        "seeds": u64s(seeds), "keys": u64s(keys),
        "buckets": {str(g): [int(v) for v in bucket_hash(seeds, keys, g)] for g in (2, 3, 7, 2048)},
    }


def calibration_cases() -> dict[str, object]:
    grr = []
    for eps in (0.1, 0.5, 0.8623079061508179, 1.0, 1.5, 2.0, 3.0, 4.0, 6.5, 7.6, 10.0, 30.0):
        for g in (2, 3, 4, 8, 55, 2048):
            grr.append({"epsilon": eps, "buckets": g, "keep": grr_keep_numerator(eps, g)})
    cap = []
    for dim, eps in ((2, 0.5), (5, 3.0), (5, 4.0), (20, 2.5869237184524536), (20, 3.4492316246032715), (100, 1.0),
                     (100, 6.0), (10, 8.0)):
        p = PrivUnitParams.calibrate(dim, eps)
        cap.append({"epsilon": eps, "candidates": p.candidates, "cap": p.cap, "numerator": p.cap_numerator})
    return {"grr": grr, "cap": cap}


def amplification_cases() -> list[dict[str, object]]:
    from shoal.common.errors import PrivacyError
    from shoal.common.privacy.accounting import (
        closed_form_epsilon,
        max_local_epsilon,
        numerical_delta,
    )

    out = []
    for n in (2, 10, 1000, 2000, 100000, 1000000):
        for eps0 in (0.5, 1.0, 2.0, 3.301539897918701, 4.0, 6.0, 8.0):
            for eps in (0.1, 0.5, 1.0, 2.0):
                try:
                    cf = closed_form_epsilon(eps0, n, 1e-6)
                except PrivacyError:
                    cf = None
                out.append({"eps0": eps0, "n": n, "eps": eps, "delta": numerical_delta(eps0, n, eps),
                            "closed_form_1e-6": cf})
    # eps0 at the boundary, as derive_config picks it
    for n, eps, delta in ((2000, 1.0, 1e-6), (1000, 2.0, 1e-6), (100000, 0.5, 1e-8)):
        e0 = max_local_epsilon(eps, delta, n, "fmt21-numerical")
        out.append({"eps0": e0, "n": n, "eps": eps, "delta": numerical_delta(e0, n, eps), "closed_form_1e-6": None,
                    "boundary_delta": delta})
    return out


def tree_case(name: str, config: Any, points: np.ndarray, nonce: int) -> dict[str, object]:
    kind = config_kinds()["tree"]
    public = PublicRandomness.from_config(config)
    space = node_space(config)
    x = config.bound.to_ball(points)
    paths = space.paths(x)
    keys = [u64s(space.keys(j, paths[j])) for j in range(config.levels + 1)]
    devices = []
    cols_log2 = config.vec_columns_log2
    for i in range(points.shape[0]):
        level = 1 + i % max(config.levels, 1)
        seed_index = (37 * i + 5) % config.hist_pool
        key_l = space.keys(level, paths[level][i:i + 1]) if config.levels else np.zeros(1, dtype=np.uint64)
        true_bucket = int(bucket_hash(public.hist_seeds[seed_index:seed_index + 1], key_l, config.hist_buckets)[0])
        row = (9973 * i + 11) % (1 << cols_log2)
        column = int(key_l[0] >> np.uint64(64 - cols_log2))
        sign = float(hadamard_sign(np.array([row]), np.array([column]))[0])
        d = {"point": floats(points[i]), "ball": floats(x[i]),
             "path": [[str(v) for v in np.atleast_1d(paths[j][i])] for j in range(config.levels + 1)],
             "keys": [keys[j][i] for j in range(config.levels + 1)],
             "level": level, "seed_index": seed_index, "true_bucket": true_bucket,
             "row": row, "column": column, "sign": sign}
        devices.append(d)
    # PrivUnit on the vec params (or the root params): the candidates of one nonce and the cap of one direction.
    params = config.vec_params or config.root_params
    u = x[0] / max(np.linalg.norm(x[0]), 1e-300)
    every = np.arange(params.candidates, dtype=np.int64)
    nonces = np.full(params.candidates, nonce, dtype=np.uint64)
    cand = candidates(public.vec_key, nonces, every, params.dim, params.candidates)
    mask = cap_mask(scores(public.vec_key, nonces[:1], u[None, None, :], params.candidates)[0], params.cap)[0]
    return {
        "name": name,
        "config_text": json.dumps(kind.dump(config)),
        "projection_scale": projection_scale(config.proj_dim),
        "public": {
            "projection": floats(public.projection) if public.projection is not None else None,
            "shifts": floats(public.shifts), "planes": floats(public.planes),
            "level_keys": u64s(public.level_keys), "hist_seeds": u64s(public.hist_seeds),
            "vec_key": str(public.vec_key),
        },
        "keep_numerator": config.hist_params.keep_numerator if config.hist_params else None,
        "vec_numerator": config.vec_params.cap_numerator if config.vec_params else None,
        "root_numerator": config.root_params.cap_numerator if config.root_params else None,
        "root_column": int(space.keys(0, space.root())[0] >> np.uint64(64 - cols_log2)),
        "devices": devices,
        "privunit": {"params": "vec" if config.vec_params else "root", "nonce": str(nonce), "u": floats(u),
                     "candidates_head": [floats(c) for c in cand[:8]], "candidates_last": floats(cand[-1]),
                     "cap": [int(i) for i in np.flatnonzero(mask)]},
    }


def tree_cases() -> list[dict[str, object]]:
    rng = np.random.default_rng(2)
    out = []
    c = derive_config(10000, 5, 3, 4.0, encoder="nettree", seed=7)
    out.append(tree_case("nettree-identity", c, rng.normal(size=(12, 5)) * 0.6, 0x0123456789ABCDEF))
    c = derive_config(100000, 30, 8, 4.0, encoder="nettree", seed=2**62 + 99, bound=PublicBound(radius=3.0))
    out.append(tree_case("nettree-projected", c, rng.normal(size=(12, 30)), 2**64 - 5))
    c = derive_config(10000, 20, 3, 2.0, encoder="lsh", seed=11, model="shuffle", delta=1e-6, min_batch=1000)
    out.append(tree_case("lsh-shuffle", c, rng.normal(size=(12, 20)) * 0.3, 42))
    box = PublicBound(low=tuple([0.0] * 7), high=tuple([100.0] * 6 + [10.0]))
    c = derive_config(50000, 7, 4, 6.0, encoder="lsh", seed=3, bound=box)
    out.append(tree_case("lsh-box", c, rng.uniform(-10, 110, size=(12, 7)), 7))
    c = derive_config(50000, 3, 4, 3.0, encoder="nettree", seed=5, bound=box.__class__(low=(0.0, 0.0, 0.0),
                                                                                   high=(1.0, 2.0, 4.0)))
    out.append(tree_case("nettree-box-lattice-only", c, rng.uniform(-0.5, 4.5, size=(12, 3)), 8))
    return out


def main() -> None:
    data = {
        "about": "generated by clients/js/scripts/reference.py from the Python implementation; do not edit",
        "protocol": ps.PROTOCOL_VERSION,
        "two_pi": 2 * math.pi,
        "stream": stream_cases(),
        "hash": hash_cases(),
        "calibration": calibration_cases(),
        "tree": tree_cases(),
        "amplification": amplification_cases(),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n")
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
