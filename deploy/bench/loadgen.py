"""A minimal HTTP/1.1 load generator for the services benchmark.

Why not httpx: its per-request client overhead (~3-4 ms of CPU here) would
measure the client, not the server, when both share the machine's two
cores. This client pre-serialises every request, keeps one connection per
worker alive, and records each request's latency; it runs in its own
process (``python -m shoal.deploy.bench.loadgen``) and only targets loopback.

Input: a file of request bodies, one JSON document per line (or, with
``--content-type`` other than JSON, one base64 body per line). Output: one
JSON object (requests, seconds, per-status counts, latency percentiles).

Two modes: closed loop (each connection sends as soon as its previous
answer arrives: the saturation throughput, where latency is just
connections / throughput) and, with ``rate``, open loop: request i is due
at t0 + i / rate, whichever connection is free sends it, and its latency is
counted from when it was due, so a stalled server is charged for the
requests it delayed (no coordinated omission).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import sys
import time
from collections import Counter
from urllib.parse import urlparse

import numpy as np

from shoal.common.wire.transport import is_loopback_host


async def _worker(host: str, port: int, path: str, headers: bytes, bodies: list[bytes], next_index: list[int],
                  latencies: list[float], statuses: Counter[int], t0: float, rate: float | None,
                  content_type: str = "application/json") -> None:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        while next_index[0] < len(bodies):
            i = next_index[0]
            body = bodies[i]
            next_index[0] += 1
            head = (f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: {content_type}\r\n"
                    f"Content-Length: {len(body)}\r\n").encode() + headers + b"\r\n"
            t = time.perf_counter()
            if rate is not None:
                due = t0 + i / rate
                if due > t:
                    await asyncio.sleep(due - t)
                t = due
            writer.write(head + body)
            response_head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in response_head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            await reader.readexactly(length)
            latencies.append(time.perf_counter() - t)
            statuses[int(response_head[9:12])] += 1
    finally:
        writer.close()


async def run_load(url: str, bodies: list[bytes], concurrency: int, headers: dict[str, str] | None = None,
                   rate: float | None = None, content_type: str = "application/json") -> dict[str, object]:
    """POST every body to ``url`` over ``concurrency`` keep-alive connections
    (closed loop, or open loop at ``rate`` requests/s)."""
    parsed = urlparse(url)
    host, port = parsed.hostname or "", parsed.port or 80
    if not is_loopback_host(host):
        raise ValueError(f"the load generator only targets loopback addresses, not {host!r}")
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items()).encode()
    latencies: list[float] = []
    statuses: Counter[int] = Counter()
    next_index = [0]
    t = time.perf_counter()
    await asyncio.gather(*(_worker(host, port, parsed.path, extra, bodies, next_index, latencies, statuses, t, rate,
                                   content_type) for _ in range(concurrency)))
    seconds = time.perf_counter() - t
    lat = np.asarray(latencies) * 1000
    return {
        "requests": len(latencies), "seconds": seconds, "requests_per_second": len(latencies) / seconds,
        "statuses": {str(k): v for k, v in sorted(statuses.items())}, "concurrency": concurrency, "rate": rate,
        "latency_ms": {"p50": float(np.percentile(lat, 50)), "p90": float(np.percentile(lat, 90)),
                       "p99": float(np.percentile(lat, 99)), "max": float(lat.max())},
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m shoal.deploy.bench.loadgen", description=__doc__)
    p.add_argument("--url", required=True)
    p.add_argument("--bodies", required=True, help="file with one request body per line")
    p.add_argument("--concurrency", type=int, default=50)
    p.add_argument("--header", action="append", default=[], help="NAME:VALUE, repeatable")
    p.add_argument("--rate", type=float, default=None, help="open loop: requests per second offered")
    p.add_argument("--content-type", default="application/json",
                   help="anything but JSON: each line of --bodies is the body in base64")
    args = p.parse_args(argv)
    with open(args.bodies, "rb") as f:
        bodies = [line.rstrip(b"\n") for line in f if line.strip()]
    if args.content_type != "application/json":
        bodies = [base64.b64decode(b) for b in bodies]
    headers = dict(h.split(":", 1) for h in args.header)
    try:
        out = asyncio.run(run_load(args.url, bodies, args.concurrency, headers, args.rate, args.content_type))
    except ValueError as exc:
        print(f"loadgen: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
