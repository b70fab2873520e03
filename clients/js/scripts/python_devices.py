"""Python devices for the browser round's comparison (scripts/browser-round.mjs).

A job on stdin: {"server": url, "shuffler": url or null, "pin": "sha256:...",
"round": id, "points": [[...], ...], "tokens": [...] or null}; each point is
one Python ``Device`` (its own ledger file, OS randomness) taking part; prints
the number of devices that took part and the seconds it took. Eight devices
take part at a time, as the browser page's eight workers do, over one shared
HTTP connection pool (a device's key material, ledger and randomness stay its
own; the pool is transport only).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from shoal.client.device import Device


def main() -> None:
    job = json.loads(sys.stdin.read())
    t0 = time.perf_counter()
    tokens = job.get("tokens") or [None] * len(job["points"])
    with tempfile.TemporaryDirectory() as tmp, httpx.Client(timeout=30, limits=httpx.Limits(max_connections=8)) as http:

        def one(i: int) -> None:
            device = Device(job["server"], Path(tmp) / f"ledger-{i}.json", server_key=job["pin"], client=http,
                            shuffler_url=job.get("shuffler"), device_token=tokens[i])
            device.participate(job["round"], job["points"][i])

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(one, range(len(job["points"]))))
    print(json.dumps({"devices": len(job["points"]), "seconds": time.perf_counter() - t0}))


if __name__ == "__main__":
    main()
