"""The central pipeline's objective per cell, as the default rule runs it (issue 41, Build 2).

``central_kmeans`` on the points in the unit ball with ``derive_central("auto", ...)`` (or a
fixed ``--steps``), mean k-means cost / n over seeds 0..S-1 (generated sets redrawn per seed;
Uber and letter are one file), ``rng = default_rng(seed + 100)``. For a before/after, run it
once with the other checkout first on PYTHONPATH (a folder holding a ``shoal`` symlink to it),
as ``compare_versions.py`` does. Results: tests/bench/results/central_lift.md.

    python tests/bench/central_steps.py --sets overlap,letter --eps 0.5,1,4 --seeds 5 --data-dir ../shared/data
"""

from __future__ import annotations

import argparse
import os
import platform
from pathlib import Path

import numpy as np

from shoal.common.kinds.central import derive_central
from shoal.deploy.simulation.datasets import (
    balcan_mixture,
    load_letter,
    load_uber,
    overlapping_mixture,
    paper_mixture,
)
from shoal.server.decoders.central.pipeline import central_kmeans
from shoal.server.decoders.kmeans import kmeans_cost


def _data(name: str, seed: int, data_dir: Path) -> tuple[np.ndarray, int]:
    if name == "overlap":
        ds = overlapping_mixture(seed=seed)
    elif name == "uber":
        ds = load_uber(data_dir)
    elif name == "letter":
        ds = load_letter(data_dir)
    elif name == "balcan":
        ds = balcan_mixture(50_000, seed=seed)
    elif name.startswith("paper"):  # paper1e4, paper1e5: the paper generator at that n
        ds = paper_mixture(int(float(name[5:])), seed=seed)
    else:
        raise SystemExit(f"unknown set {name!r}")
    return ds.bound.to_ball(ds.points), ds.k


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default="overlap,letter,uber")
    ap.add_argument("--eps", default="0.5,1,4")
    ap.add_argument("--steps", default="d", help="lift steps per run, comma-separated; d: the default rule")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    args = ap.parse_args()
    epss = [float(e) for e in args.eps.split(",")]
    steps = [None if t == "d" else int(t) for t in args.steps.split(",")]
    print(f"# central_steps: delta 1e-6, seeds 0..{args.seeds - 1}, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, numpy {np.__version__}")
    out: dict[tuple[str, float, int | None, int], list[float]] = {}
    shape: dict[str, tuple[int, ...]] = {}
    for name in args.sets.split(","):
        for seed in range(args.seeds):
            x, k = _data(name, seed, args.data_dir)
            shape[name] = (x.shape[0], x.shape[1], k)
            for eps in epss:
                for t in steps:
                    spec = derive_central("auto", x.shape[0], x.shape[1], k, eps, 1e-6, seed=seed, lift_steps=t)
                    c = central_kmeans(x, spec, np.random.default_rng(seed + 100)).centers
                    out.setdefault((name, eps, t, spec.lift_steps), []).append(kmeans_cost(x, c) / x.shape[0])
    for (name, eps, t, taken), v in out.items():
        print(f"{name:9s} (n, d, k)={shape[name]} eps {eps:4} steps {t or 'default'} ({taken}) mean {np.mean(v):.5g} min {np.min(v):.5g} "
              f"max {np.max(v):.5g} | {' '.join(f'{u:.4g}' for u in v)}", flush=True)


if __name__ == "__main__":
    main()
