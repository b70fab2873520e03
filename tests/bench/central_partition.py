"""The central partition stage against the histogram pipeline, per cell (issue 41).

``central_kmeans`` on the points in the unit ball with ``derive_central(algorithm, ...)`` for each
of ``--algorithms``, mean k-means cost / n over seeds 0..S-1 x ``--draws`` private draws (generated
sets redrawn per seed; letter is one file), public seed 1000 s + r, ``rng = default_rng(1000 s + r)``:
every algorithm sees the same data and public seed in a cell, so the columns compare as a ratio.
Sets: overlap (n = 23,000, d = 6, k = 5), letter, balcan (n = 50,000, d = 100, k = 64) and
paper<n>d<d> (the paper generator, k = 8). Results: tests/bench/results/central_partition.md.

    python tests/bench/central_partition.py --sets overlap --seeds 10 --draws 3 --data-dir ../shared/data
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import time
from pathlib import Path

import numpy as np

from shoal.common.kinds.central import derive_central
from shoal.deploy.simulation.datasets import (
    balcan_mixture,
    load_letter,
    overlapping_mixture,
    paper_mixture,
)
from shoal.server.decoders.central.pipeline import central_kmeans
from shoal.server.decoders.kmeans import kmeans_cost


def _data(name: str, seed: int, data_dir: Path) -> tuple[np.ndarray, int]:
    paper = re.fullmatch(r"paper(\d+(?:\.\d+)?e\d+|\d+)d(\d+)", name)
    if name == "overlap":
        ds = overlapping_mixture(seed=seed)
    elif name == "letter":
        ds = load_letter(data_dir)
    elif name == "balcan":
        ds = balcan_mixture(50_000, seed=seed)
    elif paper:
        ds = paper_mixture(int(float(paper.group(1))), d=int(paper.group(2)), seed=seed)
    else:
        raise SystemExit(f"unknown set {name!r}")
    return ds.bound.to_ball(ds.points), ds.k


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default="overlap,letter")
    ap.add_argument("--algorithms", default="lsh-partition,gridhist")
    ap.add_argument("--eps", default="0.5,1,2,4")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--draws", type=int, default=1)
    ap.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    args = ap.parse_args()
    epss = [float(e) for e in args.eps.split(",")]
    algorithms = args.algorithms.split(",")
    print(f"# central_partition: delta 1e-6, seeds 0..{args.seeds - 1} x {args.draws} draws, "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, numpy {np.__version__}")
    print(f"| set | n | d | k | eps | {' | '.join(algorithms)} | {' / '.join(algorithms)} | seconds |")
    print("|---|---|---|---|---|" + "---|" * len(algorithms) + "---|---|")
    for name in args.sets.split(","):
        data = [_data(name, s, args.data_dir) for s in range(args.seeds)]
        for eps in epss:
            t = time.perf_counter()
            means = []
            for alg in algorithms:
                costs = []
                for s, (x, k) in enumerate(data):
                    for r in range(args.draws):
                        spec = derive_central(alg, len(x), x.shape[1], k, eps, 1e-6, seed=1000 * s + r)
                        fit = central_kmeans(x, spec, np.random.default_rng(1000 * s + r))
                        costs.append(kmeans_cost(x, fit.centers) / len(x))
                means.append(float(np.mean(costs)))
            x, k = data[0]
            ratio = means[0] / means[1] if len(means) > 1 else 1.0
            print(f"| {name} | {len(x)} | {x.shape[1]} | {k} | {eps:g} | {' | '.join(f'{m:.5g}' for m in means)} | "
                  f"{ratio:.2f} | {time.perf_counter() - t:.0f} |", flush=True)


if __name__ == "__main__":
    main()
