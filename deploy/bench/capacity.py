"""``shoal bench --capacity`` (issue 19, Build 3): what one server replica
takes, on SQLite and on PostgreSQL, and what two replicas on one PostgreSQL
take together; the README turns these figures into a deployment.

For each store and replica count, against real ``shoal server`` processes on
127.0.0.1 (every 2xx committed; the store's count is checked afterwards):
- binary batches: ``reports`` tree reports in POSTs of 1000, over 4
  connections in all, spread evenly over the replicas;
- single JSON POSTs (one device, one report: how devices without a shuffler
  send), ``singles`` of them over 50 connections in all, closed loop
  (saturation).
One load generator process per replica (``loadgen.py``), started together;
a load's rate is its reports over the slowest generator's seconds. All of it
shares the machine's cores with the servers and PostgreSQL, so two replicas
here measure contention on 2 cores, not what two machines would give.

The **append floor** (issue 42, Build 4), measured in the same run: the same
number of 38-byte rows (a tree report's binary record) appended to a fresh
SQLite file in WAL mode with ``synchronous=FULL`` (an fsync per commit), one
commit per 1000 rows (one POST's batch), by one connection in this process,
just before the load (the server idle beside it): what durable storage
costs before any HTTP, parsing, deduplication or indexing. The SQLite row
prints the server's binary-batch rate over it.
``--capacity-reports`` and ``--capacity-connections`` set the batch load
(the issue's criterion: 1e6 reports over 16 connections, >= 0.8x the floor).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from shoal.client.encoder import encode_arrays
from shoal.common.wire.binary import CONTENT_TYPE, encode_reports
from shoal.deploy.bench.results import machine
from shoal.deploy.bench.scratch_schema import PG_URL, scratch_schema
from shoal.deploy.bench.services import create_round, stored
from shoal.deploy.simulation.datasets import city_locations
from shoal.deploy.simulation.processes import Services


def _reset(url: str) -> None:
    """Empty the schema between setups (each starts from an empty store)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS report_rows, rounds CASCADE")


def _spread(services: Services, path: str, bodies: list[str], connections: int, tmp: Path,
            content_type: str = "application/json") -> dict[str, Any]:
    """``bodies`` split evenly over the replicas, one load generator each, together."""
    urls = services.server_urls
    procs = []
    for i, url in enumerate(urls):
        part = tmp / f"bodies-{i}.txt"
        part.write_text("\n".join(bodies[i::len(urls)]) + "\n")
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "shoal.deploy.bench.loadgen", "--url", url + path, "--bodies", str(part),
             "--concurrency", str(max(1, connections // len(urls))), "--content-type", content_type],
            stdout=subprocess.PIPE, text=True))
    outs = [json.loads(p.communicate()[0]) for p in procs]
    statuses: dict[str, int] = {}
    for o in outs:
        for k, v in o["statuses"].items():
            statuses[k] = statuses.get(k, 0) + v
    return {"requests": sum(o["requests"] for o in outs), "seconds": max(o["seconds"] for o in outs),
            "statuses": statuses, "p99_ms": max(o["latency_ms"]["p99"] for o in outs)}


RECORD_BYTES = 38  # a tree report's binary record (common/wire/binary.py)


def append_floor(reports: int, folder: Path, per_commit: int = 1000) -> float:
    """Reports/s of the append floor (module docstring): 38-byte rows into SQLite, WAL, an fsync per commit."""
    path = folder / "floor.db"
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=FULL")
    con.execute("CREATE TABLE rows (round_seq INTEGER NOT NULL, body BLOB NOT NULL)")
    rows = [(1, os.urandom(RECORD_BYTES)) for _ in range(per_commit)]
    t = time.perf_counter()
    for lo in range(0, reports, per_commit):
        con.execute("BEGIN")
        con.executemany("INSERT INTO rows VALUES (?, ?)", rows[: min(per_commit, reports - lo)])
        con.execute("COMMIT")
    seconds = time.perf_counter() - t
    count = con.execute("SELECT count(*) FROM rows").fetchone()[0]
    con.close()
    if count != reports:
        raise RuntimeError(f"append floor: {count} rows stored of {reports}")
    return reports / seconds


def _measure(services: Services, reports: int, singles: int, tmp: Path, connections: int = 4) -> dict[str, Any]:
    out: dict[str, Any] = {}
    rid, cfg = create_round(services, reports)
    batch = encode_arrays(city_locations(reports, seed=1).points, cfg)
    bodies = [base64.b64encode(encode_reports(batch.select(slice(i, i + 1000)))).decode()
              for i in range(0, reports, 1000)]
    res = _spread(services, f"/rounds/{rid}/reports/binary", bodies, connections, tmp, CONTENT_TYPE)
    res.update(reports=reports, reports_per_second=reports / res["seconds"], stored=stored(services, rid))
    out["binary_batches"] = res
    rid, cfg = create_round(services, singles)
    msgs = [m.model_dump_json() for m in encode_arrays(city_locations(singles, seed=2).points, cfg).to_messages()]
    res = _spread(services, f"/rounds/{rid}/reports", msgs, 50, tmp)
    res.update(reports=singles, reports_per_second=singles / res["seconds"], stored=stored(services, rid))
    out["single_posts"] = res
    return out


def _store_bytes(services: Services, url: str | None) -> int:
    """What the reports table takes: PostgreSQL's heap, index and TOAST, or
    the SQLite file after a checkpoint (both hold only these rounds)."""
    if url is None:
        import sqlite3

        path = services.dir / "server.db"
        con = sqlite3.connect(path)
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        con.close()
        return path.stat().st_size
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:  # VACUUM runs outside a transaction
        conn.execute("VACUUM ANALYZE report_rows")
        row = conn.execute("SELECT pg_total_relation_size('report_rows')").fetchone()
        return int(row[0]) if row else 0


def run(args: argparse.Namespace) -> int:
    reports, singles = (20_000, 2_000) if args.smoke else (200_000, 20_000)
    reports = getattr(args, "capacity_reports", None) or reports
    connections = getattr(args, "capacity_connections", None) or 4
    rows: list[dict[str, Any]] = []
    problems: list[str] = []
    with scratch_schema(PG_URL) as pg:
        setups: list[tuple[str, str | None, int]] = [("SQLite", None, 1)]
        if pg is not None:
            setups += [("PostgreSQL", pg, 1), ("PostgreSQL", pg, 2)]
        for name, url, replicas in setups:
            services = Services(via_shuffler=False, min_batch=100, db_url=url, replicas=replicas)
            try:
                with tempfile.TemporaryDirectory(prefix="shoal-capacity-") as tmp:
                    # The floor first: after the load the server merges its inbox, which would slow it.
                    floor = append_floor(reports, Path(tmp)) if url is None else None
                    res = _measure(services, reports, singles, Path(tmp), connections)
                rows_stored = sum(r["stored"] for r in res.values())
                bytes_per_report = _store_bytes(services, url) / rows_stored
            finally:
                services.close()
            if url is not None:
                _reset(url)
            for key, r in res.items():
                if r["stored"] != r["reports"] or set(r["statuses"]) != {"202"}:
                    problems.append(f"{name} x{replicas} {key}: statuses {r['statuses']}, stored {r['stored']} "
                                    f"of {r['reports']}")
            rows.append({"store": name, "replicas": replicas, "store_bytes_per_report": bytes_per_report, **res,
                         **({"append_floor_reports_per_second": floor} if floor else {})})
    header = (f"capacity: {reports} binary tree reports in POSTs of 1000 over {connections} connections, {singles} "
              f"single JSON POSTs over 50 connections (saturation); servers, PostgreSQL and load generators on "
              f"{machine()}; append floor: {reports} {RECORD_BYTES}-byte rows into SQLite (WAL, fsync per commit, "
              "1000 rows a commit) in the same run")
    lines = [f"# shoal bench --capacity\n\n{header}\n", "| store | replicas | binary batches reports/s | batch p99 ms | "
             "append floor reports/s | batches / floor | single POSTs reports/s | single p99 ms | store bytes/report |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        bb = r["binary_batches"]
        fl = r.get("append_floor_reports_per_second")
        floor_cells = f"{fl:,.0f} | {bb['reports_per_second'] / fl:.2f}" if fl else " | "
        lines.append(f"| {r['store']} | {r['replicas']} | {bb['reports_per_second']:,.0f} | {bb['p99_ms']:.1f} | "
                     f"{floor_cells} | "
                     f"{r['single_posts']['reports_per_second']:,.0f} | {r['single_posts']['p99_ms']:.1f} | "
                     f"{r['store_bytes_per_report']:.0f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.smoke:
        out: Path = args.out
        out.mkdir(parents=True, exist_ok=True)
        (out / "capacity.md").write_text(text)
        (out / "capacity.json").write_text(json.dumps({"header": header, "rows": rows}, indent=1))
    for p in problems:
        print(f"capacity bench: {p}", file=sys.stderr)
    return 1 if problems else 0
