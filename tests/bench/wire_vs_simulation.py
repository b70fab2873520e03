"""The tree round's objective through the devices' wire path against the
simulation path, on the same points, config and seeds, in one run (issue 45,
Build 5: the shared PrivUnit codebook).

``shoal simulate`` and the accuracy benchmarks draw each vector report from
PrivUnit's law with i.i.d. candidates (``privunit.sample_decoded``); real
devices from d = 16 score the round's shared codebook under a per-nonce
signed permutation (``privunit_codebook``), whose one-round bias is at most
a few tenths of a percent of c. This runs the round both ways: the wire
path (``encode_arrays(wire=True)``: nonce and index, decoded by the server's
``ReportBatch.vectors``) and the simulation path, with the same decoder, and
prints the normalised objectives and their ratio. Usage:

    python tests/bench/wire_vs_simulation.py [--n 100000] [--seeds 3] [--out tests/bench/results/wire_vs_simulation.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

from shoal.client.encoder import encode_arrays
from shoal.common.kinds.tree import derive_config
from shoal.deploy.simulation.datasets import paper_mixture
from shoal.deploy.simulation.evaluation import evaluate
from shoal.server.decoders.tree.accumulate import LevelAccumulator
from shoal.server.decoders.tree.decoder import TreeDecoder

CELLS = [("lsh", 4.0), ("lsh", 8.0), ("nettree", 8.0)]


def objective(points: np.ndarray, cfg, bound, seed: int, wire: bool) -> float:
    rng = np.random.default_rng(np.random.SeedSequence([seed, 7, int(wire)]))
    acc = LevelAccumulator(cfg)
    for lo in range(0, points.shape[0], 20_000):
        acc.add(encode_arrays(points[lo:lo + 20_000], cfg, rng, wire=wire))
    result = TreeDecoder(rng=np.random.default_rng(seed)).decode(acc, consume=True)
    (obj,), _ = evaluate(points, bound, [result.ball_centers])
    return float(obj)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--cells", default=None, help="e.g. nettree:8,lsh:4 (default: all of CELLS)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    cells = CELLS if a.cells is None else [(c.split(":")[0], float(c.split(":")[1])) for c in a.cells.split(",")]
    seeds = range(a.first_seed, a.first_seed + a.seeds)
    ds = paper_mixture(a.n, seed=0)
    n, d = ds.points.shape
    lines = [
        "# Tree rounds: the devices' wire path against the simulation path",
        "",
        f"paper generator n = {n:,}, d = {d}, k = 8, local model; seeds {seeds[0]}..{seeds[-1]} (config, device coins, "
        f"decoder); machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"numpy {np.__version__}; `python tests/bench/wire_vs_simulation.py --n {a.n} --seeds {a.seeds} "
        f"--first-seed {a.first_seed}{'' if a.cells is None else ' --cells ' + a.cells}`",
        "",
        "| encoder | eps | wire (mean) | simulation (mean) | wire / simulation | wire per seed | simulation per seed | s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    print("\n".join(lines), flush=True)
    for encoder, eps in cells:
        t = time.perf_counter()
        w, s = [], []
        for seed in seeds:
            cfg = derive_config(n, d, 8, eps, encoder=encoder, bound=ds.bound, seed=seed)
            w.append(objective(ds.points, cfg, ds.bound, seed, True))
            s.append(objective(ds.points, cfg, ds.bound, seed, False))
        row = (f"| {encoder} | {eps:g} | {np.mean(w):.4f} | {np.mean(s):.4f} | {np.mean(w) / np.mean(s):.3f} | "
               f"{' '.join(f'{x:.4f}' for x in w)} | {' '.join(f'{x:.4f}' for x in s)} | {time.perf_counter() - t:.0f} |")
        lines.append(row)
        print(row, flush=True)
    if a.out:
        with open(a.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
