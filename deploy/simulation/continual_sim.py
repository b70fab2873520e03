"""``shoal sim --model central --algorithm continual``: a drifting stream through
the services (issue 18, Build 6).

A server and a shuffler on 127.0.0.1 (``processes.Services``), a continual round,
and one simulated device per point of ``deploy/simulation/continual_stream.drifting_stream``
(2-D, clusters circling, appearing and vanishing): at each step the points
born then are inserted (sealed to the curator through the shuffler, each
device with its own enrolled token) and the points dying then withdrawn
(the same device's second submission). Then the shuffler is flushed, the
server is asked until it holds every event sent (events still buffered
when the wait ends land in a later step, as in production), and the
operator closes the step (``POST /rounds/{id}/steps``). Prints how it
was run, the events per second, the seconds a step close took, and the
released centers' k-means cost per point on the live population against
the exact one-center cost, at every step and at the last.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import multiprocessing as mp
import os
import platform
import sys
import time
from typing import Any

import httpx
import numpy as np

from shoal.client.kinds.continual import deletions, insertions, new_item
from shoal.common.kinds import parse_config
from shoal.common.wire.envelope import seal
from shoal.common.wire.signing import config_digest
from shoal.deploy.simulation.continual_stream import drifting_stream
from shoal.deploy.simulation.processes import Services, enrol_tokens
from shoal.deploy.simulation.senders import send_all
from shoal.server.decoders.kmeans import kmeans_cost

DRAIN_SECONDS = 30.0  # how long a step waits for the shuffler's batches to reach the server


def _cost(x: np.ndarray, centers: np.ndarray) -> float:
    return kmeans_cost(x, centers) / len(x) if len(x) else 0.0


def _wait_reports(server_url: str, rid: str, expected: int) -> int:
    end = time.time() + DRAIN_SECONDS
    while True:
        stored = int(httpx.get(f"{server_url}/rounds/{rid}", timeout=30).json()["reports"])
        if stored >= expected or time.time() > end:
            return stored
        time.sleep(0.05)


def run_continual_sim(args: argparse.Namespace) -> int:
    """The stream through the services; 0 when every step was released."""
    if not args.via_shuffler:
        print("shoal sim: a continual round's events travel sealed through the shuffler: add --via-shuffler",
              file=sys.stderr)
        return 2
    if args.server_url:
        print("shoal sim: --algorithm continual starts its own server and shuffler (no --server-url)", file=sys.stderr)
        return 2
    k, horizon = args.k or 4, args.horizon
    stream = drifting_stream(horizon, args.users, k_true=min(k, 4), life=max(1, horizon // 4), seed=args.seed)
    try:
        services = Services(True, args.min_batch)
    except RuntimeError as exc:
        print(f"shoal sim: {exc}", file=sys.stderr)
        return 1
    try:
        return _run(args, services, stream, k, horizon)
    finally:
        services.close()


def _run(args: argparse.Namespace, services: Services, stream: Any, k: int, horizon: int) -> int:
    server_url, shuffler_url = services.server_url, services.shuffler_url
    op = {"Authorization": f"Bearer {services.env['SHOAL_OPERATOR_TOKEN']}"}
    body: dict[str, Any] = {"k": k, "dim": 2, "epsilon": args.eps, "n_expected": int(stream.points.shape[0]),
                            "model": "central", "algorithm": "continual", "bound": {"radius": 1.0},
                            "tuning": {"horizon": horizon, "levels": args.levels}}
    if args.delta:
        body["delta"] = args.delta
    r = httpx.post(server_url + "/rounds", json=body, headers=op, timeout=30)
    if r.status_code != 201:
        print(f"shoal sim: the server refused the round: {r.status_code} {r.text}", file=sys.stderr)
        return 1
    rnd = r.json()
    rid, config = rnd["id"], parse_config(rnd["config"])
    key, digest = base64.b64decode(rnd["server_public_key"]), config_digest(rnd["config"], rnd["server_public_key"])
    m = int(stream.points.shape[0])
    items = [new_item() for _ in range(m)]
    tokens = enrol_tokens(str(shuffler_url), services.env["SHOAL_ENROL_TOKEN"], m)
    url = f"{shuffler_url}/rounds/{rid}/messages"
    sent, counter = 0, mp.Value("i", 0)
    send_s = close_s = 0.0
    ratios, late, rows = [], 0, []
    for t in range(1, horizon + 1):
        born, dying = np.flatnonzero(stream.born == t), np.flatnonzero(stream.dies == t)
        msgs = (insertions(config, stream.points[born], [items[i] for i in born])
                + deletions(config, [items[i] for i in dying]))
        bodies = [json.dumps({"sealed": base64.b64encode(seal(msg.model_dump_json().encode(), key, rid)).decode(),
                              "config_digest": digest}).encode() for msg in msgs]
        heads = [{"content-type": "application/json", "X-Device-Token": tokens[i]}
                 for i in np.concatenate([born, dying])]
        t0 = time.perf_counter()
        failures = asyncio.run(send_all(bodies, [url] * len(bodies), heads, args.concurrency, counter))
        send_s += time.perf_counter() - t0
        sent += len(bodies) - failures
        httpx.post(f"{server_url}/rounds/{rid}/flush", headers=op, timeout=600)
        late = sent - _wait_reports(server_url, rid, sent)
        t0 = time.perf_counter()
        r = httpx.post(f"{server_url}/rounds/{rid}/steps", headers=op, timeout=600)
        close_s += time.perf_counter() - t0
        if r.status_code != 200:
            print(f"shoal sim: step {t} was not released: {r.status_code} {r.text}", file=sys.stderr)
            return 1
        release = r.json()
        x = stream.alive(t)
        if len(x):
            cost, one = _cost(x, np.asarray(release["centers"])), _cost(x, x.mean(0, keepdims=True))
            ratios.append(cost / one if one > 0 else 1.0)
            rows.append({"step": t, "population": len(x), "cost": cost, "one_center": one,
                         "suggested_k": release["elbow"]["suggested_k"]})
        if not args.json and (t % max(1, horizon // 8) == 0 or t == horizon):
            print(f"step {t:5d}/{horizon}: population {len(x):6d}, cost {rows[-1]['cost'] if rows else 0:.4g} "
                  f"(exact one center {rows[-1]['one_center'] if rows else 0:.4g}), suggested k' "
                  f"{release['elbow']['suggested_k']}")
    out = {
        "run": {"horizon": horizon, "inserts": m, "events": stream.events, "k": k, "eps": args.eps,
                "delta": args.delta or 0.0, "levels": args.levels, "seed": args.seed, "min_batch": args.min_batch,
                "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"},
        "events_per_second": sent / send_s if send_s else 0.0, "mean_step_close_seconds": close_s / horizon,
        "events_still_in_the_shuffler_at_the_end": late,
        "median_ratio_to_exact_one_center": float(np.median(ratios)) if ratios else None,
        "last": rows[-1] if rows else None,
    }
    print(json.dumps(out) if args.json else json.dumps(out, indent=1))
    return 0
