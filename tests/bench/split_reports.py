"""One report per tree device at the full eps, instead of two at half of it:
measured by emulation before the protocol had it (issue 41), and now the
built round (``hist_only_share``) beside its emulation.

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
(``server/decoders/tree/oracles.py``), so the noise of a node's count and
vector sum depends only on how many reports of that kind it has and at what
eps. With a share h of the tree devices sending only the histogram report
and the rest only the vector report: the emulation takes the (1 - h) n_t
vector devices and has each of them also send a histogram report at the eps'
whose OLH variance is (1 - h) / h times that at eps (``matched_hist_epsilon``;
eps' = eps at h = 1/2): a round of eps + eps' with ``vec_share`` eps / (eps +
eps'), the shipped levels, and m root devices with the shipped root mean's
noise (m = root devices x Var(eps + eps') / Var(eps)). Paper generator:
(1 - h) n_t + m points of the same mixture (its centers depend on the seed
only); real data: a random subset of that many rows per seed, the answer
scored on every row. "two reports" is the round with both reports per tree
device (``hist_only_share=0``, shipped before issue 41 and still the shuffle
model's); "built" is ``derive_config``'s local round as shipped now (one
report per tree device, h by its rule: 0.5, or 0.25 from d = 32).

    python tests/bench/split_reports.py --data-dir ../shared/data --out tests/bench/results/split_reports.md
    python tests/bench/split_reports.py --cells 0,1 --hist-shares 0.25   # a subset of CELLS
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np

from shoal.common.kinds.tree import derive_config
from shoal.common.mechanisms.local_hashing import LocalHashingParams, optimal_buckets
from shoal.common.mechanisms.privunit import PrivUnitParams
from shoal.deploy.bench.results import machine
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


def matched_hist_epsilon(eps: float, share: float) -> float:
    """The eps' at which one OLH report has ``(1 - share) / share`` times the variance of one at ``eps``:
    the histogram that (1 - share) devices send at eps' has the noise of ``share`` devices' at eps."""
    if share == 0.5:
        return eps

    def variance(e: float) -> float:
        return LocalHashingParams(e, optimal_buckets(e), 1024).per_report_variance()

    target, lo, hi = variance(eps) * (1 - share) / share, 1e-3, 20.0
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if variance(mid) > target else (lo, mid)
    return hi


def run(name: str, n: int, k: int, eps: float, data_seed: int, seed: int, data_dir: Path,
        shares: tuple[float, ...]) -> dict[str, Any]:
    """The shipped round and, per histogram-only share h, its one-report-per-device emulation on the same
    data: the (1 - h) n_t vector devices each also send a histogram report at ``matched_hist_epsilon``;
    k-means cost / rows."""
    ds = _data(name, n, data_seed, data_dir)
    x = ds.points
    rows, d = x.shape
    base = derive_config(rows, d, k, eps, encoder="auto", seed=seed, hist_only_share=0.0)
    shipped = simulate(x, k, eps, encoder=base.encoder, bound=ds.bound, seed=seed, reference=False, hist_only_share=0.0)
    built = simulate(x, k, eps, encoder=base.encoder, bound=ds.bound, seed=seed, reference=False)
    xb = ds.bound.to_ball(x)

    def cost(out: dict[str, Any]) -> float:
        return float(kmeans_cost(xb, ds.bound.to_ball(np.asarray(out["centers"])))) / rows

    out = {"base": cost(shipped), "built": cost(built), "h": built["config"]["hist_only_share"], "one": float(kmeans_cost(xb, xb.mean(0, keepdims=True))) / rows,
           "encoder": base.encoder, "d": d, "rows": rows}
    for share in shares:
        eps_hist = matched_hist_epsilon(eps, share)
        total = eps + eps_hist
        vec_devices = int(rows * (1 - base.root_share) * (1 - share))
        ratio = PrivUnitParams.calibrate(d, total).expected_sq_norm / PrivUnitParams.calibrate(d, eps).expected_sq_norm
        m = int(round(base.root_share * rows * ratio))
        if name == "paper":
            sub = paper_mixture(vec_devices + m, seed=data_seed).points
        else:
            sub = x[np.random.default_rng([seed, 99]).permutation(rows)[: vec_devices + m]]
        split = simulate(sub, k, total, encoder=base.encoder, bound=ds.bound, seed=seed, reference=False,
                         vec_share=eps / total, root_share=m / (vec_devices + m), levels=base.levels)
        out[f"split {share:g}"] = cost(split)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--cells", default="", help="comma-separated indices into CELLS (default: every cell)")
    ap.add_argument("--hist-shares", default="0.5,0.25",
                    help="comma-separated shares of the tree devices that send only the histogram report")
    args = ap.parse_args()
    shares = tuple(float(v) for v in args.hist_shares.split(","))
    if not shares or not all(0 < h < 1 for h in shares):
        ap.error(f"--hist-shares must be numbers in (0, 1), got {args.hist_shares}")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    head = (f"Machine: {machine()}, "
            f"commit {commit}, {time.strftime('%Y-%m-%d')}. Local model, lsh/auto encoder as "
            "shipped; objective = k-means cost / rows in the unit ball (lower is better), one row per cell, "
            "means over the (data seed, encoder seed) pairs listed.")
    lines = ["# One report per tree device (emulated)", "", head, "",
             "Run: `python tests/bench/split_reports.py --data-dir ../shared/data --out tests/bench/results/split_reports.md`.", "",
             "Column h = x: a share x of the tree devices sends only the histogram report, the rest only the "
             "vector report, each at the full eps (emulated). \"built\": the round derive_config ships, its h in "
             "brackets. Ratios are against \"two reports\" (both reports per tree device at a split of eps).", "",
             "| data | rows | d | k | encoder | eps | pairs | two reports (min-max) | built (min-max) [h] | built / two | "
             + " | ".join(f"h = {h:g} (min-max) | h = {h:g} / two" for h in shares) + " | one center |",
             "|---|---|---|---|---|---|---|---|---|---|" + "---|---|" * len(shares) + "---|"]
    raw = []
    t0 = time.perf_counter()
    picked = [CELLS[int(i)] for i in args.cells.split(",")] if args.cells else CELLS
    for name, n, k, eps, pairs in picked:
        res = [run(name, n, k, eps, s, e, args.data_dir, shares) for s, e in pairs]
        raw += [dict(r, data=name, eps=eps, data_seed=s, seed=e) for r, (s, e) in zip(res, pairs, strict=True)]
        b = [r["base"] for r in res]
        bt = [r["built"] for r in res]
        cells = [f"{statistics.mean(bt):.4g} ({min(bt):.4g}-{max(bt):.4g}) [{res[0]['h']:g}] | "
                 f"{statistics.mean(bt) / statistics.mean(b):.3f}"]
        for h in shares:
            sp = [r[f"split {h:g}"] for r in res]
            cells.append(f"{statistics.mean(sp):.4g} ({min(sp):.4g}-{max(sp):.4g}) | "
                         f"{statistics.mean(sp) / statistics.mean(b):.3f}")
        lines.append(f"| {name} | {res[0]['rows']} | {res[0]['d']} | {k} | {res[0]['encoder']} | {eps:g} | {len(pairs)} | "
                     f"{statistics.mean(b):.4g} ({min(b):.4g}-{max(b):.4g}) | " + " | ".join(cells) + " | "
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
