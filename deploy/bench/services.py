"""``shoal bench --services``: ingestion throughput and latency of the real services.

Three measurements, each against processes on 127.0.0.1 (server with its
default SQLite store, WAL, synchronous=FULL; every 2xx is committed):

1. batch ingestion: 2 x 10^5 device messages POSTed to ``/reports/batch``
   in batches of ``batch``, then the same reports in the binary form to
   ``/reports/binary``, over 4 and over 16 connections, and a pair of 10^6
   over 16 (``_pairs``);
2. single-message POSTs: ``singles`` messages to ``/reports`` over 50
   concurrent keep-alive connections, with per-request latency;
   and, when ``wrk`` is installed, the same from wrk (``wrk_load.py``) at
   saturation and with 50 clients that think 0-80 ms between messages;
3. ``shoal sim --users N`` end to end (server, shuffler, devices, decode) as a
   subprocess, timed from the outside.

The load generator (``shoal.deploy.bench.loadgen``) is a separate process with
pre-serialised bodies, so the figures are the server's. After each load the
store is asked how many reports it holds: every acknowledged report must be
there (the benchmark fails otherwise).
"""

from __future__ import annotations

import argparse
import base64
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from shoal.client.encoder import encode_arrays
from shoal.common.kinds.tree import config_from_dict
from shoal.common.wire.binary import CONTENT_TYPE, encode_reports
from shoal.deploy.bench.results import machine
from shoal.deploy.bench.wrk_load import run_wrk, wrk_path
from shoal.deploy.simulation.datasets import city_locations
from shoal.deploy.simulation.processes import Services


def create_round(services: Services, n: int) -> tuple[str, Any]:
    """A nettree round on the city data for ``n`` devices (the services benchmarks' round)."""
    op = {"Authorization": f"Bearer {services.env['SHOAL_OPERATOR_TOKEN']}"}
    ds = city_locations(10, seed=0)
    body = {"k": ds.k, "dim": 2, "epsilon": 4.0, "n_expected": n, "encoder": "nettree",
            "bound": {"radius": ds.bound.radius, "low": list(ds.bound.low or ()), "high": list(ds.bound.high or ())}}
    r = httpx.post(services.server_url + "/rounds", json=body, headers=op, timeout=30)
    r.raise_for_status()
    return r.json()["id"], config_from_dict(r.json()["config"])


def _messages_json(n: int, cfg: Any, seed: int) -> list[str]:
    pts = city_locations(n, seed=seed).points
    return [m.model_dump_json() for m in encode_arrays(pts, cfg).to_messages()]


def _load(url: str, bodies: list[str], concurrency: int, tmp: Path, rate: float | None = None,
          content_type: str | None = None) -> dict[str, Any]:
    path = tmp / "bodies.jsonl"
    path.write_text("\n".join(bodies) + "\n")
    extra = (["--rate", str(rate)] if rate else []) + (["--content-type", content_type] if content_type else [])
    out = subprocess.run([sys.executable, "-m", "shoal.deploy.bench.loadgen", "--url", url, "--bodies", str(path),
                          "--concurrency", str(concurrency), *extra], capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def stored(services: Services, rid: str) -> int:
    return int(httpx.get(f"{services.server_url}/rounds/{rid}", timeout=30).json()["reports"])


def _sim(users: int, extra: list[str]) -> dict[str, Any]:
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "shoal.common.cli", "sim", "--users", str(users), "--json", *extra],
                         capture_output=True, text=True, check=True)
    res: dict[str, Any] = json.loads(out.stdout)
    res["wall_seconds"] = time.perf_counter() - t
    res.pop("centers", None)
    res.pop("ball_centers", None)
    return res


CONNECTIONS = (4, 16)  # connections of the batch loads
LARGE = 1_000_000  # reports of the large pair (16 connections): a store's cost per row grows with the round


def _pairs(smoke: bool) -> list[tuple[str, int, int]]:
    """(key, reports, connections) of the batch pairs. The large pair is there
    because random message ids make a commit's cost grow with the round's size
    (the SQLite inbox, ``storage/store.py``, is the answer to that): a 2 x 10^5
    load lasts a second or so and says nothing of a round of millions."""
    small = 20_000 if smoke else 200_000
    return [(str(c), small, c) for c in CONNECTIONS] + ([] if smoke else [(f"{LARGE:.0e}_16", LARGE, 16)])


def _batch_pair(services: Services, tmp: Path, reports: int, batch: int, connections: int,
                problems: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """JSON batches, then the same reports' binary form (common/wire/binary.py), each to a round of its own."""
    rid, cfg = create_round(services, reports)
    msgs = _messages_json(reports, cfg, seed=1)
    bodies = ['{"messages":[' + ",".join(msgs[i:i + batch]) + "]}" for i in range(0, reports, batch)]
    js = _load(f"{services.server_url}/rounds/{rid}/reports/batch", bodies, connections, tmp)
    js.update(reports=reports, batch=batch, reports_per_second=reports / js["seconds"], stored=stored(services, rid))
    if js["stored"] != reports or js["statuses"] != {"202": len(bodies)}:
        problems.append(f"batch load ({connections} connections): statuses {js['statuses']}, stored {js['stored']} "
                        f"of {reports}")
    rid2, cfg2 = create_round(services, reports)
    batch_cols = encode_arrays(city_locations(reports, seed=1).points, cfg2)
    binary = [base64.b64encode(encode_reports(batch_cols.select(slice(i, i + batch)))).decode()
              for i in range(0, reports, batch)]
    bi = _load(f"{services.server_url}/rounds/{rid2}/reports/binary", binary, connections, tmp, content_type=CONTENT_TYPE)
    bi.update(reports=reports, batch=batch, reports_per_second=reports / bi["seconds"], stored=stored(services, rid2),
              bytes_per_report=(len(base64.b64decode(binary[0])) - 4) / batch, json_bytes_per_report=len(bodies[0]) / batch)
    if bi["stored"] != reports or bi["statuses"] != {"202": len(binary)}:
        problems.append(f"binary batch load ({connections} connections): statuses {bi['statuses']}, stored "
                        f"{bi['stored']} of {reports}")
    return js, bi


def run(args: argparse.Namespace) -> int:
    smoke = bool(args.smoke)
    batch, singles, users = (1000, 2000, 1000) if smoke else (1000, 20_000, 20_000)
    rows: dict[str, Any] = {"machine": machine(), "smoke": smoke}
    services = Services(via_shuffler=False, min_batch=100)
    problems: list[str] = []
    try:
        with tempfile.TemporaryDirectory(prefix="shoal-bench-") as tmpname:
            tmp = Path(tmpname)
            # JSON and binary batches, the same reports and batch size, each to a fresh round, at
            # 4 connections and at 16 (the store commits whatever is pending as one group: more
            # connections, larger commits), and a round of 10^6 at 16.
            rows["pairs"] = [key for key, _, _ in _pairs(smoke)]
            for key, n, connections in _pairs(smoke):
                rows[f"batch_{key}"], rows[f"binary_{key}"] = _batch_pair(services, tmp, n, batch, connections, problems)
            for key, rate in (("single", None), ("single_rate", 1000.0)):
                rid, cfg = create_round(services, singles)
                res = _load(f"{services.server_url}/rounds/{rid}/reports", _messages_json(singles, cfg, seed=2), 50,
                            tmp, rate)
                res["stored"] = stored(services, rid)
                if res["stored"] != singles or res["statuses"] != {"202": singles}:
                    problems.append(f"{key} load: statuses {res['statuses']}, stored {res['stored']} of {singles}")
                rows[key] = res
            if wrk_path() is not None:
                for key, think in (("wrk_saturation", 0), ("wrk_clients", 40)):
                    # distinct messages for the whole load (wrk sends them in turn; a second turn would be
                    # duplicates, acknowledged but not stored): 2 s or 20 s at up to ~3,000/s
                    n = 20_000 if smoke else 100_000
                    rid, cfg = create_round(services, n)
                    res = run_wrk(f"{services.server_url}/rounds/{rid}/reports", _messages_json(n, cfg, seed=3), 50,
                                  2 if smoke else 20, think, tmp)
                    res["stored"] = stored(services, rid)
                    # wrk counts answered requests; those still in flight at the end are stored too.
                    if res["non_2xx"] or res["socket_errors"] or not res["requests"] <= res["stored"] <= res["requests"] + 50:
                        problems.append(f"{key}: {res['non_2xx']} non-2xx, {res['socket_errors']} socket errors, "
                                        f"stored {res['stored']} for {res['requests']} answered")
                    rows[key] = res
    finally:
        services.close()
    rows["sim"] = _sim(users, [])
    rows["sim_shuffler"] = _sim(users, ["--via-shuffler"])
    if not smoke and any(Path(args.data_dir).glob("uber*")):
        rows["sim_uber_shuffler"] = _sim(users, ["--via-shuffler", "--dataset", "uber", "--data-dir", str(args.data_dir)])
    for key in ("sim", "sim_shuffler", "sim_uber_shuffler"):
        if key in rows:
            r = rows[key]
            # Via the shuffler a final remainder below --min-batch (100) stays buffered by design.
            short = r["users"] - r["received"]
            if r["failed"] or short < 0 or short >= (100 if r["via_shuffler"] else 1):
                problems.append(f"{key}: {r['received']} of {r['users']} received, {r['failed']} devices failed")
    text = _table(rows)
    print(text)
    if not smoke:
        out: Path = args.out
        out.mkdir(parents=True, exist_ok=True)
        (out / "services.md").write_text(text)
        (out / "services.json").write_text(json.dumps(rows, indent=1))
    for problem in problems:
        print(f"services bench: {problem}", file=sys.stderr)
    return 1 if problems else 0


def _wrk_lines(rows: dict[str, Any]) -> list[str]:
    if "wrk_saturation" not in rows:
        return ["", "(wrk not installed: no wrk rows; `apt-get install wrk`)"]
    lines = ["", "With wrk (C load generator, 2 threads; `deploy/bench/wrk_load.py`): each of the 50 connections sends its next",
             "message when the previous answer arrives, after a think time uniform in [0, 2 t] ms.", "",
             "| load | answered | connections | think t ms | seconds | reports/s | p50 ms | p90 ms | p99 ms | non-2xx | stored |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for key, label in (("wrk_saturation", "single-message POSTs, wrk, saturation"),
                       ("wrk_clients", "single-message POSTs, wrk, 50 clients with think time")):
        r = rows[key]
        lat = r["latency_ms"]
        lines.append(f"| {label} | {r['requests']} | {r['concurrency']} | {r['think_ms']} | {r['seconds']:.1f} | "
                     f"{r['requests_per_second']:.0f} | {lat['p50']:.1f} | {lat['p90']:.1f} | {lat['p99']:.1f} | "
                     f"{r['non_2xx']} | {r['stored']} |")
    return lines


def _batch_lines(rows: dict[str, Any]) -> list[str]:
    lines = []
    for pair in rows["pairs"]:
        for key, label in (("batch", "batch ingestion, {} per POST"),
                           ("binary", "binary batch ingestion, {} per POST (common/wire/binary.py)")):
            r = rows[f"{key}_{pair}"]
            lines.append(f"| {label.format(r['batch'])} | {r['requests']} | {r['concurrency']} | {r['seconds']:.1f} | "
                         f"{r['reports_per_second']:.0f} | {r['latency_ms']['p50']:.0f} | {r['latency_ms']['p99']:.0f} | "
                         f"{r['statuses']} | {r['stored']} |")
    return lines


def _ratio_lines(rows: dict[str, Any]) -> list[str]:
    lines = []
    for pair in rows["pairs"]:
        b, j = rows[f"binary_{pair}"], rows[f"batch_{pair}"]
        lines.append(f"Binary against JSON batches, {b['reports']:,} reports at {b['concurrency']} connections, in this "
                     f"run: {b['reports_per_second'] / j['reports_per_second']:.2f} x the reports/s; "
                     f"{b['bytes_per_report']:.0f} bytes per report against {b['json_bytes_per_report']:.0f}.")
    return lines


def _table(rows: dict[str, Any]) -> str:
    s, o = rows["single"], rows["single_rate"]
    lines = [
        "# shoal bench --services" + (" --smoke" if rows["smoke"] else ""), "",
        f"machine: {rows['machine']}; server and load generator share the machine; SQLite store (WAL, synchronous=FULL)",
        "",
        "Closed loop: each connection sends when its previous answer arrives (saturation; latency = connections /",
        "throughput). Open loop: requests due at a fixed rate, latency counted from when each was due.",
        "",
        "| load | requests | connections | seconds | reports/s | p50 ms | p99 ms | statuses | stored |",
        "|---|---|---|---|---|---|---|---|---|",
        *_batch_lines(rows),
        f"| single-message POSTs, closed loop | {s['requests']} | {s['concurrency']} | {s['seconds']:.1f} | "
        f"{s['requests_per_second']:.0f} | {s['latency_ms']['p50']:.1f} | {s['latency_ms']['p99']:.1f} | {s['statuses']} | {s['stored']} |",
        f"| single-message POSTs, open loop at {o['rate']:.0f}/s | {o['requests']} | {o['concurrency']} | {o['seconds']:.1f} | "
        f"{o['requests_per_second']:.0f} | {o['latency_ms']['p50']:.1f} | {o['latency_ms']['p99']:.1f} | {o['statuses']} | {o['stored']} |",
        "",
        *_ratio_lines(rows),
        *_wrk_lines(rows),
        "",
        "| shoal sim | users | dataset | via shuffler | wall s | send s | reports/s | decode s | objective | non-private | one center |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key in ("sim", "sim_shuffler", "sim_uber_shuffler"):
        if key in rows:
            r = rows[key]
            lines.append(f"| `{key}` | {r['users']} | {r['dataset']} | {r['via_shuffler']} | {r['wall_seconds']:.1f} | "
                         f"{r['send_seconds']:.1f} | {r['reports_per_second']:.0f} | {r['decode_seconds']:.2f} | "
                         f"{r['normalized_objective']:.5f} | {r['nonprivate_objective']:.5f} | {r['trivial_objective']:.5f} |")
    return "\n".join(lines) + "\n"
