"""``shoal bench --model central``: shoal's central algorithms beside Google's and IBM's.

Issue 17, item 5. For each dataset, central eps (delta = 1e-6) and seed, in
one run: shoal's ``fit`` (the default rule of ``kinds.central.choose_algorithm``
and both algorithms by name), Google's central LSH clustering
(``learning/clustering`` of google/differential-privacy, not on PyPI: give
``--google-path`` to a checkout's ``learning`` folder; it needs
``dp-accounting``) and diffprivlib's ``KMeans`` (pure eps-DP, per-feature
bounds: the bound's image in the ball). Either is skipped, saying so, when it
cannot be imported; none of their code is in shoal.

``--draws R`` runs every method R times per data seed, draw r with run seed
s + 1000 r (shoal's public seed, Google's numpy seed, diffprivlib's
random_state; shoal's private noise is OS entropy on every run): a cell's
mean is over seeds x draws and the table states the runs' min-max, so two
methods whose means differ by less than one run's spread can be told apart
by more draws, not by rerunning. ``--sets`` runs a subset of the cases.

Every run is its own process (spawned), so its peak RSS is its own: it
loads the dataset, keeps only its points in the unit ball, runs one method
and reports objective, seconds and the peak RSS while the method ran (its
input resident; Linux's VmHWM, reset just before). Objectives are k-means cost / n in the unit
ball (``PublicBound.to_ball``), against the non-private reference (the best
of scikit-learn's KMeans with n_init=10 and shoal's own) and one center.
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

from shoal.deploy.bench.results import machine, write_results
from shoal.deploy.simulation.datasets import (
    Dataset,
    balcan_mixture,
    load_letter,
    load_uber,
    overlapping_mixture,
    paper_mixture,
)
from shoal.deploy.simulation.simulate import peak_rss_mb

DELTA = 1e-6
METHODS = ("shoal", "shoal-000", "shoal-003", "google", "diffprivlib")  # shoal: auto (gridhist above d')
SETS = ("paper", "balcan", "overlap", "uber", "letter")
DRAW_STRIDE = 1000  # draw r of data seed s runs with seed s + DRAW_STRIDE r (draw 0: the seed itself)


def run_seed(seed: int, draw: int) -> int:
    """The seed of draw ``draw`` on data seed ``seed``: the data stay those of ``seed``."""
    return seed + DRAW_STRIDE * draw


def chosen_sets(text: str | None, known: tuple[str, ...] = SETS) -> list[str]:
    """The ``--sets`` list (default all of ``known``), refusing an unknown name with the known ones."""
    names = [s.strip() for s in (text or ",".join(known)).split(",") if s.strip()]
    unknown = [s for s in names if s not in known]
    if unknown or not names:
        raise ValueError(f"--sets: unknown {', '.join(unknown) or '(none given)'}; known: {', '.join(known)}")
    return names


def _dataset(name: str, n: int, seed: int, data_dir: Path, smoke: bool) -> Dataset:
    if name == "paper":
        return paper_mixture(n, seed=seed)
    if name == "balcan":
        return balcan_mixture(2000 if smoke else 50_000, seed=seed)
    if name == "overlap":
        return overlapping_mixture(3000 if smoke else 23_000, seed=seed)
    ds = load_uber(data_dir) if name == "uber" else load_letter(data_dir)
    return Dataset(ds.name, ds.points[:3000], ds.k, ds.bound) if smoke else ds


def run_method(method: str, name: str, n: int, seed: int, eps: float, data_dir: str, google: str | None,
               smoke: bool, draw: int = 0) -> dict[str, Any]:
    """One method on one dataset (drawn with ``seed``), its randomness from ``run_seed(seed, draw)``,
    in a fresh process (its peak RSS is its own)."""
    from shoal.server.decoders.kmeans import kmeans_cost

    ds = _dataset(name, n, seed, Path(data_dir), smoke)
    x = ds.bound.to_ball(ds.points)
    ds = Dataset(ds.name, x[:0], ds.k, ds.bound)  # only the ball points stay
    rs = run_seed(seed, draw)
    _reset_peak()
    t = time.perf_counter()
    if method.startswith("shoal"):
        from shoal.deploy.notebook.central import fit

        algorithm = {"shoal": "auto", "shoal-000": "maxcover-000", "shoal-003": "maxcover-003"}[method]
        res = fit(x, ds.k, eps, DELTA, 1.0, algorithm=algorithm, n_expected=len(x), seed=rs)
        centers, chose = res.centers, res.privacy["algorithm"]
    elif method == "google":
        if google:
            sys.path.insert(0, google)
        from clustering import clustering_algorithm, clustering_params

        data = clustering_params.Data(x, radius=1.0)
        param = clustering_params.DifferentialPrivacyParam(epsilon=eps, delta=DELTA)
        np.random.seed(rs)  # noqa: NPY002 (Google's code draws from numpy's global generator)
        centers, chose = np.asarray(clustering_algorithm.private_lsh_clustering(ds.k, data, param).centers), "lsh"
    else:
        from diffprivlib.models import KMeans

        # Per-feature bounds of the ball's points: the box's image, or [-1, 1] for a radius.
        lo, hi = ((ds.bound.to_ball(np.array([ds.bound.low, ds.bound.high]))) if ds.bound.low is not None
                  else (-np.ones(x.shape[1]), np.ones(x.shape[1])))
        km = KMeans(n_clusters=ds.k, epsilon=eps, bounds=(lo, hi), random_state=rs).fit(x)
        centers, chose = km.cluster_centers_, "kmeans"
    seconds = time.perf_counter() - t
    return {"dataset": name, "n": len(x), "d": x.shape[1], "k": ds.k, "method": method, "algorithm": chose,
            "seed": seed, "draw": draw, "run_seed": rs, "eps": eps, "delta": DELTA if method != "diffprivlib" else 0.0,
            "normalized_objective": kmeans_cost(x, np.asarray(centers, dtype=np.float64)) / len(x),
            "seconds": seconds, "peak_rss_mb": _peak_mb()}


def _reset_peak() -> None:
    """Start the peak-RSS count here (Linux: clear_refs 5 resets VmHWM), so a
    run's peak is that of the method with its input resident, not the generator's."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def _peak_mb() -> float:
    """VmHWM since ``_reset_peak`` (ru_maxrss where /proc is not there), MB."""
    return peak_rss_mb()


def _reference(name: str, n: int, seed: int, data_dir: str, smoke: bool) -> dict[str, float]:
    from shoal.deploy.simulation.evaluation import nonprivate_objective
    from shoal.server.decoders.kmeans import kmeans_cost

    ds = _dataset(name, n, seed, Path(data_dir), smoke)
    x = ds.bound.to_ball(ds.points)
    return {"nonprivate_objective": nonprivate_objective(x, ds.k, seed),
            "trivial_objective": kmeans_cost(x, x.mean(0, keepdims=True)) / len(x)}


def unavailable(method: str, google: str | None) -> str | None:
    """Why a baseline cannot run here, or None."""
    if method == "google":
        if not google:
            return "no --google-path (a checkout's learning/ folder of google/differential-privacy)"
        try:
            sys.path.insert(0, google)
            import clustering.clustering_algorithm  # noqa: F401
        except ImportError as exc:
            return f"cannot import Google's clustering from {google}: {exc} (it needs dp-accounting and absl-py)"
    if method == "diffprivlib":
        try:
            import diffprivlib  # noqa: F401
        except ImportError as exc:
            return f"cannot import diffprivlib: {exc}"
    return None


def run_central_bench(args: argparse.Namespace) -> int:
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    google = str(args.google_path) if getattr(args, "google_path", None) else None
    epss = [float(v) for v in (args.eps or "0.5,1,4").split(",")]
    ns = [int(v) for v in (args.ns or "10000,100000,1000000").split(",")]
    seeds = list(range(max(1, int(args.seeds))))
    draws = int(getattr(args, "draws", 1))
    try:
        if draws < 1:
            raise ValueError(f"--draws must be >= 1, got {draws}")
        sets = chosen_sets(getattr(args, "sets", None))
    except ValueError as exc:
        print(f"shoal bench: {exc}", file=sys.stderr)
        return 2
    cases: list[tuple[str, int]] = [("paper", n) for n in ns] + [("balcan", 50_000), ("overlap", 23_000)]
    for name in ("uber", "letter"):
        if name not in sets:
            continue
        try:
            _dataset(name, 0, 0, args.data_dir, True)
            cases.append((name, 0))
        except FileNotFoundError:
            print(f"shoal bench: {name} not found under {args.data_dir}: skipped")
    cases = [(name, n) for name, n in cases if name in sets]
    if args.smoke:
        cases, epss, seeds = [(name, n) for name, n in ([("paper", 3000), ("balcan", 0)]) if name in sets], [1.0], [0]
    methods = []
    for m in METHODS:
        why = unavailable(m, google)
        if why:
            print(f"shoal bench: {m} skipped: {why}")
        else:
            methods.append(m)
    header = (f"machine: {machine()}; seeds {','.join(map(str, seeds))} x {draws} draw(s) (means over seeds x draws, "
              f"min-max over those runs; generated sets are redrawn per seed, draw r runs with seed s + {DRAW_STRIDE} r); "
              f"delta={DELTA:g} (diffprivlib: pure eps); every run its own process (peak RSS: while the method ran, "
              "its input resident); "
              "shoal = fit with the default rule (kinds.central.choose_algorithm)")
    print("shoal bench --model central:", header, flush=True)
    rows: list[dict[str, Any]] = []
    refs: dict[tuple[str, int, int], dict[str, float]] = {}
    ctx = mp.get_context("spawn")
    for seed in seeds:
        for name, n in cases:
            with ProcessPoolExecutor(1, mp_context=ctx) as pool:
                refs[(name, n, seed)] = pool.submit(_reference, name, n, seed, str(args.data_dir), args.smoke).result()
            for eps in epss:
                for draw in range(draws):
                    for m in methods:
                        with ProcessPoolExecutor(1, mp_context=ctx) as pool:  # a fresh process per run
                            r = pool.submit(run_method, m, name, n, seed, eps, str(args.data_dir), google, args.smoke,
                                            draw).result()
                        r.update(refs[(name, n, seed)])
                        rows.append(r)
                        print(f"  seed {seed} draw {draw} {name:7s} n={r['n']} eps={eps:g} {m:11s} {r['algorithm']:13s} "
                              f"obj={r['normalized_objective']:.4g} (nonpriv {r['nonprivate_objective']:.3g}, one center "
                              f"{r['trivial_objective']:.3g}) {r['seconds']:.1f}s {r['peak_rss_mb']:.0f}MB", flush=True)
    write_results(out, "central", _table(rows, methods, header), {"delta": DELTA, "draws": draws, "rows": rows})
    _plot(rows, methods, out)
    print(f"shoal bench: wrote {out / 'central.md'}, central.json and central.png")
    return 0


def _table(rows: list[dict[str, Any]], methods: list[str], header: str) -> str:
    lines = [f"# shoal bench --model central\n\n{header}\n",
             "| dataset | n | d | k | eps | " + " | ".join(methods) + " | shoal min-max | shoal chose | shoal / best other | "
             "non-private | one center | seconds (" + ", ".join(methods) + ") | peak RSS MB (same order) |",
             "|---" * (12 + len(methods)) + "|"]
    for name, n in dict.fromkeys((r["dataset"], r["n"]) for r in rows):
        for eps in sorted({r["eps"] for r in rows}):
            cell = {m: [r for r in rows if (r["dataset"], r["n"], r["eps"], r["method"]) == (name, n, eps, m)]
                    for m in methods}
            if not cell[methods[0]]:
                continue

            def mean(rs: list[dict[str, Any]], key: str = "normalized_objective") -> float:
                return float(np.mean([r[key] for r in rs])) if rs else float("nan")

            others = [mean(cell[m]) for m in methods if not m.startswith("shoal") and cell[m]]
            ratio = f"{mean(cell['shoal']) / min(others):.2f}" if others and "shoal" in cell else "-"
            first = cell[methods[0]][0]
            lines.append(
                f"| {name} | {n} | {first['d']} | {first['k']} | {eps:g} | "
                + " | ".join(f"{mean(cell[m]):.4g}" for m in methods)
                + f" | {_spread(cell.get('shoal', []))} | {cell['shoal'][0]['algorithm'] if cell.get('shoal') else '-'} | {ratio} | "
                f"{mean(cell[methods[0]], 'nonprivate_objective'):.3g} | {mean(cell[methods[0]], 'trivial_objective'):.3g} | "
                + ", ".join(f"{mean(cell[m], 'seconds'):.1f}" for m in methods) + " | "
                + ", ".join(f"{max(r['peak_rss_mb'] for r in cell[m]):.0f}" for m in methods) + " |")
    return "\n".join(lines) + "\n"


def _spread(rows: list[dict[str, Any]]) -> str:
    """The min-max of a cell's runs' objectives ("-" for none)."""
    if not rows:
        return "-"
    values = [r["normalized_objective"] for r in rows]
    return f"{min(values):.4g}-{max(values):.4g}"


def _plot(rows: list[dict[str, Any]], methods: list[str], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = list(dict.fromkeys((r["dataset"], r["n"]) for r in rows))
    fig, axes = plt.subplots(1, len(cases), figsize=(4.5 * len(cases), 4), squeeze=False)
    for ax, (name, n) in zip(axes[0], cases, strict=True):
        sel = [r for r in rows if (r["dataset"], r["n"]) == (name, n)]
        for m in methods:
            epss = sorted({r["eps"] for r in sel if r["method"] == m})
            ys = [np.mean([r["normalized_objective"] for r in sel if r["method"] == m and r["eps"] == e]) for e in epss]
            ax.plot(epss, ys, "o-", label=m)
        ax.axhline(np.mean([r["nonprivate_objective"] for r in sel]), color="k", ls="--", label="non-private")
        ax.axhline(np.mean([r["trivial_objective"] for r in sel]), color="k", ls=":", label="one center")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("central eps")
        ax.set_title(f"{name} n={sel[0]['n']} d={sel[0]['d']} k={sel[0]['k']}", fontsize=9)
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("normalized k-means objective")
    fig.tight_layout()
    fig.savefig(out / "central.png", dpi=100)
    plt.close(fig)
