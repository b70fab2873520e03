"""The shuffle model's first round (``kinds.refine.first_round``) across eps:
shuffle + refine (the refine share by ``kinds.refine.refine_share``) with
``encoder=auto`` and with a forced first round, seeds 0..S-1, one run.
Usage:

    python tests/bench/shuffle_first_round.py --data overlap --encoders auto,partition,lsh --eps 0.5,1,2,4 --seeds 3

Prints how it was run and one markdown row per (encoder, eps): the first
round taken, the refine share, the mean objective and the seeds' min-max.
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import numpy as np

from shoal.common.kinds.refine import refine_share
from shoal.deploy.simulation.datasets import (
    load_letter,
    load_uber,
    overlapping_mixture,
    paper_mixture,
    skewed_box,
)
from shoal.deploy.simulation.simulate import simulate_rounds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", choices=("overlap", "skewed", "letter", "uber", "paper"), default="overlap")
    ap.add_argument("--n", type=int, default=1_000_000, help="paper: devices")
    ap.add_argument("--encoders", default="auto,partition")
    ap.add_argument("--eps", default="0.5,1,2,4")
    ap.add_argument("--delta", type=float, default=1e-6)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    args = ap.parse_args()
    ds = {"overlap": lambda: overlapping_mixture(seed=0), "skewed": lambda: skewed_box(50_000, seed=0),
          "letter": lambda: load_letter(args.data_dir), "uber": lambda: load_uber(args.data_dir),
          "paper": lambda: paper_mixture(args.n, seed=0)}[args.data]()
    n, d = ds.points.shape
    print(f"# shuffle first round: {ds.name} n={n} d={d} k={ds.k} delta={args.delta} batch=n, shuffle + refine, "
          f"seeds 0..{args.seeds - 1}; {platform.machine()}, Python {platform.python_version()}, numpy {np.__version__}")
    print("| data | encoder | eps | first round | refine share | mean | min - max |")
    print("|---|---|---|---|---|---|---|")
    for enc in args.encoders.split(","):
        for eps in (float(e) for e in args.eps.split(",")):
            share = refine_share(n, d, ds.k, eps, args.delta)
            objs, first = [], set()
            t = time.perf_counter()
            for s in range(args.seeds):
                r = simulate_rounds(ds.points, ds.k, eps, enc, bound=ds.bound, seed=s, model="shuffle",  # type: ignore[arg-type]
                                    delta=args.delta, min_batch=n, refine_epsilon=eps * share, reference=False)
                objs.append(r["normalized_objective"])
                first.add(r["encoder"])
            o = np.array(objs)
            print(f"| {ds.name} | {enc} | {eps} | {'/'.join(sorted(first))} | {share} | {o.mean():.5f} | "
                  f"{o.min():.5f} - {o.max():.5f} |  <!-- {time.perf_counter() - t:.0f} s -->", flush=True)


if __name__ == "__main__":
    main()
