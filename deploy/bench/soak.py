"""``shoal bench --soak``: a steady load held for minutes, latency per window (issue 44, Build 3).

One server on 127.0.0.1 (default SQLite store: WAL, fsync on every commit),
one tree round, and a load generator in this process (the server is its own
process) that keeps two open-loop streams at their rates whatever the
server does: single reports to ``/reports`` (default 200/s) and JSON
batches to ``/reports/batch`` (default 2/s of 1,000 reports). Request i of a
stream is due at t0 + i / rate and its latency is counted from then, so a
stall is charged to every request it delayed (no coordinated omission); a
request waits for a free connection of its stream's pool, which grows to
``MAX_CONNECTIONS`` when every connection is busy.

Per window (default 30 s): requests, p50 / p99 / max latency of each stream,
the server's peak RSS (``/proc/PID/status``), and its SQLite WAL size. At
the end every acknowledged report must be stored (the round's count).

Message bodies are made from a pool of encoded reports with a fresh random
message id per report, so the round grows by every report sent (about 1.3
million in 10 minutes at the default rates) and the store's merges of new
rows happen during the load, as on a real server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from shoal.deploy.bench.results import machine, write_results
from shoal.deploy.bench.services import _messages_json, create_round, stored
from shoal.deploy.simulation.processes import Services

MAX_CONNECTIONS = 64  # per stream
POOL = 4096  # distinct encoded reports the bodies are made from (each sent with fresh message ids)


@dataclass
class Stream:
    """One open-loop stream: its due times, and each request's (due, latency, status, reports)."""

    name: str
    path: str
    rate: float
    reports_per_request: int
    done: list[tuple[float, float, int, int]] = field(default_factory=list)
    idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = field(default_factory=list)
    open_connections: int = 0


def _body(templates: list[tuple[str, str]], count: int) -> bytes:
    """``count`` reports with fresh message ids: one JSON report, or a batch."""
    picks = np.random.default_rng().integers(0, len(templates), count)  # simulation only: which pooled report
    items = [templates[i][0].replace(templates[i][1], secrets.token_hex(16)) for i in picks.tolist()]
    return (items[0] if count == 1 else '{"messages":[' + ",".join(items) + "]}").encode()


async def _connection(stream: Stream, host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    while not stream.idle and stream.open_connections >= MAX_CONNECTIONS:
        await asyncio.sleep(0.001)
    if stream.idle:
        return stream.idle.pop()
    stream.open_connections += 1
    return await asyncio.open_connection(host, port)


async def _exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> tuple[int, bytes]:
    writer.write(request)
    response = await reader.readuntil(b"\r\n\r\n")
    length = next((int(line[15:]) for line in response.split(b"\r\n") if line[:15].lower() == b"content-length:"), 0)
    return int(response.split(b" ", 2)[1]), await reader.readexactly(length)


async def _send(stream: Stream, host: str, port: int, body: bytes, due: float) -> None:
    request = (f"POST {stream.path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    reused = bool(stream.idle)
    reader, writer = await _connection(stream, host, port)
    try:
        status, answer = await _exchange(reader, writer, request)
    except (asyncio.IncompleteReadError, ConnectionError):
        if not reused:
            raise
        # The server closed an idle keep-alive connection before this request reached it: a new one.
        writer.close()
        reader, writer = await asyncio.open_connection(host, port)
        status, answer = await _exchange(reader, writer, request)
    latency = time.perf_counter() - due
    accepted = int(json.loads(answer).get("accepted", 0)) if status == 202 else 0
    stream.done.append((due, latency, status, accepted))
    stream.idle.append((reader, writer))


async def _drive(stream: Stream, host: str, port: int, templates: list[tuple[str, str]], t0: float,
                 seconds: float) -> None:
    """Send the stream's requests at their due times, each in its own task."""
    tasks: set[asyncio.Task[None]] = set()
    total = int(seconds * stream.rate)
    for i in range(total):
        body = _body(templates, stream.reports_per_request)  # made before it is due, off the clock
        due = t0 + i / stream.rate
        wait = due - time.perf_counter()
        if wait > 0:
            await asyncio.sleep(wait)
        task = asyncio.create_task(_send(stream, host, port, body, due))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    if tasks:
        await asyncio.gather(*tasks)


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


async def _sample(pid: int, wal: Path, t0: float, seconds: float, samples: list[tuple[float, float, float]]) -> None:
    while time.perf_counter() < t0 + seconds + 5:
        size = wal.stat().st_size / 2**20 if wal.exists() else 0.0
        samples.append((time.perf_counter() - t0, _rss_mb(pid), size))
        await asyncio.sleep(1.0)


def windows(streams: list[Stream], samples: list[tuple[float, float, float]], t0: float, seconds: float,
            window: float) -> list[dict[str, Any]]:
    """Per window of due times: each stream's count, p50/p99/max latency (ms), errors; peak RSS and WAL."""
    rows = []
    for w in range(int(np.ceil(seconds / window))):
        lo, hi = w * window, min((w + 1) * window, seconds)
        row: dict[str, Any] = {"window": f"{lo:.0f}-{hi:.0f} s"}
        for s in streams:
            lat = np.array([d[1] for d in s.done if lo <= d[0] - t0 < hi]) * 1000
            errors = sum(1 for d in s.done if lo <= d[0] - t0 < hi and d[2] != 202)
            row[s.name] = {"requests": int(lat.size), "errors": errors,
                           "p50_ms": float(np.percentile(lat, 50)) if lat.size else None,
                           "p99_ms": float(np.percentile(lat, 99)) if lat.size else None,
                           "max_ms": float(lat.max()) if lat.size else None}
        inside = [(rss, wal) for t, rss, wal in samples if lo <= t < hi]
        row["rss_mb"] = max((r for r, _ in inside), default=None)
        row["wal_mb"] = max((x for _, x in inside), default=None)
        rows.append(row)
    return rows


def _table(rows: dict[str, Any]) -> str:
    a = rows["args"]
    lines = [f"# Soak: {a['seconds']:.0f} s at {a['single_rate']:g} single reports/s + {a['batch_rate']:g} "
             f"batches/s of {a['batch_size']} (issue 44)", "",
             f"Machine: {rows['machine']}. One server on 127.0.0.1, SQLite store, one tree round (city data, "
             f"nettree, eps 4); open-loop generator in a separate process; latency from each request's due time.",
             f"Command: `shoal bench --soak --soak-seconds {a['seconds']:.0f} --single-rate {a['single_rate']:g} "
             f"--batch-rate {a['batch_rate']:g} --batch-size {a['batch_size']}`", "",
             "| window | singles | p50 ms | p99 ms | max ms | batches | p50 ms | p99 ms | max ms | errors | "
             "server RSS MB | WAL MB |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]

    def f(x: float | None) -> str:
        return "-" if x is None else f"{x:.1f}"

    for w in rows["windows"]:
        s, b = w["single"], w["batch"]
        lines.append(f"| {w['window']} | {s['requests']} | {f(s['p50_ms'])} | {f(s['p99_ms'])} | {f(s['max_ms'])} | "
                     f"{b['requests']} | {f(b['p50_ms'])} | {f(b['p99_ms'])} | {f(b['max_ms'])} | "
                     f"{s['errors'] + b['errors']} | {f(w['rss_mb'])} | {f(w['wal_mb'])} |")
    worst = max((w["single"]["p99_ms"] or 0.0) for w in rows["windows"])
    lines += ["", f"Worst window's single-report p99: {worst:.1f} ms. Acknowledged {rows['acknowledged']:,} reports, "
              f"stored {rows['stored']:,}."]
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    seconds = float(args.soak_seconds)
    streams = [Stream("single", "", float(args.single_rate), 1),
               Stream("batch", "", float(args.batch_rate), int(args.batch_size))]
    total = int(seconds * sum(s.rate * s.reports_per_request for s in streams))
    services = Services(via_shuffler=False, min_batch=100)
    try:
        rid, cfg = create_round(services, max(total, 1000))
        templates = [(t, json.loads(t)["message_id"]) for t in _messages_json(POOL, cfg, seed=4)]
        for s, path in zip(streams, ("reports", "reports/batch"), strict=True):
            s.path = f"/rounds/{rid}/{path}"
        host, port = "127.0.0.1", int(services.server_url.rsplit(":", 1)[1])
        wal = Path(str(services.dir / "server.db") + "-wal")
        samples: list[tuple[float, float, float]] = []

        async def main() -> float:
            t0 = time.perf_counter() + 0.5
            await asyncio.gather(*(_drive(s, host, port, templates, t0, seconds) for s in streams),
                                 _sample(services.procs[0].pid, wal, t0, seconds, samples))
            return t0

        t0 = asyncio.run(main())
        rows: dict[str, Any] = {
            "machine": machine(), "args": {"seconds": seconds, "single_rate": args.single_rate,
                                           "batch_rate": args.batch_rate, "batch_size": args.batch_size,
                                           "window": args.soak_window},
            "windows": windows(streams, samples, t0, seconds, float(args.soak_window)),
            "acknowledged": sum(d[3] for s in streams for d in s.done),
            "stored": stored(services, rid),
        }
    finally:
        services.close()
    text = _table(rows)
    print(text)
    if not args.smoke:
        write_results(Path(args.out), "soak", text, rows)
    if rows["stored"] != rows["acknowledged"]:
        print(f"soak bench: acknowledged {rows['acknowledged']} reports but the store holds {rows['stored']}",
              file=sys.stderr)
        return 1
    return 0
