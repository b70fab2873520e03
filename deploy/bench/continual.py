"""``shoal bench --continual``: seed 001's greedy under continual observation
(issue 18, Build 5; ``server/decoders/continual/stream.py``).

A drifting stream (``deploy/simulation/continual_stream.py``: T = 1024 steps, ~6e4
insertions and ~4.4e4 deletions, 4 clusters that circle, appear and
vanish, 2-D) fed to a continual round (k = 4, 5 levels, event level),
eps 1 and 4, seeds 0-2.

Each with pure eps (discrete Laplace nodes) and with delta = 1e-6
(discrete Gaussian nodes, zCDP). Per row:

- at how many steps the released centers' k-means cost on the population
  is above the private one-center answer's (the released private mean:
  zero by construction, checked) and above the exact one-center optimum
  (the population's true mean: a stronger yardstick);
- the median over steps of cost / exact one-center cost;
- at the last step, the cost against the one-shot curator greedy
  (``greedy-001``, delta 1e-6) run at eps / log2(T) on the final
  population (mean of three curator seeds), and the ratio.

``--smoke``: T = 128, 8,000 insertions, one seed.

Last, what closing a step costs (``step_close.py``): the step's own rows
against the whole stream, at a few steps of a 1,024-step stream.
"""

from __future__ import annotations

import argparse
import math
import time
from typing import Any

import numpy as np

from shoal.common.kinds.central import derive_central
from shoal.common.kinds.continual import ContinualParams
from shoal.deploy.bench.results import machine, write_results
from shoal.deploy.bench.step_close import close_costs, close_markdown
from shoal.deploy.simulation.continual_stream import drifting_stream
from shoal.server.decoders.central.pipeline import central_kmeans
from shoal.server.decoders.continual.stream import ContinualGreedy
from shoal.server.decoders.kmeans import kmeans_cost

K = 4
DELTA = 1e-6


def _cost(x: np.ndarray, centers: np.ndarray) -> float:
    """k-means cost per point (0 for an empty population)."""
    return kmeans_cost(x, centers) / len(x) if len(x) else 0.0


def stream_row(horizon: int, inserts: int, eps: float, seed: int, levels: int, delta: float = 0.0) -> dict[str, Any]:
    stream = drifting_stream(horizon, inserts, life=horizon // 4, seed=seed)
    greedy = ContinualGreedy(ContinualParams(dim=2, k=K, epsilon=eps, horizon=horizon, levels=levels,
                                             seed=seed + 7, delta=delta),
                             np.random.default_rng(seed + 11))
    above_private = above_exact = 0
    ratios = []
    started = time.perf_counter()
    for t in range(1, horizon + 1):
        release = greedy.step(*stream.step(t))
        x = stream.alive(t)
        if not len(x):
            continue
        cost = _cost(x, release.centers)
        above_private += cost > _cost(x, release.centers[:1]) * (1 + 1e-12)
        exact_one = _cost(x, x.mean(0, keepdims=True))
        above_exact += cost > exact_one
        ratios.append(cost / exact_one)
    seconds = time.perf_counter() - started
    final = stream.alive(horizon)
    shot_eps = eps / math.log2(horizon)
    one_shot = float(np.mean([_cost(final, central_kmeans(final, derive_central(
        "greedy-001", final.shape[0], 2, K, shot_eps, DELTA, seed=s), np.random.default_rng(s + 3)).centers)
        for s in range(3)]))
    last = _cost(final, release.centers)
    return {"eps": eps, "delta": delta, "seed": seed, "horizon": horizon, "events": stream.events, "levels": levels,
            "final_population": int(final.shape[0]), "steps_above_private_one_center": int(above_private),
            "steps_above_exact_one_center": int(above_exact), "median_ratio_to_exact_one_center": float(np.median(ratios)),
            "last_cost": last, "one_shot_eps": shot_eps, "one_shot_cost": one_shot, "last_vs_one_shot": last / one_shot,
            "seconds": seconds}


def _markdown(rows: list[dict[str, Any]]) -> str:
    m = machine()
    head = (f"# Continual greedy (seed 001, Sec. B.3.2), k = {K}, 2-D drifting stream\n\n"
            f"machine: {m}\n\n"
            "| eps | delta | seed | T | events | levels | steps > private 1-center | steps > exact 1-center | "
            "median cost / exact 1-center | last cost | one-shot (eps/log2 T) cost | last / one-shot | s |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    return head + "".join(
        f"| {r['eps']:g} | {r['delta']:g} | {r['seed']} | {r['horizon']} | {r['events']} | {r['levels']} | "
        f"{r['steps_above_private_one_center']} | {r['steps_above_exact_one_center']} | "
        f"{r['median_ratio_to_exact_one_center']:.3f} | {r['last_cost']:.5f} | {r['one_shot_cost']:.5f} | "
        f"{r['last_vs_one_shot']:.2f} | {r['seconds']:.1f} |\n" for r in rows)


def run(args: argparse.Namespace) -> int:
    smoke = bool(args.smoke)
    horizon, inserts = (128, 8_000) if smoke else (1024, 60_000)
    seeds = (0,) if smoke else (0, 1, 2)
    eps_list = (1.0,) if smoke else (1.0, 4.0)
    deltas = (0.0,) if smoke else (0.0, DELTA)
    rows = [stream_row(horizon, inserts, eps, seed, 5, delta) for delta in deltas for eps in eps_list for seed in seeds]
    per = 20 if smoke else 100
    closes = close_costs(horizon, per, (horizon // 8, horizon // 2, horizon))
    text = _markdown(rows) + "\n" + close_markdown(closes, horizon, per)
    print(text)
    if not smoke:
        write_results(args.out, "continual", text, {"rows": rows, "step_close": closes})
    return 0
