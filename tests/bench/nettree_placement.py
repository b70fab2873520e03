"""Nettree coreset placement (``server/decoders/tree/placement.py``), paired:
the same rounds (same seed: same reports, same decoder randomness) decoded
with each expanded coreset leaf at its children's count-weighted net points
and at its own net point (seed 004), in one run. Usage:

    python tests/bench/nettree_placement.py --data city --eps 4 --seeds 400
    python tests/bench/nettree_placement.py --data uber --eps 1 --seeds 40 --data-dir ../shared/data

Prints how it was run and one markdown row: mean, median and p90 of the
normalised objective without and with placement, their ratio, the seeds
each way and the paired t statistic (negative: placement better).
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import numpy as np

from shoal.deploy.simulation.datasets import city_locations, load_letter, load_uber, paper_mixture
from shoal.deploy.simulation.simulate import simulate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", choices=("city", "uber", "letter", "paper"), default="city")
    ap.add_argument("--n", type=int, default=5000, help="city / paper: devices")
    ap.add_argument("--eps", type=float, default=4.0)
    ap.add_argument("--seeds", type=int, default=40)
    ap.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    args = ap.parse_args()
    if args.data == "city":
        ds, k = city_locations(args.n, seed=0), 6
    elif args.data == "paper":
        ds, k = paper_mixture(args.n, seed=0), 8
    else:
        ds = (load_uber if args.data == "uber" else load_letter)(args.data_dir)
        k = ds.k
    print(f"# nettree placement: {ds.name} n={ds.points.shape[0]} d={ds.points.shape[1]} k={k} eps={args.eps} "
          f"local model, seeds 0..{args.seeds - 1}; {platform.processor() or platform.machine()}, "
          f"Python {platform.python_version()}, numpy {np.__version__}")
    t0 = time.perf_counter()
    off, on = np.zeros(args.seeds), np.zeros(args.seeds)
    for s in range(args.seeds):
        for out, placement in ((off, False), (on, True)):
            r = simulate(ds.points, k, args.eps, encoder="nettree", bound=ds.bound, seed=s, reference=False,
                         decoder_options={"placement": placement})
            out[s] = r["normalized_objective"]
    d = on - off
    t = d.mean() / (d.std(ddof=1) / np.sqrt(d.size)) if d.size > 1 and d.std() > 0 else 0.0
    print("| data | eps | seeds | mean off | mean on | on / off | median off / on | p90 off / on | on better / worse | paired t |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    print(f"| {ds.name} | {args.eps} | {args.seeds} | {off.mean():.5f} | {on.mean():.5f} | {on.mean() / off.mean():.3f} "
          f"| {np.median(off):.5f} / {np.median(on):.5f} | {np.quantile(off, .9):.5f} / {np.quantile(on, .9):.5f} "
          f"| {int((on < off).sum())} / {int((on > off).sum())} | {t:.1f} |")
    print(f"# {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
