"""``shoal bench --greedy``: seed 001's greedy in the curator model (issue 18, first part).

Two measurements, each printed with how it was run:

1. The elbow: the paper generator (seed 004, Sec. 5; k_true = 8, d = 100,
   n = 1e5) asked for k = 16 at eps = 1, delta = 1e-6, seeds 0-2: the
   suggested k' (``greedy.elbow_curve``'s rule), the objective of the first
   8 centers, and at how many k' the released cost's band covers the exact
   cost of the released centers.
2. The objective: greedy-001 against gridhist (the central default above
   d') at the true k on the paper generator (n = 1e4, 1e5) and letter
   (when ``--data-dir`` has it), eps 1 and 4, mean of seeds 0-2, with the
   seconds of each run.

3. Tree rounds (local model, nettree): the same encoded reports decoded
   twice, ``tree.centers = "kmeans"`` (the default) and ``"greedy"``
   (``server/decoders/tree/greedy_centers.py``), and ``"greedy-weighted"``
   (the greedy on seed 001's weighted ball values): the paper generator
   (n = 1e5, d = 100), Uber and letter (when ``--data-dir`` has them) at
   eps 1, 4, 8, seeds 1-9 (``tree_rows``, devices by the encoder's
   simulation path), summed up per cell by ``tree_cells``.

``--smoke``: n = 1e4, one seed, no letter, the tree part on the paper
generator at eps 4 only.

``--boost`` (``run_boost``, results ``greedy_boost.md``): seed 001's three
boosts (Sec. 2) beside the plain curator greedy, each a whole (eps, delta)
release (``boost_cells``).

Over 300 lines: the greedy's four measurements (elbow, objective, tree
rounds, boosts) and the shuffle-model run share their datasets, seeds and
printing; apart they would repeat them.

``--model shuffle`` (``run_shuffle``): the elbow in the shuffle model, the
issue's second elbow measurement: the paper generator (k_true = 8, d =
100) at n = ``--ns`` (default 1e6) asked for k = 16, central eps 1, delta
1e-6 in all: a nettree round (one batch of all n, ``tree.centers =
"greedy"``) at 1 - ``ELBOW_SHARE`` of it, then an elbow round
(``common/kinds/elbow.py``) on its ordered centers at ``ELBOW_SHARE``,
whose curve and band are checked against the data's cost of the same
centers; devices are simulated by the encoder's
simulation path (``encode_arrays(..., wire=False)``: the decoded vectors
drawn from the wire path's distribution, which ``tests/common/
test_privunit.py`` checks; the wire path's PrivUnit at N = 4096
candidates would take ~70 minutes a seed here). Reports the suggested k'
per seed of both curves (the elbow round's, and the tree's coreset curve
with its band); then the objective of the
greedy against the k-means centers on the same reports (``tree_rows``):
the paper generator at n in the local and shuffle models (seeds 1-3),
Uber and letter in the shuffle model (seeds 1-9).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from shoal.client.encoder import encode_arrays
from shoal.common.cost_drops import prefix_costs
from shoal.common.kinds.central import derive_central
from shoal.common.kinds.elbow import ELBOW_DELTA_SHARE, ELBOW_SHARE, derive_elbow, elbow_budget
from shoal.common.kinds.elbow import contributions as elbow_contributions
from shoal.common.kinds.tree import derive_config
from shoal.deploy.bench.elbow_band import exact_curves, plot_elbows
from shoal.deploy.bench.results import machine, write_results
from shoal.deploy.simulation.datasets import Dataset, load_letter, load_uber, paper_mixture
from shoal.deploy.simulation.summed import summed_in_process
from shoal.server.decoders.central.lift import Merged, reduce_parts
from shoal.server.decoders.central.pipeline import central_kmeans
from shoal.server.decoders.elbow import elbow_from_drops
from shoal.server.decoders.tree.accumulate import LevelAccumulator
from shoal.server.decoders.tree.decoder import TreeDecoder

DELTA = 1e-6


def _fit(x: np.ndarray, k: int, eps: float, delta: float, seed: int, draw: int, algorithm: str = "greedy-001",
         proj_dim: int | None = None) -> Any:
    """One curator run on ``x``: public draws from ``seed``, private ones from ``draw``."""
    spec = derive_central(algorithm, x.shape[0], x.shape[1], k, eps, delta, seed=seed, proj_dim=proj_dim)
    return central_kmeans(x, spec, np.random.default_rng(draw))


def _objective(x: np.ndarray, centers: np.ndarray) -> float:
    return float(prefix_costs(x, centers, 2)[:, -1].mean())


def elbow_rows(n: int, seeds: tuple[int, ...]) -> list[dict[str, Any]]:
    rows = []
    for seed in seeds:
        ds = paper_mixture(n, seed=seed)
        x = ds.bound.to_ball(ds.points)
        fit = _fit(x, 2 * ds.k, 1.0, DELTA, seed + 10, seed + 20)
        exact = prefix_costs(x, fit.centers, 2).sum(0)
        assert fit.elbow is not None
        covered = sum(abs(e["cost"] - c) <= e["band"] for e, c in zip(fit.elbow, exact, strict=True))
        rows.append({"seed": seed, "n": n, "k_true": ds.k, "k": 2 * ds.k, "suggested_k": fit.suggested_k,
                     "objective_first_k_true": _objective(x, fit.centers[:ds.k]), "band_covers": int(covered),
                     "curve": [e["cost"] / n for e in fit.elbow], "band": [e["band"] / n for e in fit.elbow],
                     "exact": (exact / n).tolist()})
    return rows


def objective_rows(sets: list[tuple[str, Any]], eps_list: tuple[float, ...], seeds: tuple[int, ...]) -> list[dict[str, Any]]:
    rows = []
    for name, make in sets:
        for eps in eps_list:
            row: dict[str, Any] = {"dataset": name, "eps": eps}
            for alg in ("greedy-001", "gridhist"):
                vals, secs = [], []
                for seed in seeds:
                    ds: Dataset = make(seed)
                    x = ds.bound.to_ball(ds.points)
                    t = time.perf_counter()
                    fit = _fit(x, ds.k, eps, DELTA, seed + 10, seed + 20, algorithm=alg)
                    secs.append(time.perf_counter() - t)
                    vals.append(_objective(x, fit.centers))
                row[alg] = {"objective": float(np.mean(vals)), "seconds": float(np.mean(secs))}
            row.update(n=x.shape[0], d=x.shape[1], k=ds.k)
            rows.append(row)
    return rows


TREE_SEEDS = tuple(range(1, 10))  # the tree tables' seeds: config and device draws per seed


def _both_decoders(cfg: Any, batches: list[Any], x: np.ndarray, seed: int) -> dict[str, Any]:
    """One encoded round decoded three times: k-means centers (the default), the greedy's
    (count values) and the greedy's on seed 001's weighted values (``greedy-weighted``);
    k-means and k-median cost per point of each, and the greedy's suggested k'."""
    row: dict[str, Any] = {}
    for centers in ("kmeans", "greedy", "greedy-weighted"):
        acc = LevelAccumulator(cfg.with_overrides(tree=replace(cfg.tree, centers=centers)))
        for b in batches:
            acc.add(b)
        res = TreeDecoder(np.random.default_rng(seed + 2)).decode(acc)
        row[centers] = _objective(x, res.ball_centers)
        row[f"{centers}_kmedian"] = float(prefix_costs(x, res.ball_centers, 1)[:, -1].mean())
        if centers == "greedy":
            # None: the round has no tree levels (the private mean only), nothing to order
            row["suggested_k"] = res.diagnostics.get("elbow", {}).get("suggested_k")
    return row


def tree_rows(sets: list[tuple[str, Dataset, tuple[float, ...]]], seeds: tuple[int, ...],
              model: str = "local") -> list[dict[str, Any]]:
    """Per dataset, eps and seed: a nettree round (config seed and device draws from the seed)
    decoded both ways. Devices by the encoder's simulation path (``wire=False``: the wire path's
    distribution, ``tests/common/mechanisms/test_privunit.py``; the wire path is 24 s against 2 s at n = 1e4,
    d = 100). ``model="shuffle"``: central eps, delta 1e-6, one batch of all n."""
    rows = []
    for name, ds, eps_list in sets:
        x = ds.bound.to_ball(ds.points)
        n = x.shape[0]
        extra: dict[str, Any] = {"model": "shuffle", "delta": DELTA, "min_batch": n} if model == "shuffle" else {}
        for eps in eps_list:
            for seed in seeds:
                cfg = derive_config(n, x.shape[1], ds.k, eps, encoder="nettree", bound=ds.bound, seed=seed + 10,
                                    **extra)
                rng = np.random.default_rng([seed, 7])
                batches = [encode_arrays(ds.points[lo:lo + 50_000], cfg, rng, wire=False)
                           for lo in range(0, n, 50_000)]
                rows.append({"dataset": name, "model": model, "n": n, "d": x.shape[1], "k": ds.k, "eps": eps,
                             "seed": seed, "levels": cfg.levels, **_both_decoders(cfg, batches, x, seed)})
    return rows


def tree_cells(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of ``tree_rows`` per (dataset, model, eps) over their seeds: mean objectives,
    the mean and the largest greedy / k-means ratio, how many seeds exceed the issue's 1.5 x."""
    cells: dict[tuple[str, str, float], list[dict[str, Any]]] = {}
    for r in rows:
        cells.setdefault((r["dataset"], r["model"], r["eps"]), []).append(r)
    out = []
    for (name, model, eps), rs in cells.items():
        ratio = np.array([r["greedy"] / r["kmeans"] for r in rs])
        weighted = np.array([r["greedy-weighted"] / r["kmeans"] for r in rs])
        out.append({"dataset": name, "model": model, "eps": eps, "n": rs[0]["n"], "d": rs[0]["d"], "k": rs[0]["k"],
                    "levels": rs[0]["levels"], "seeds": len(rs),
                    **{key: float(np.mean([r[key] for r in rs]))
                       for key in ("kmeans", "greedy", "kmeans_kmedian", "greedy_kmedian")},
                    "ratio_mean": float(ratio.mean()), "ratio_max": float(ratio.max()),
                    "over_1_5": int((ratio > 1.5).sum()),
                    "weighted_mean": float(weighted.mean()), "weighted_max": float(weighted.max()),
                    "weighted_over_1_5": int((weighted > 1.5).sum()),
                    "suggested_k": [r["suggested_k"] for r in rs]})
    return out


def tree_markdown(cells: list[dict[str, Any]]) -> list[str]:
    lines = ["| dataset | model | n | d | k | eps | levels | seeds | k-means (default) | greedy | greedy / k-means: "
             "mean, max (seeds > 1.5) | k-median: k-means centers, greedy | greedy's suggested k' | "
             "greedy-weighted / k-means: mean, max (seeds > 1.5) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in cells:
        ks = ", ".join("-" if s is None else str(s) for s in c["suggested_k"])
        lines.append(f"| {c['dataset']} | {c['model']} | {c['n']} | {c['d']} | {c['k']} | {c['eps']:g} | "
                     f"{c['levels']} | {c['seeds']} | {c['kmeans']:.4g} | {c['greedy']:.4g} | {c['ratio_mean']:.2f}, "
                     f"{c['ratio_max']:.2f} ({c['over_1_5']}) | {c['kmeans_kmedian']:.4g}, {c['greedy_kmedian']:.4g} | "
                     f"{ks} | {c['weighted_mean']:.2f}, {c['weighted_max']:.2f} ({c['weighted_over_1_5']}) |")
    return lines


REPETITIONS = (2, 3)


def boost_cells(x: np.ndarray, k: int, eps: float, seed: int) -> dict[str, Any]:
    """Seed 001's three boosts (Sec. 2) beside the plain greedy at (eps, DELTA) on the
    same data and seeds, each a complete (eps, DELTA)-DP release:
    - ``no_reduction``: the greedy in the data's space (d' = d, no lift): what the
      default's dimension reduction + lifting is measured against;
    - ``over_k``: the greedy asked for 2k centers, lifted with their noisy sizes, then
      reduced to k by weighted k-means (post-processing); None when the run is
      unprojected (no lift, so no sizes to weigh);
    - ``best_of_R``: R runs at (eps / R, DELTA / R) each (basic composition), on
      independent public grids and private draws; the answer is the run whose
      released cost(k) (its own elbow, inside its budget) is least: post-processing.
    Objectives are the exact k-means cost per point in the unit ball."""
    d = x.shape[1]
    base = _fit(x, k, eps, DELTA, seed + 10, seed + 20)
    out: dict[str, Any] = {"plain": _objective(x, base.centers), "proj_dim": int(base.diagnostics["proj_dim"])}
    out["no_reduction"] = (_objective(x, _fit(x, k, eps, DELTA, seed + 10, seed + 20, proj_dim=d).centers)
                           if out["proj_dim"] < d else None)
    wide = _fit(x, 2 * k, eps, DELTA, seed + 10, seed + 20)
    if wide.lift_steps:
        ok = wide.sizes >= 1
        merged = reduce_parts(Merged(wide.centers[ok] * wide.sizes[ok, None], wide.sizes[ok], np.ones(int(ok.sum()))),
                              k, np.random.default_rng(seed + 30))
        out["over_k"] = _objective(x, merged.centers)
    else:
        out["over_k"] = None
    for reps in REPETITIONS:
        fits = [_fit(x, k, eps / reps, DELTA / reps, seed + 10 + 1000 * j, seed + 20 + 1000 * j) for j in range(reps)]
        chosen = int(np.argmin([f.elbow[k - 1]["cost"] for f in fits]))
        out[f"best_of_{reps}"] = _objective(x, fits[chosen].centers)
    return out


def boost_rows(sets: list[tuple[str, Any]], eps_list: tuple[float, ...], seeds: tuple[int, ...]) -> list[dict[str, Any]]:
    """``boost_cells`` per dataset and eps, mean over ``seeds``."""
    rows = []
    for name, make in sets:
        for eps in eps_list:
            cells = []
            for seed in seeds:
                ds: Dataset = make(seed)
                x = ds.bound.to_ball(ds.points)
                cells.append(boost_cells(x, ds.k, eps, seed))
            row: dict[str, Any] = {"dataset": name, "n": x.shape[0], "d": x.shape[1], "k": ds.k, "eps": eps,
                                   "proj_dim": cells[0]["proj_dim"], "per_seed": cells}
            for key in ("plain", "no_reduction", "over_k", *(f"best_of_{r}" for r in REPETITIONS)):
                vals = [c[key] for c in cells]
                row[key] = None if any(v is None for v in vals) else float(np.mean(vals))
            rows.append(row)
    return rows


def _boost_markdown(rows: list[dict[str, Any]]) -> list[str]:
    lines = ["", "## Boosting (seed 001, Sec. 2): greedy-001 in the curator model, each a whole (eps, 1e-6) release "
             "(mean over seeds; ratio to the plain greedy in brackets)", "",
             "| dataset | n | d | d' | k | eps | plain (default) | no dimension reduction | 2k, then reduce to k | "
             + " | ".join(f"best of {r} at eps/{r}" for r in REPETITIONS) + " |",
             "|---|---|---|---|---|---|---|---|---|" + "---|" * len(REPETITIONS)]
    for r in rows:
        def cell(key: str, row: dict[str, Any] = r) -> str:
            v = row[key]
            return "n/a" if v is None else f"{v:.4g} ({v / row['plain']:.2f})"
        lines.append(f"| {r['dataset']} | {r['n']} | {r['d']} | {r['proj_dim']} | {r['k']} | {r['eps']:g} | "
                     f"{r['plain']:.4g} | {cell('no_reduction')} | {cell('over_k')} | "
                     + " | ".join(cell(f"best_of_{x}") for x in REPETITIONS) + " |")
    return lines


def _markdown(elbow: list[dict[str, Any]], objective: list[dict[str, Any]], seeds: tuple[int, ...],
              tree: list[dict[str, Any]]) -> str:
    lines = ["# shoal bench --greedy", "",
             f"machine: {machine()}; delta = {DELTA:g}; seeds {','.join(map(str, seeds))} (data, public and "
             "private draws all from the seed); `deploy/bench/greedy.py`", "",
             "## Elbow: the paper generator, k_true = 8, asked for k = 16, eps = 1", "",
             "Curves with their bands and the exact cost per seed: `greedy_elbow.png`.", "",
             "| seed | n | suggested k' | objective of the first 8 | band covers the exact cost at | "
             "cost per point, k' = 1..16 |", "|---|---|---|---|---|---|"]
    for r in elbow:
        lines.append(f"| {r['seed']} | {r['n']} | {r['suggested_k']} | {r['objective_first_k_true']:.3g} | "
                     f"{r['band_covers']}/{r['k']} k' | {', '.join(f'{c:.3g}' for c in r['curve'])} |")
    lines += ["", "## Objective at the true k: greedy-001 against gridhist (mean over seeds)", "",
              "| dataset | n | d | k | eps | greedy-001 | gridhist | ratio | seconds (greedy-001, gridhist) |",
              "|---|---|---|---|---|---|---|---|---|"]
    for r in objective:
        g, h = r["greedy-001"], r["gridhist"]
        lines.append(f"| {r['dataset']} | {r['n']} | {r['d']} | {r['k']} | {r['eps']:g} | {g['objective']:.4g} | "
                     f"{h['objective']:.4g} | {g['objective'] / h['objective']:.2f} | "
                     f"{g['seconds']:.1f}, {h['seconds']:.1f} |")
    lines += ["", "## Tree rounds (local model, nettree): the same reports, k-means or greedy centers", "",
              f"Seeds {TREE_SEEDS[0]}-{TREE_SEEDS[-1]}, each a config (public draws) and device draws of its own; "
              "devices by the encoder's simulation path (the wire path's distribution); \"-\": no tree levels "
              "(the private mean only, nothing to order).", ""]
    lines += tree_markdown(tree)
    return "\n".join(lines) + "\n"


def shuffle_elbow_rows(n: int, seeds: tuple[int, ...]) -> list[dict[str, Any]]:
    """Per seed: a greedy tree round at (1 - ELBOW_SHARE) of central (1, DELTA), its
    coreset elbow checked by ``elbow_band.exact_curves``, then an elbow round
    (``common/kinds/elbow.py``) at ELBOW_SHARE on its ordered centers, summed
    in-process (``deploy/simulation/summed.py``: the devices' fixed-point drops exactly, the
    total noise of their shares at once), against the data's cost of the same centers."""
    rows = []
    (eps_tree, delta_tree), (eps_elbow, delta_elbow) = elbow_budget(1.0, DELTA)  # rounded toward less spend
    for seed in seeds:
        ds = paper_mixture(n, seed=seed)
        x = ds.bound.to_ball(ds.points)
        t = time.perf_counter()
        cfg = derive_config(n, x.shape[1], 2 * ds.k, eps_tree, encoder="nettree", bound=ds.bound, seed=seed + 10,
                            model="shuffle", delta=delta_tree, min_batch=n)
        cfg = cfg.with_overrides(tree=replace(cfg.tree, centers="greedy"))
        acc = LevelAccumulator(cfg)
        rng = np.random.default_rng([seed, 7])
        for lo in range(0, n, 50_000):
            acc.add(encode_arrays(ds.points[lo:lo + 50_000], cfg, rng, wire=False))
        dec = TreeDecoder(np.random.default_rng(seed + 20), keep_coreset=True)
        res = dec.decode(acc)
        elbow = res.diagnostics.get("elbow") or {}
        costs = elbow.get("costs") or []
        seconds = time.perf_counter() - t
        upto = int(elbow.get("suggested_k") or 0)
        band: dict[str, Any] = {"suggested": upto}
        if dec.coreset is not None:  # None: no tree levels (the private mean), no curve
            check = exact_curves(cfg, x, dec.coreset)
            if not np.allclose(check["released"], [c["cost"] for c in costs], rtol=1e-9):
                raise AssertionError("the elbow's released curve is not the coreset's")
            covered = np.abs(np.subtract(check["released"], check["exact_counts"])) <= np.asarray(check["band"])
            band.update({key: check[key] for key in ("exact_counts", "data_projected", "coreset_share",
                                                     "covers_exact_counts", "covers_data")},
                        covers_exact_counts_to_suggested=int(covered[:upto].sum()))
        t = time.perf_counter()
        ecfg = derive_elbow("tree", res.ball_centers, ds.bound, "kmeans", eps_elbow, delta_elbow, n)
        drops = summed_in_process(ds.points, elbow_contributions, ecfg, "elbow", np.random.SeedSequence([seed, 31]),
                                  chunk=50_000)
        curve, suggested, terms = elbow_from_drops(drops, ecfg.secure_sum, n)
        data_cost = prefix_costs(x, ecfg.center_array, 2).sum(0)
        released = np.array([c["cost"] for c in curve])
        inside = np.abs(released - data_cost) <= np.array([c["band"] for c in curve])
        rows.append({"seed": seed, "n": n, "k_true": ds.k, "k": 2 * ds.k, "levels": cfg.levels,
                     "local_eps_hist": cfg.eps_hist, "local_eps_vec": cfg.eps_vec,
                     "suggested_k": elbow.get("suggested_k"),
                     "objective_first_k_true": _objective(x, res.ball_centers[:ds.k]),
                     "curve": [c["cost"] for c in costs], "band": [c["band"] for c in costs],
                     "seconds": seconds, **band,
                     "elbow_round": {"epsilon": eps_elbow, "delta": delta_elbow, "noise": ecfg.secure_sum.noise,
                                     "suggested_k": suggested, "costs": released.tolist(),
                                     "band": [c["band"] for c in curve], "data_cost": data_cost.tolist(),
                                     "covers_all": int(inside.sum()), "covers_to_suggested": int(inside[:suggested].sum()),
                                     "drop_sd": terms["drop_sd"], "band_z": terms["band_z"],
                                     "seconds": time.perf_counter() - t}})
    return rows


def _elbow_markdown(rows: list[dict[str, Any]]) -> list[str]:
    """The shuffle-model elbow per seed: the elbow round's curve against the data's cost,
    and the tree round's coreset curve against the same curve on the coreset nodes' exact
    counts and against the data's projected cost (``elbow_band.py``)."""
    lines = [f"Budget: the tree round at central eps {1 - ELBOW_SHARE:g}, delta {DELTA * (1 - ELBOW_DELTA_SHARE):g}; "
             f"the elbow round at eps {ELBOW_SHARE:g}, delta {DELTA * ELBOW_DELTA_SHARE:g} (basic composition: "
             f"eps 1, delta {DELTA:g}).", "",
             "### The elbow round: the data's cost of the greedy's first k' centers (unit ball), summed securely", "",
             "| seed | suggested k' | objective of the first 8 | band covers the data's cost: all k', k' <= suggested "
             "| band (z sds, simultaneous 0.95) | one drop's noise sd | seconds |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        e = r["elbow_round"]
        lines.append(f"| {r['seed']} | {e['suggested_k']} | {r['objective_first_k_true']:.3g} | "
                     f"{e['covers_all']}/{len(e['costs'])}, {e['covers_to_suggested']}/{e['suggested_k']} | "
                     f"{e['band_z']:.2f} | {e['drop_sd']:.3g} | {e['seconds']:.0f} |")
    lines += ["", "Per seed, k' = 1..16: released cost (band) / the data's cost, same centers:", ""]
    for r in rows:
        e = r["elbow_round"]
        lines.append(f"- seed {r['seed']}: " + ", ".join(
            f"{c:.4g} ({b:.2g}) / {d:.4g}" for c, b, d in zip(e["costs"], e["band"], e["data_cost"], strict=True)))
    lines += ["", "### The tree round's own elbow (its coreset, post-processing, no budget)", "",
              "| seed | levels | local eps (hist, vec) | suggested k' | objective of the first 8 | band covers the "
              "exact-count curve: all k', k' <= suggested | band covers the data's projected cost | points in "
              "coreset nodes | seconds |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        k = len(r["curve"])
        if "exact_counts" not in r:
            lines.append(f"| {r['seed']} | {r['levels']} | {r['local_eps_hist']:.2f}, {r['local_eps_vec']:.2f} | "
                         f"- | {r['objective_first_k_true']:.3g} | - (no tree levels) | - | - | {r['seconds']:.0f} |")
            continue
        lines.append(f"| {r['seed']} | {r['levels']} | {r['local_eps_hist']:.2f}, {r['local_eps_vec']:.2f} | "
                     f"{r['suggested_k']} | {r['objective_first_k_true']:.3g} | {r['covers_exact_counts']}/{k}, "
                     f"{r['covers_exact_counts_to_suggested']}/{r['suggested']} | {r['covers_data']}/{k} | "
                     f"{r['coreset_share']:.3f} | {r['seconds']:.0f} |")
    lines += ["", "Per seed, k' = 1..16: the released coreset cost (band) / the same on exact node counts / the "
              "data's cost in the projected space, same centers:", ""]
    for r in rows:
        if "exact_counts" not in r:
            continue
        lines.append(f"- seed {r['seed']}: " + ", ".join(
            f"{c:.3g} ({b:.2g}) / {e:.3g} / {dp:.3g}"
            for c, b, e, dp in zip(r["curve"], r["band"], r["exact_counts"], r["data_projected"], strict=True)))
    return lines


def run_shuffle(args: argparse.Namespace) -> int:
    n = int(float(args.ns)) if args.ns else (10_000 if args.smoke else 1_000_000)
    seeds = tuple(range(1 if args.smoke else args.seeds))
    rows = shuffle_elbow_rows(n, seeds)
    eps_list = (4.0,) if args.smoke else (1.0, 4.0, 8.0)
    paper = paper_mixture(n, seed=1)
    tree = tree_rows([("paper", paper, eps_list)], (1,) if args.smoke else (1, 2, 3))
    tree += tree_rows([("paper", paper, eps_list)], (1,) if args.smoke else (1, 2, 3), model="shuffle")
    data = Path(args.data_dir)
    if not args.smoke and any(data.glob("uber*")):
        tree += tree_rows([("uber", load_uber(data), eps_list)], TREE_SEEDS, model="shuffle")
    if not args.smoke and any(data.glob("letter*")):
        tree += tree_rows([("letter", load_letter(data), eps_list)], TREE_SEEDS, model="shuffle")
    cells = tree_cells(tree)
    lines = ["# shoal bench --greedy --model shuffle", "",
             f"machine: {machine()}; the paper generator (k_true = 8, d = 100), n = {n}, k = 16, nettree, shuffle "
             f"model at central eps = 1, delta = {DELTA:g}, one batch of n; tree.centers = greedy; simulated "
             "devices (encode_arrays wire=False; the elbow round's sum in-process, deploy/simulation/summed.py); "
             "`deploy/bench/greedy.py`; the elbow round's curves: `greedy_shuffle_elbow.png`", ""] + _elbow_markdown(rows)
    lines += ["", "## Objective at the true k: the same simulated reports, k-means centers (default) or the "
              "greedy's", "", "Shuffle model: central eps, delta 1e-6, one batch of all n; the paper generator at "
              f"n = {n} (data seed 1) in both models, seeds 1-3; Uber and letter in the shuffle model, seeds "
              f"{TREE_SEEDS[0]}-{TREE_SEEDS[-1]} (their local model: `greedy.md`).", ""]
    lines += tree_markdown(cells)
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.smoke and args.out is not None:
        write_results(args.out, "greedy_shuffle", text, {"rows": rows, "objective": cells, "per_seed": tree})
        plot_elbows([{"title": f"elbow round, paper n={n}, seed {r['seed']}", "cost": r["elbow_round"]["costs"],
                      "band": r["elbow_round"]["band"], "truth": r["elbow_round"]["data_cost"],
                      "suggested": r["elbow_round"]["suggested_k"]} for r in rows],
                    args.out / "greedy_shuffle_elbow.png", "cost of the first k' centers (sum, unit ball)")
    return 0


def run_boost(args: argparse.Namespace) -> int:
    """``--greedy --boost``: ``boost_rows`` on the paper generator (n = 1e4, 1e5), letter and
    Uber (when ``--data-dir`` has them) at eps 1 and 4, seeds 0-2; ``--smoke``: n = 1e4, eps 1,
    seed 0, nothing written."""
    smoke = bool(args.smoke)
    seeds = (0,) if smoke else (0, 1, 2)
    sets: list[tuple[str, Any]] = [("paper", lambda s: paper_mixture(10_000, seed=s))]
    data = Path(args.data_dir)
    if not smoke:
        sets.append(("paper", lambda s: paper_mixture(100_000, seed=s)))
        if any(data.glob("letter*")):
            sets.append(("letter", lambda s: load_letter(data)))
        if any(data.glob("uber*")):
            sets.append(("uber", lambda s: load_uber(data)))
    t = time.perf_counter()
    rows = boost_rows(sets, (1.0,) if smoke else (1.0, 4.0), seeds)
    lines = ["# shoal bench --greedy --boost", "",
             f"machine: {machine()}; delta = {DELTA:g}; seeds {','.join(map(str, seeds))} (data, public and private "
             f"draws all from the seed); `deploy/bench/greedy.py` (`boost_cells`); {time.perf_counter() - t:.0f} s",
             *_boost_markdown(rows)]
    text = "\n".join(lines) + "\n"
    print(text)
    if not smoke:
        write_results(args.out, "greedy_boost", text, {"rows": rows})
    return 0


def run(args: argparse.Namespace) -> int:
    if getattr(args, "boost", False):
        return run_boost(args)
    if getattr(args, "model", "local") == "shuffle":
        return run_shuffle(args)
    smoke = bool(args.smoke)
    seeds = (0,) if smoke else (0, 1, 2)
    elbow = elbow_rows(10_000 if smoke else 100_000, seeds)
    sets: list[tuple[str, Any]] = [("paper", lambda s: paper_mixture(10_000, seed=s))]
    if not smoke:
        sets.append(("paper", lambda s: paper_mixture(100_000, seed=s)))
        letter = Path(args.data_dir)
        if any(letter.glob("letter*")):
            sets.append(("letter", lambda s: load_letter(letter)))
    objective = objective_rows(sets, (1.0, 4.0), seeds)
    eps_list = (4.0,) if smoke else (1.0, 4.0, 8.0)
    trees: list[tuple[str, Dataset, tuple[float, ...]]] = [
        ("paper", paper_mixture(10_000 if smoke else 100_000, seed=1), eps_list)]
    data = Path(args.data_dir)
    if not smoke and any(data.glob("uber*")):
        trees.append(("uber", load_uber(data), eps_list))
    if not smoke and any(data.glob("letter*")):
        trees.append(("letter", load_letter(data), eps_list))
    per_seed = tree_rows(trees, (1,) if smoke else TREE_SEEDS)
    tree = tree_cells(per_seed)
    text = _markdown(elbow, objective, seeds, tree)
    print(text)
    if not smoke:
        write_results(args.out, "greedy", text, {"elbow": elbow, "objective": objective, "tree": tree,
                                                 "tree_per_seed": per_seed})
        plot_elbows([{"title": f"curator, paper n={r['n']}, seed {r['seed']}", "cost": r["curve"], "band": r["band"],
                      "truth": r["exact"], "suggested": r["suggested_k"]} for r in elbow],
                    args.out / "greedy_elbow.png", "cost of the first k' centers per point (unit ball)")
    return 0
