"""Store-level soak (issue 44, Build 3): the SQLite store alone, driven as the server drives it.

Singles at 200/s (one report each, 32 in flight) and groups of 1,000 at
2/s go through one GroupCommit writer (as the server's batches do) into a
round prefilled with PREFILL rows; each commit's latency is counted from
its due time. The store's lock is replaced by one that records how long
each thread held it: request commits ("commit"), the locked TRUNCATE
checkpoint ("sqlite-checkpoint") and merge slices ("sqlite-merge"). Before
issue 44 the inbox merge ran inside a request's commit, so it shows there
as a long "commit".

    python tests/bench/store_soak.py SECONDS PREFILL
    # another checkout as ``shoal`` (e.g. a worktree of an older commit at /tmp/before):
    mkdir /tmp/before_pkg && ln -s /tmp/before /tmp/before_pkg/shoal
    PYTHONPATH=/tmp/before_pkg python tests/bench/store_soak.py 90 1000000
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from shoal.client.encoder import encode_arrays
from shoal.common.kinds.tree import config_to_dict, derive_config
from shoal.common.services.group_commit import GroupCommit
from shoal.common.wire.fields import new_message_id
from shoal.server.storage import sqlite as sq
from shoal.server.storage.store import packed_reports

WINDOW = 15.0


class TimedLock:
    """A lock that records (acquired at, seconds held, thread name) of every hold."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.holds: list[tuple[float, float, str]] = []
        self.since = 0.0

    def acquire(self, *args: Any) -> bool:
        got = self.lock.acquire(*args)
        self.since = time.perf_counter()
        return got

    def release(self) -> None:
        self.holds.append((self.since, time.perf_counter() - self.since, threading.current_thread().name))
        self.lock.release()

    def __enter__(self) -> None:
        self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def main(seconds: float, prefill: int) -> None:
    store = sq.SQLiteStore(os.path.join(tempfile.mkdtemp(), "s.db"))
    lock = TimedLock()
    store._lock = lock  # type: ignore[assignment]
    cfg = derive_config(10**6, 2, 8, 4.0, encoder="nettree")
    store.create_round("r", config_to_dict(cfg))
    big = encode_arrays(np.random.default_rng(0).uniform(-0.5, 0.5, (65536, 2)), cfg)
    for _ in range(prefill // 65536):
        store.add_packed_groups([packed_reports("r", [new_message_id() for _ in range(65536)], big)])
    print(f"prefilled {store.count_reports('r')} rows; {sq.__file__}", flush=True)
    lock.holds.clear()
    commits = GroupCommit(store.add_packed_groups, name="commit")
    latency: dict[str, list[tuple[float, float]]] = {"single": [], "batch": []}
    t0 = time.perf_counter() + 0.2

    def stream(name: str, rate: float, rows: Any, in_flight: int) -> None:
        def request(i: int) -> None:
            due = t0 + i / rate
            wait = due - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            commits.submit(packed_reports("r", [new_message_id() for _ in range(len(rows))], rows)).result()
            latency[name].append((due - t0, time.perf_counter() - due))

        with ThreadPoolExecutor(in_flight) as pool:
            list(pool.map(request, range(int(seconds * rate))))

    threads = [threading.Thread(target=stream, args=("single", 200.0, big.select(slice(0, 1)), 32)),
               threading.Thread(target=stream, args=("batch", 2.0, big.select(slice(0, 1000)), 4))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for w in range(int(seconds // WINDOW)):
        lo, hi = w * WINDOW, (w + 1) * WINDOW
        row = []
        for name in ("single", "batch"):
            x = np.array([lat for due, lat in latency[name] if lo <= due < hi]) * 1000
            row.append(f"{name} p50 {np.percentile(x, 50):.1f} p99 {np.percentile(x, 99):.1f} max {x.max():.1f}")
        holds: dict[str, list[float]] = {}
        for at, held, who in lock.holds:
            if lo <= at - t0 < hi:
                holds.setdefault(who if who.startswith("sqlite") else who.split("-")[0], []).append(held * 1000)
        row.append(" ".join(f"{k}:n={len(v)},max={max(v):.0f}ms" for k, v in sorted(holds.items())))
        print(f"{lo:4.0f}s", " | ".join(row), flush=True)
    print("rows", store.count_reports("r"))


if __name__ == "__main__":
    main(float(sys.argv[1]), int(sys.argv[2]))
