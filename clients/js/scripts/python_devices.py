"""Python devices for the browser round's comparison (scripts/browser-round.mjs).

A job on stdin: {"server": url, "shuffler": url or null, "pin": "sha256:...",
"round": id, "points": [[...], ...], "tokens": [...] or null}; each point is
one Python ``Device`` (its own ledger file, OS randomness) taking part; prints
the number of devices that took part and the seconds it took.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from shoal.client.device import Device


def main() -> None:
    job = json.loads(sys.stdin.read())
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for i, point in enumerate(job["points"]):
            device = Device(job["server"], Path(tmp) / f"ledger-{i}.json", server_key=job["pin"],
                            shuffler_url=job.get("shuffler"), device_token=(job.get("tokens") or [None] * (i + 1))[i])
            device.participate(job["round"], point)
    print(json.dumps({"devices": len(job["points"]), "seconds": time.perf_counter() - t0}))


if __name__ == "__main__":
    main()
