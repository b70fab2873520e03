"""Many simulated devices' POSTs to loopback services (``shoal sim``, the continual sim).

Each device is one request (the sim measures the services, not a gateway),
sent with bounded concurrency over keep-alive connections, retried with
backoff on connection errors and 5xx, counted as failed after six tries.

aiohttp rather than httpx here: measured on this 2-core machine against
``shoal server``'s /health with 25 concurrent requests, httpx's AsyncClient
spent 4.2-4.5 ms of client CPU a request (~230 requests/s from one
process), aiohttp 0.32-0.34 ms (1,500-2,200/s, the server's own limit):
with httpx the load generator, not the server, was what a sim measured,
and it needed several processes. Devices (``client/device.py``) keep
httpx: one request per round, where its size and sync API matter more.

A module of its own, importing of shoal only the progress bar: the worker
processes are started with ``spawn`` and import only this to run (0.33 s,
mostly aiohttp), not the server that ``sim.py`` imports.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import time
from typing import Any

import aiohttp

from shoal.deploy.simulation.progress import bar

TRIES = 6
FIRST_DELAY = 0.05  # seconds before the first retry, doubled after each


async def send_all(bodies: list[bytes], url_for: list[str], headers: list[dict[str, str]], concurrency: int,
                   sent: Any) -> int:
    """POST ``bodies[i]`` to ``url_for[i]``; returns how many devices gave up.
    ``sent`` (a ``multiprocessing.Value``) counts devices done, for progress."""
    sem = asyncio.Semaphore(concurrency)
    failures = 0
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=60)) as session:

        async def one(i: int) -> None:
            nonlocal failures
            async with sem:
                delay = FIRST_DELAY
                for _ in range(TRIES):
                    try:
                        async with session.post(url_for[i], data=bodies[i], headers=headers[i]) as r:
                            await r.read()
                            if r.status < 500:
                                break
                    except (aiohttp.ClientError, asyncio.TimeoutError):
                        pass
                    await asyncio.sleep(delay)
                    delay *= 2
                else:
                    failures += 1
                with sent.get_lock():
                    sent.value += 1

        await asyncio.gather(*(one(i) for i in range(len(bodies))))
    return failures


def _worker(bodies: list[bytes], url_for: list[str], headers: list[dict[str, str]], concurrency: int,
            sent: Any, failures: Any) -> None:
    n = asyncio.run(send_all(bodies, url_for, headers, concurrency, sent))
    with failures.get_lock():
        failures.value += n


def send_devices(bodies: list[bytes], url_for: list[str], headers: list[dict[str, str]], concurrency: int,
                 workers: int, progress: bool) -> int:
    """Every device's POST from ``workers`` processes sharing ``concurrency``
    (one process is enough up to the server's rate; more spread the client's
    CPU). Returns how many devices gave up."""
    ctx = mp.get_context("spawn")
    sent, failures = ctx.Value("i", 0), ctx.Value("i", 0)
    procs = []
    for w in range(workers):
        sl = slice(w, None, workers)
        procs.append(ctx.Process(target=_worker, args=(bodies[sl], url_for[sl], headers[sl],
                                                       max(1, concurrency // workers), sent, failures)))
        procs[-1].start()
    shown = bar(len(bodies), "devices sent", unit="device") if progress else None
    while any(p.is_alive() for p in procs):
        time.sleep(0.1)
        if shown is not None:
            shown.update(sent.value - shown.n)
    if shown is not None:
        shown.update(sent.value - shown.n)
        shown.close()
    if any(p.exitcode for p in procs):
        raise RuntimeError(f"a device worker process failed: exit codes {[p.exitcode for p in procs]}")
    return int(failures.value)
