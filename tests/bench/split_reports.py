"""One report per tree device at the full eps, instead of two at half of it:
what it would gain, measured by emulation before the protocol has it (issue 41).

Today a tree device (``client/encoder.py``) sends a histogram report at
``eps_hist`` and a vector report at ``eps_vec`` (eps_hist + eps_vec = eps).
At small eps a randomiser's variance grows about as 1 / eps^2, so halving a
device's eps costs ~4x in variance while halving the reporters costs 2x:
devices that each send ONE of the two reports at the full eps (a
data-independent choice, like the root devices', charged eps by the
``ChoiceEvent``) would give each oracle about half the noise (PrivUnit in
d = 100: Var(0.5) = 2510 against 2 Var(1) = 1263; OLH 15.7 against 7.4).

No wire change is needed to measure it: the decoder's oracles scale every
level's estimate by n / (reports at that level), hist and vec separately
(``server/decoders/tree/oracles.py``), so n_t devices that each send both
reports at the full eps (a round of 2 eps, ``vec_share`` 0.5) give the same
noise in every node count and vector sum as 2 n_t devices that each send
one. The emulation: of the shipped config's (n, root_share) tree devices
take n_t = half, and m root devices with the shipped root mean's noise
(m = root devices x Var(2 eps) / Var(eps)); the same levels. Paper
generator: n_t + m points of the same mixture (its centers depend on the
seed only); real data: a random subset of n_t + m rows per seed, the answer
scored on every row. "base" is the shipped round (``derive_config``).

    python tests/bench/split_reports.py --data-dir ../shared/data --out tests/bench/results/split_reports.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np

from shoal.common.kinds.tree import derive_config
from shoal.common.mechanisms.privunit import PrivUnitParams
from shoal.deploy.simulation.datasets import Dataset, load_letter, paper_mixture, skewed_box
from shoal.deploy.simulation.simulate import simulate
from shoal.server.decoders.kmeans import kmeans_cost

# (data, n, k, eps, [(data seed, encoder seed), ...])
PAIRS16 = [(s, e) for s in range(4) for e in range(4)]
SAME3 = [(s, s) for s in range(3)]
CELLS = ([("paper", 1_000_000, 8, 1.0, PAIRS16)]
         + [("paper", 1_000_000, 8, eps, SAME3) for eps in (2.0, 4.0)]
         + [("paper", 100_000, 8, eps, SAME3) for eps in (4.0, 8.0)]
         + [(name, 0, k, eps, SAME3) for name, k in (("letter", 26), ("skewed box", 10)) for eps in (1.0, 2.0, 4.0, 8.0)])


def _data(name: str, n: int, seed: int, data_dir: Path) -> Dataset:
    if name == "paper":
        return paper_mixture(n, seed=seed)
    if name == "letter":
        return load_letter(data_dir)
    return skewed_box(50_000, d=7, k=10, seed=0)


def run(name: str, n: int, k: int, eps: float, data_seed: int, seed: int, data_dir: Path) -> dict[str, Any]:
    """The shipped round and its one-report-per-device emulation on the same data; k-means cost / rows."""
    ds = _data(name, n, data_seed, data_dir)
    x = ds.points
    rows, d = x.shape
    base = derive_config(rows, d, k, eps, encoder="auto", seed=seed)
    shipped = simulate(x, k, eps, encoder=base.encoder, bound=ds.bound, seed=seed, reference=False)
    tree = int((rows - base.root_share * rows) / 2)
    ratio = PrivUnitParams.calibrate(d, 2 * eps).expected_sq_norm / PrivUnitParams.calibrate(d, eps).expected_sq_norm
    m = int(round(base.root_share * rows * ratio))
    if name == "paper":
        sub = paper_mixture(tree + m, seed=data_seed).points
    else:
        sub = x[np.random.default_rng([seed, 99]).permutation(rows)[: tree + m]]
    split = simulate(sub, k, 2 * eps, encoder=base.encoder, bound=ds.bound, seed=seed, reference=False,
                     vec_share=0.5, root_share=m / (tree + m), levels=base.levels)
    xb = ds.bound.to_ball(x)

    def cost(out: dict[str, Any]) -> float:
        return float(kmeans_cost(xb, ds.bound.to_ball(np.asarray(out["centers"])))) / rows

    return {"base": cost(shipped), "split": cost(split), "one": float(kmeans_cost(xb, xb.mean(0, keepdims=True))) / rows,
            "encoder": base.encoder, "d": d, "rows": rows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.machine()) if Path("/proc/cpuinfo").exists() else platform.machine()
    head = (f"Machine: {cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, numpy "
            f"{np.__version__}, commit {commit}, {time.strftime('%Y-%m-%d')}. Local model, lsh/auto encoder as "
            "shipped; objective = k-means cost / rows in the unit ball (lower is better), one row per cell, "
            "means over the (data seed, encoder seed) pairs listed.")
    lines = ["# One report per tree device (emulated)", "", head, "",
             "Run: `python tests/bench/split_reports.py --data-dir ../shared/data --out tests/bench/results/split_reports.md`.", "",
             "| data | rows | d | k | encoder | eps | pairs | shipped (min-max) | one report (min-max) | one report / shipped | one center |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    raw = []
    t0 = time.perf_counter()
    for name, n, k, eps, pairs in CELLS:
        res = [run(name, n, k, eps, s, e, args.data_dir) for s, e in pairs]
        raw += [dict(r, data=name, eps=eps, data_seed=s, seed=e) for r, (s, e) in zip(res, pairs, strict=True)]
        b, sp = [r["base"] for r in res], [r["split"] for r in res]
        lines.append(f"| {name} | {res[0]['rows']} | {res[0]['d']} | {k} | {res[0]['encoder']} | {eps:g} | {len(pairs)} | "
                     f"{statistics.mean(b):.4g} ({min(b):.4g}-{max(b):.4g}) | {statistics.mean(sp):.4g} "
                     f"({min(sp):.4g}-{max(sp):.4g}) | {statistics.mean(sp) / statistics.mean(b):.3f} | "
                     f"{statistics.mean(r['one'] for r in res):.4g} |")
        print(lines[-1], flush=True)
    lines += ["", f"Total {time.perf_counter() - t0:.0f} s."]
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")
    if args.json:
        args.json.write_text(json.dumps(raw, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
