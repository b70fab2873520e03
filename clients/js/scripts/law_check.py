"""Do TypeScript and Python tree devices send messages of the same law? (issue 40, item 3)

    .venv/bin/python clients/js/scripts/law_check.py [--samples 100000]   # after `npm run audit` built the generator

For the browser round's local config (k = 3, d = 2, eps 8, nettree, radius 10,
n_expected 1,000) and a few points, N messages from the TypeScript device under
Node (scripts/audit-generate.ts) and N from the Python device (encode_arrays)
are coded by what a decoder uses: the report's levels, whether the histogram
report kept the point's bucket, and whether the vector index is in the cap of
+-(sign x direction). A chi-square two-sample test per point: p-values spread
over (0, 1) mean the two devices are indistinguishable at N messages; a broken
encoder gives p ~ 0. Prints one line per point.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests"))
spec = importlib.util.spec_from_file_location("bit_level", ROOT / "tests/common/mechanisms/test_bit_level_audits.py")
bit_level = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
spec.loader.exec_module(bit_level)  # type: ignore[union-attr]

import numpy as np  # noqa: E402
from scipy.stats import chi2_contingency  # noqa: E402

from shoal.client.encoder import encode_arrays  # noqa: E402
from shoal.common.bounds import PublicBound  # noqa: E402
from shoal.common.kinds import config_kinds  # noqa: E402
from shoal.common.kinds.tree import derive_config  # noqa: E402
from shoal.common.kinds.tree_nets import node_space  # noqa: E402
from shoal.common.kinds.tree_randomness import PublicRandomness  # noqa: E402
from shoal.common.mechanisms.hadamard import hadamard_sign  # noqa: E402
from shoal.common.mechanisms.privunit import cap_members  # noqa: E402
from shoal.common.randomness.hashing import bucket_hash  # noqa: E402
from shoal.common.wire.binary import decode_reports  # noqa: E402


def _kept_and_caps(batch, cfg, point):
    """tests/common/mechanisms/test_bit_level_audits.py's _message_codes, for configs without vector reports too."""
    x = cfg.bound.to_ball(point[None, :])
    space = node_space(cfg)
    public = PublicRandomness.from_config(cfg)
    paths = space.paths(x)
    keys = np.array([space.keys(j, paths[j])[0] for j in range(cfg.levels + 1)], dtype=np.uint64)
    root = batch.vec_level == 0
    hit = bucket_hash(public.hist_seeds[batch.hist_seed], keys[batch.hist_level], cfg.hist_params.buckets)
    code = np.where(root, 0, batch.hist_bucket == hit).astype(np.int64)
    cols = (keys[batch.vec_level] >> np.uint64(64 - cfg.vec_columns_log2)).astype(np.int64)
    sign = hadamard_sign(batch.vec_row, cols)
    u = x[0] / np.linalg.norm(x)
    dirs = np.stack([sign[:, None] * u[None, :], -sign[:, None] * u[None, :]], axis=1)
    member = np.zeros((len(batch), 2), dtype=np.int64)
    for sel, params in ((root, cfg.root_params), (~root, cfg.vec_params)):
        if params is not None and sel.any():
            member[sel] = cap_members(batch.vec_nonce[sel], batch.vec_index[sel], dirs[sel], params, public.vec_key)
    return code + 2 * member[:, 0] + 4 * member[:, 1] + 8 * root


def _codes(batch, cfg, p):
    return (_kept_and_caps(batch, cfg, p) * 64 + batch.hist_level.astype(np.int64) * 8
            + batch.vec_level.astype(np.int64))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=100_000)
    ap.add_argument("--model", choices=("local", "shuffle"), default="local",
                    help="shuffle: the browser round's shuffle config (1,500 devices, delta 1e-6, min_batch 375)")
    args = ap.parse_args()
    if args.model == "shuffle":
        cfg = derive_config(1500, 2, 3, 8.0, encoder="nettree", bound=PublicBound(radius=10.0), seed=11,
                            model="shuffle", delta=1e-6, min_batch=375)
    else:
        cfg = derive_config(1000, 2, 3, 8.0, encoder="nettree", bound=PublicBound(radius=10.0), seed=11)
    points = [np.array([-5.0, -5.0]), np.array([5.0, 0.0]), np.array([0.0, 6.0]), np.array([0.3, -0.2])]
    with tempfile.TemporaryDirectory() as tmp:
        job = {"kind": "tree", "config": json.dumps(config_kinds()["tree"].dump(cfg)), "points": [p.tolist() for p in points],
               "samples": args.samples, "out": f"{tmp}/t"}
        subprocess.run(["node", str(ROOT / "clients/js/build/audit-generate.mjs")], input=json.dumps(job).encode(), check=True)
        for i, p in enumerate(points):
            _, ts = decode_reports(Path(f"{tmp}/t-{i}.bin").read_bytes(), cfg.round_id)
            py = encode_arrays(np.repeat(p[None, :], args.samples, axis=0), cfg, np.random.default_rng(100 + i))
            a, b = _codes(ts, cfg, p), _codes(py, cfg, p)
            cats = np.union1d(a, b)
            table = np.stack([np.searchsorted(cats, a)[:, None] == np.arange(cats.size),
                              np.searchsorted(cats, b)[:, None] == np.arange(cats.size)]).sum(axis=1)
            table = table[:, table.sum(axis=0) >= 10]  # drop categories too rare for the test
            stat, pval, dof, _ = chi2_contingency(table)
            kept = [float(np.mean(_kept_and_caps(x, cfg, p) & 1)) for x in (ts, py)]
            print(f"point {p.tolist()}: chi2 = {stat:.1f} on {dof} dof, p = {pval:.3f}; bucket kept: "
                  f"TypeScript {kept[0]:.4f}, Python {kept[1]:.4f} ({args.samples} messages each)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
