"""``shoal bench --model shuffle``: what the shuffler buys, at equal central privacy.

For each dataset and central eps (delta fixed), three ways to spend it:
- local: every device is eps-LDP (the one-round pipeline, pure local DP);
- shuffle: devices randomise at the FMT'21-amplified eps0 for a batch of
  n messages (``accounting.max_local_epsilon``), same pipeline;
- shuffle + refine: the tree round gets (1 - f) eps and (1 - g) delta, a
  second round (``refine``: one Lloyd step through ``secure_sum``) gets
  f eps and g delta; basic composition gives the same total (eps, delta).
  Where the first round is a partition stage (a one-bit mean round, then the
  partition through that mean) and every sum's noise is discrete Gaussian,
  the shares are shares of the total's zCDP rho instead
  (``kinds/partition_plan.py``): the rounds compose in zCDP within (eps, delta).
Objectives are k-means cost / n in the unit ball, against Lloyd on the true
points (non-private) and one center at the mean (trivial).

With ``--google-path`` (and diffprivlib installed) the same run also fits
Google's and diffprivlib's central-DP k-means on the same points, seeds and
central (eps, delta) (``bench/central.py``'s runner, a fresh process each),
and the table prints shuffle + refine over the better of the two: the
shuffle model against the central libraries (issue 41's acceptance), in one
run. The same run also fits shoal's own central model (``fit`` with the
default algorithm, the central benchmark's ``shoal``) on the same points and
(eps, delta): issue 41 asks that the curator never lose to the shuffle
model, and the table prints central / (shuffle + refine) per cell.
Generated sets (the paper generator, the overlapping clusters) are redrawn
per seed, as the central benchmark draws them, so the two tables describe
the same data. ``--draws R`` runs every variant R times per data seed (draw
r with seed s + 1000 r); cells are means over seeds x draws, and the
per-seed figures are each seed's mean over its draws.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from shoal.common.kinds.encoder_rule import EncoderChoice
from shoal.common.kinds.refine import REFINE_DELTA_SHARE
from shoal.common.kinds.refine import refine_share as share_rule
from shoal.deploy.bench.central import chosen_sets, run_method, run_seed, unavailable
from shoal.deploy.bench.results import machine, write_results
from shoal.deploy.simulation.datasets import (
    Dataset,
    load_letter,
    load_uber,
    overlapping_mixture,
    paper_mixture,
)
from shoal.deploy.simulation.simulate import simulate, simulate_rounds


def _eps(value: float | None) -> str:
    """A device's eps, or "none" where the round gives no local guarantee (a partition round's secure sum)."""
    return "none" if value is None else f"{value:.3g}"


def _row(ds: Dataset, variant: str, seed: int, eps: float, delta: float, objective: float, base: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "dataset": ds.name.split("-n")[0], "n": int(ds.points.shape[0]), "d": int(ds.points.shape[1]), "k": ds.k,
        "variant": variant, "seed": seed, "eps": eps, "delta": delta, "normalized_objective": float(objective),
        "nonprivate_objective": base["nonprivate_objective"], "trivial_objective": base["trivial_objective"], **extra,
    }


def compare(ds: Dataset, eps: float, delta: float, seed: int = 0, encoder: EncoderChoice = "auto",
            refine_share: float | None = None, nonprivate: float | None = None) -> list[dict[str, Any]]:
    """The three variants on one dataset at central (eps, delta); the refine
    round's share of eps is ``kinds.refine.refine_share``'s unless given."""
    n = int(ds.points.shape[0])
    if refine_share is None:
        refine_share = share_rule(n, int(ds.points.shape[1]), ds.k, eps, delta)
    rows = []
    t = time.perf_counter()
    local = simulate(ds.points, ds.k, eps, encoder, bound=ds.bound, seed=seed, nonprivate=nonprivate)
    nonprivate = local["nonprivate_objective"]
    rows.append(_row(ds, "local", seed, eps, 0.0, local["normalized_objective"], local,
                     device_epsilon=eps, encoder=local["encoder"], seconds=time.perf_counter() - t))
    t = time.perf_counter()
    shuf = simulate(ds.points, ds.k, eps, encoder, bound=ds.bound, seed=seed, nonprivate=nonprivate,
                    model="shuffle", delta=delta, min_batch=n)
    rows.append(_row(ds, "shuffle", seed, eps, delta, shuf["normalized_objective"], shuf,
                     device_epsilon=shuf["privacy"]["device_epsilon"], encoder=shuf["encoder"],
                     seconds=time.perf_counter() - t))
    t = time.perf_counter()
    both = simulate_rounds(ds.points, ds.k, eps, encoder, bound=ds.bound, seed=seed, model="shuffle", delta=delta,
                           min_batch=n, refine_epsilon=eps * refine_share, nonprivate=nonprivate)
    rows.append(_row(ds, "shuffle+refine", seed, eps, delta, both["normalized_objective"], shuf, refine_share=refine_share,
                     tree_objective=both["tree_objective"], encoder=both["encoder"], device_epsilon=both["privacy"]["device_epsilon"],
                     composed_epsilon=both["composed"]["epsilon"], composed_delta=both["composed"]["delta"],
                     shares_per_device=both["refine"]["shares_per_device"], refine_seconds=both["refine"]["seconds"],
                     seconds=time.perf_counter() - t))
    return rows


SHUFFLE_SETS = ("paper", "overlap", "uber", "letter")


def per_seed(rows: list[dict[str, Any]]) -> str:
    """Each data seed's mean objective over its draws, in seed order, "a / b / c"."""
    seeds = sorted({r["seed"] for r in rows})
    return " / ".join(f"{np.mean([r['normalized_objective'] for r in rows if r['seed'] == s]):.3g}" for s in seeds)


def _best_library(rows: list[dict[str, Any]], name: str, size: int, eps: float, refined: float) -> str:
    """The better central library's mean objective on this cell and shuffle + refine's ratio to it."""
    means = {}
    for m in ("google", "diffprivlib"):
        rs = [r for r in rows if r["dataset"] == name and r["n"] == size and r["eps"] == eps and r["variant"] == m]
        if rs:
            means[m] = (float(np.mean([r["normalized_objective"] for r in rs])), rs)
    if not means:
        return " | |"
    best = min(means, key=lambda m: means[m][0])
    value, runs = means[best]
    return f"{best} {value:.4g} ({per_seed(runs)}) | {refined / value:.2f} |"


def _plot(rows: list[dict[str, Any]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted({r["dataset"] for r in rows})
    fig, axes = plt.subplots(1, len(names), figsize=(5.5 * len(names), 4), squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        sel = [r for r in rows if r["dataset"] == name]
        for variant, style in (("local", "o-"), ("shuffle", "s-"), ("shuffle+refine", "^-"), ("central", "d--")):
            epss = sorted({r["eps"] for r in sel if r["variant"] == variant})
            if epss:  # the cell's mean over seeds x draws
                ys = [np.mean([r["normalized_objective"] for r in sel if r["variant"] == variant and r["eps"] == e])
                      for e in epss]
                ax.plot(epss, ys, style, label=variant)
        ax.axhline(sel[0]["nonprivate_objective"], color="k", ls="--", label="non-private")
        ax.axhline(sel[0]["trivial_objective"], color="k", ls=":", label="one center")
        ax.set_yscale("log")
        ax.set_xlabel("central eps")
        ax.set_ylabel("normalized k-means objective")
        ax.set_title(f"{name} n={sel[0]['n']} d={sel[0]['d']} k={sel[0]['k']}")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "shuffle_vs_local.png", dpi=100)
    plt.close(fig)


def _libraries(args: argparse.Namespace) -> tuple[list[str], str | None]:
    """The central libraries this run can fit beside shoal (``bench/central.py``), and Google's path."""
    google = str(args.google_path) if getattr(args, "google_path", None) else None
    methods = []
    for m in ("google", "diffprivlib"):
        why = unavailable(m, google)
        if why:
            print(f"shoal bench: {m} not compared: {why}")
        else:
            methods.append(m)
    return methods, google


def run_shuffle_bench(args: argparse.Namespace) -> int:
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    delta = 1e-6
    share = getattr(args, "refine_share", None)
    if share is not None and not 0 < share < 1:
        print(f"shoal bench: --refine-share must be in (0, 1), got {share}", file=sys.stderr)
        return 2
    epss = [float(v) for v in args.eps.split(",")] if getattr(args, "eps", None) else [0.5, 1.0, 2.0, 4.0]
    ns = [int(float(v)) for v in args.ns.split(",") if float(v) > 0] if getattr(args, "ns", None) else [1_000_000]
    seeds = list(range(max(1, int(getattr(args, "seeds", 1)))))
    draws = int(getattr(args, "draws", 1))
    try:
        if draws < 1:
            raise ValueError(f"--draws must be >= 1, got {draws}")
        names_asked = chosen_sets(getattr(args, "sets", None), SHUFFLE_SETS)
    except ValueError as exc:
        print(f"shoal bench: {exc}", file=sys.stderr)
        return 2
    if args.smoke:
        ns, epss, seeds = [5000], [1.0], [0]
    reals = []
    for loader in (load_uber, load_letter):
        if loader.__name__[5:] not in names_asked:
            continue
        try:
            real = loader(args.data_dir)
        except FileNotFoundError:
            print(f"shoal bench: {loader.__name__[5:]} not found under {args.data_dir}: skipped")
            continue
        reals.append(Dataset(real.name, real.points[:5000], real.k, real.bound) if args.smoke else real)
    libraries, google = _libraries(args) if not args.smoke else ([], None)
    rule = "kinds.refine.refine_share's rule" if share is None else f"{share:g} of eps"
    header = (f"machine: {machine()}; seeds {','.join(map(str, seeds))} x {draws} draw(s) (means over seeds x draws; "
              f"per seed: its draws' mean; generated sets are redrawn per seed, draw r runs with seed s + 1000 r); "
              f"encoder auto (the table names its choice per variant); delta={delta:g}; shuffle batch = n (one release "
              f"per round); refine gets {rule} and {REFINE_DELTA_SHARE:g} of delta (basic composition; a partition stage's "
              f"discrete-Gaussian rounds: those shares of the total's rho, composed in zCDP; after a partition "
              f"stage the refine share is a chain of kinds.partition_plan.plan_refine_chain's rounds); central "
              f"libraries in the same run: {', '.join(libraries) or 'none'} (diffprivlib: pure eps); central = shoal's "
              f"own central model (fit, default algorithm) on the same points and (eps, delta)")
    print("shoal bench --model shuffle:", header, flush=True)
    rows: list[dict[str, Any]] = []
    names: list[tuple[str, int]] = []
    ctx = mp.get_context("spawn")
    for seed in seeds:
        # (dataset, the central runner's name and n for the same points)
        sets = ([(paper_mixture(n, seed=seed), "paper", n) for n in ns] if "paper" in names_asked else []) + [
            (r, r.name, 0) for r in reals]
        if "overlap" in names_asked:
            # Broad, overlapping clusters of correlated features (issue 41): where a tree first round loses to a partition round.
            overlap = overlapping_mixture(seed=seed)
            sets.append((Dataset(overlap.name, overlap.points[:5000], overlap.k, overlap.bound) if args.smoke else overlap,
                         "overlap", overlap.points.shape[0]))
        for ds, lib_name, lib_n in sets:
            nonprivate = None
            # the central runner draws the same points (a smoke run's real and overlap sets are cut differently there)
            centrals = ["shoal"] if not args.smoke or lib_name == "paper" else []
            for eps in epss:
                for draw in range(draws):
                    for r in compare(ds, eps, delta, seed=run_seed(seed, draw), refine_share=share, nonprivate=nonprivate):
                        rows.append({**r, "seed": seed, "draw": draw, "run_seed": run_seed(seed, draw)})
                        nonprivate = r["nonprivate_objective"]
                        print(f"  seed {seed} draw {draw} {r['dataset']:8s} n={r['n']} eps={eps:g} {r['variant']:15s} "
                              f"{r['encoder']:7s} obj={r['normalized_objective']:.4g} (device eps {_eps(r['device_epsilon'])}; "
                              f"nonpriv {r['nonprivate_objective']:.3g}, trivial {r['trivial_objective']:.3g}) "
                              f"{r['seconds']:.0f}s", flush=True)
                    if (rows[-1]["dataset"], rows[-1]["n"]) not in names:
                        names.append((rows[-1]["dataset"], rows[-1]["n"]))
                    for m in centrals + libraries:
                        with ProcessPoolExecutor(1, mp_context=ctx) as pool:  # a fresh process per run
                            lib = pool.submit(run_method, m, lib_name, lib_n, seed, eps, str(args.data_dir), google,
                                              False, draw).result()
                        if lib["n"] != ds.points.shape[0]:
                            raise RuntimeError(f"{m} ran on {lib['n']} points of {lib_name}, shoal on {ds.points.shape[0]}")
                        variant = "central" if m == "shoal" else m
                        rows.append({**lib, "dataset": rows[-1]["dataset"], "variant": variant})
                        print(f"  seed {seed} draw {draw} {rows[-1]['dataset']:8s} n={lib['n']} eps={eps:g} {variant:15s} "
                              f"{lib['algorithm']:7s} obj={lib['normalized_objective']:.4g} {lib['seconds']:.1f}s", flush=True)
    if args.smoke:
        return 0
    lines = [f"# shoal bench --model shuffle\n\n{header}\n",
             "| dataset | n | d | k | central eps | local | shuffle | shuffle + refine (per seed) | refine share | "
             "device eps0 (shuffle) | auto chose (local / shuffle / shuffle+refine's first round) | non-private | "
             "one center | best central library (per seed) | shuffle + refine / best library | "
             "shoal central (per seed) | central / shuffle + refine |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, size in names:
        for eps in epss:
            cell = {v: [r for r in rows if r["dataset"] == name and r["n"] == size and r["eps"] == eps and r["variant"] == v]
                    for v in ("local", "shuffle", "shuffle+refine", "central")}
            lo, sh, rf, ce = cell["local"], cell["shuffle"], cell["shuffle+refine"], cell["central"]
            if not lo:
                continue

            def mean(rs: list[dict[str, Any]], key: str = "normalized_objective") -> float:
                return float(np.mean([r[key] for r in rs]))

            central = f"{mean(ce):.4g} ({per_seed(ce)}) | {mean(ce) / mean(rf):.3f} |" if ce else " | |"
            lines.append(f"| {name} | {lo[0]['n']} | {lo[0]['d']} | {lo[0]['k']} | {eps:g} | {mean(lo):.4g} | {mean(sh):.4g} | "
                         f"{mean(rf):.4g} ({per_seed(rf)}) | {rf[0]['refine_share']:g} | {sh[0]['device_epsilon']:.3g} | "
                         f"{lo[0]['encoder']} / {sh[0]['encoder']} / {rf[0]['encoder']} | "
                         f"{mean(lo, 'nonprivate_objective'):.3g} | "
                         f"{mean(lo, 'trivial_objective'):.3g} | {_best_library(rows, name, size, eps, mean(rf))} {central}")
    write_results(out, "shuffle", "\n".join(lines) + "\n", {"delta": delta, "draws": draws, "rows": rows})
    _plot(rows, out)
    print(f"shoal bench: wrote {out / 'shuffle.md'}, shuffle.json and shuffle_vs_local.png")
    return 0
