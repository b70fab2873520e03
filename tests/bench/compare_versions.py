"""Accuracy of two versions of shoal on the same cells, in one run (issue 12:
exact samplers must cost at most 5%).

Each version is a folder laid out like this repository; the script builds a
``shoal`` package of symlinks for each and runs every cell in a fresh
interpreter with that package first on ``PYTHONPATH``, alternating the
versions cell by cell. Usage (the "before" tree from ``git worktree add``):

    python tests/bench/compare_versions.py --before /tmp/before --after . \\
        --data-dir ../shared/data --seeds 3 --out tests/bench/results/exact_samplers.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TREE_CELLS = [
    {"kind": "tree", "data": "paper", "n": 1_000_000, "k": 8, "encoder": enc, "eps": eps}
    for enc in ("lsh", "nettree") for eps in (1.0, 4.0, 8.0)
] + [{"kind": "tree", "data": "uber", "k": 10, "encoder": enc, "eps": eps}
     for enc in ("lsh", "nettree") for eps in (1.0, 4.0, 8.0)] + [
    {"kind": "tree", "data": "letter", "k": 26, "encoder": enc, "eps": eps}
    for enc in ("lsh", "nettree") for eps in (1.0, 4.0, 8.0)]
SKETCH_CELLS = [{"kind": "sketch", "data": "schellekens", "n": 1_000_000, "k": 10, "devices": 100, "eps": 1.0},
                {"kind": "sketch", "data": "schellekens", "n": 1_000_000, "k": 10, "devices": 1, "eps": 1.0}]


def _cell(spec: dict, seed: int, data_dir: str) -> dict:
    """Run one cell with whichever ``shoal`` is importable; returns its objective."""
    import numpy as np

    from shoal.server.decoders.kmeans import kmeans_cost

    if spec["kind"] == "tree":
        from shoal.deploy.simulation.datasets import load_letter, load_uber, paper_mixture
        from shoal.deploy.simulation.simulate import simulate

        ds = (paper_mixture(spec["n"], seed=0) if spec["data"] == "paper" else
              load_letter(Path(data_dir)) if spec["data"] == "letter" else load_uber(Path(data_dir)))
        t = time.perf_counter()
        import inspect

        # ``reference`` (skip the non-private k-means) is newer than some trees compared here
        extra = {"reference": False} if "reference" in inspect.signature(simulate).parameters else {}
        out = simulate(ds.points, spec["k"], spec["eps"], encoder=spec["encoder"], bound=ds.bound, seed=seed, **extra)
        return {"objective": out["normalized_objective"], "trivial": out["trivial_objective"],
                "seconds": time.perf_counter() - t}
    from shoal.common.mechanisms.sketch import (
        SketchParams,
        default_scales,
        estimated_snr,
        frequencies,
        noise_variance,
    )
    from shoal.deploy.bench.sketch import _local_sketch, schellekens_mixture
    from shoal.server.decoders.sketch.clompr import clompr

    ds = schellekens_mixture(spec["n"], k=spec["k"], seed=0)
    xb = ds.bound.to_ball(ds.points)
    d, k = xb.shape[1], spec["k"]
    lo, hi = default_scales(d, k)
    p = SketchParams(dim=d, size=10 * k * d, measurements=10 * k * d, epsilon=spec["eps"], seed=seed,
                     scale_low=lo, scale_high=hi)
    omega = frequencies(p)
    t = time.perf_counter()
    z, n0 = _local_sketch(xb, spec["devices"], p, omega, np.random.default_rng(seed + 100))
    snr = estimated_snr(z, p, n0)
    res = clompr(z, omega, k, restarts=2, seed=seed, noise_variance=noise_variance(p, n0, 0.35))
    centers = res.centroids
    return {"objective": kmeans_cost(xb, np.asarray(centers)) / xb.shape[0], "snr": snr,
            "seconds": time.perf_counter() - t}


def _package(tree: Path, root: Path) -> Path:
    """A ``shoal`` namespace package of symlinks to ``tree``'s folders. ``deploy``
    is linked too: the cells import ``shoal.deploy``, which would otherwise
    resolve through the editable install to this checkout's own deploy/
    (another version than the tree's common/)."""
    pkg = root / "shoal"
    pkg.mkdir(parents=True, exist_ok=True)
    for name in ("common", "client", "server", "shuffler", "deploy"):
        link = pkg / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(tree.resolve() / name)
    return root


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=Path, required=True)
    ap.add_argument("--after", type=Path, required=True)
    ap.add_argument("--data-dir", default="../shared/data")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--only", default="", help="comma-separated kinds: tree,sketch")
    ap.add_argument("--match", default="", help="only cells whose label contains this text")
    ap.add_argument("--seed-start", type=int, default=0, help="first seed (to add seeds to an earlier run)")
    ap.add_argument("--json", type=Path, default=None, help="also write per-seed objectives here")
    ap.add_argument("--paper-n", type=int, default=None, help="n of the paper-generator cells (default 1e6)")
    ap.add_argument("--title", default="Exact samplers: accuracy before and after (issue 12)")
    ap.add_argument("--cell", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.cell:
        spec, seed = json.loads(args.cell)
        print(json.dumps(_cell(spec, seed, args.data_dir)))
        return 0
    cells = TREE_CELLS + SKETCH_CELLS
    if args.paper_n is not None:
        cells = [dict(c, n=args.paper_n) if c.get("data") == "paper" else c for c in cells]
    if args.only:
        cells = [c for c in cells if c["kind"] in args.only.split(",")]
    cells = [c for c in cells if args.match in " ".join(f"{k}={v}" for k, v in c.items() if k != "kind")]
    seeds = range(args.seed_start, args.seed_start + args.seeds)
    per_seed = []
    tmp = Path(tempfile.mkdtemp(prefix="shoal-compare-"))
    roots = {v: _package(getattr(args, v), tmp / v) for v in ("before", "after")}
    rows = []
    for spec in cells:
        res: dict[str, list[float]] = {"before": [], "after": []}
        for seed in seeds:
            for version in ("before", "after"):
                env = dict(os.environ, PYTHONPATH=str(roots[version]))
                out = subprocess.run([sys.executable, __file__, "--before", ".", "--after", ".",
                                      "--data-dir", args.data_dir, "--cell", json.dumps([spec, seed])],
                                     env=env, capture_output=True, text=True, check=True)
                res[version].append(json.loads(out.stdout.strip().splitlines()[-1])["objective"])
        b, a = sum(res["before"]) / args.seeds, sum(res["after"]) / args.seeds
        label = " ".join(f"{k}={v}" for k, v in spec.items() if k != "kind")
        per_seed.append({"kind": spec["kind"], "cell": label, "seeds": list(seeds), **res})
        if args.json:
            args.json.write_text(json.dumps(per_seed, indent=1))
        rows.append((spec["kind"], label, b, a, a / b))
        print(f"{spec['kind']:6s} {label:60s} before {b:.5g} after {a:.5g} ratio {a / b:.3f}", flush=True)
    lines = [
        f"# {args.title}",
        "",
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}; seeds per cell: {args.seeds} (mean of the k-means objective on the "
        "unit-ball points); before = floating-point PrivUnit and Laplace, after = codebook PrivUnit and exact "
        "discrete Laplace (issue 12; other runs: see the title). Command: `python tests/bench/compare_versions.py "
        f"--before <tree> --after . --seeds {args.seeds}"
        f"{'' if args.paper_n is None else f' --paper-n {args.paper_n}'}{' --only ' + args.only if args.only else ''}`",
        "",
        "| kind | cell | before | after | after / before |",
        "|---|---|---|---|---|",
    ] + [f"| {k} | {label} | {b:.5g} | {a:.5g} | {r:.3f} |" for k, label, b, a, r in rows]
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
