"""Reliability benchmark (issue 13): load held, faults survived, floods
bounded, measured on real processes over loopback. Prints a Markdown table
with how it was run; ``--smoke`` is a small run for CI.

    python tests/bench/reliability.py --reports 1000000 --out tests/bench/results/reliability.md

Measures:
- steady batch load (lsh, d=100, k=8; 1000 reports per request, 4
  connections; 20,000 encoded reports streamed under fresh message ids): throughput, latency p50/p99, the SQLite WAL's largest size
  (sampled every 0.1 s), the database size per stored report, server RSS;
- single reports at an open-loop 1000/s (50 connections): p50/p99;
- SIGKILLs of the server during ingest (acknowledged = stored, no duplicate),
  during decode (the round comes back ``closed`` and clusters again), and of
  the shuffler while it forwards (every acknowledged message reaches the
  server exactly once);
- floods: four concurrent 60 MB batches at the server (and four of 15 MB,
  just under its default 16 MiB body limit), a 200 MiB body and 2,000
  junk rounds at the shuffler: every status, and each service's peak RSS.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import numpy as np

from shoal.client.encoder import encode_arrays
from shoal.common.kinds.tree import config_from_dict
from shoal.deploy.bench.results import machine
from shoal.deploy.simulation.processes import Services

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests_helpers import send_until_killed, stored_message_ids  # noqa: E402


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class Sampler:
    """Every 0.1 s: the WAL's size and the process's RSS; keeps the maxima."""

    def __init__(self, db: Path, pid: int) -> None:
        self.db, self.pid, self.wal_max, self.rss_max = db, pid, 0, 0.0
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            wal = Path(str(self.db) + "-wal")
            self.wal_max = max(self.wal_max, wal.stat().st_size if wal.exists() else 0)
            try:
                self.rss_max = max(self.rss_max, rss_mb(self.pid))
            except OSError:
                pass

    def stop(self) -> None:
        self._stop.set()
        self.thread.join()


def _round(s: Services, n: int, dim: int = 100) -> tuple[str, object]:
    op = {"Authorization": f"Bearer {s.env['SHOAL_OPERATOR_TOKEN']}"}
    r = httpx.post(s.server_url + "/rounds", json={"k": 8, "dim": dim, "epsilon": 4.0, "n_expected": n}, headers=op,
                   timeout=30)
    r.raise_for_status()
    return r.json()["id"], config_from_dict(r.json()["config"])


def _messages(n: int, cfg: object, seed: int, dim: int = 100) -> list[str]:
    rng = np.random.default_rng(seed)
    out: list[str] = []
    for lo in range(0, n, 100_000):
        pts = rng.normal(0, 0.3, (min(100_000, n - lo), dim)) / np.sqrt(dim)
        out += [m.model_dump_json() for m in encode_arrays(pts, cfg).to_messages()]
    return out


def _loadgen(url: str, bodies: list[str], concurrency: int, tmp: Path, rate: float | None = None) -> dict:
    path = tmp / "bodies.jsonl"
    path.write_text("\n".join(bodies) + "\n")
    extra = ["--rate", str(rate)] if rate else []
    out = subprocess.run([sys.executable, "-m", "shoal.deploy.bench.loadgen", "--url", url, "--bodies", str(path),
                          "--concurrency", str(concurrency), *extra], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def steady_load(s: Services, reports: int, tmp: Path) -> dict:
    rid, cfg = _round(s, reports)
    db = Path(s.tmp.name) / "server.db"
    sampler = Sampler(db, s.procs[0].pid)
    sent = 0
    res: dict = {"statuses": Counter(), "seconds": 0.0, "p50": [], "p99": []}
    # Encoding is the device's cost (the codebook draws 1024 candidates of d
    # normals per report), far above the server's per-report cost: 20,000
    # real reports are encoded once and streamed again under fresh message
    # ids (the only field the store deduplicates on; rows have the same size).
    pool = _messages(min(20_000, reports), cfg, seed=1)
    rng = np.random.default_rng(2)
    for lo in range(0, reports, 200_000):
        n = min(200_000, reports - lo)
        msgs = [pool[i % len(pool)].replace(pool[i % len(pool)][pool[i % len(pool)].index('"message_id":"') + 14:][:32],
                                            f"{rng.integers(0, 2**63):016x}{rng.integers(0, 2**63):016x}")
                for i in range(n)]
        bodies = ['{"messages":[' + ",".join(msgs[i:i + 1000]) + "]}" for i in range(0, len(msgs), 1000)]
        r = _loadgen(f"{s.server_url}/rounds/{rid}/reports/batch", bodies, 4, tmp)
        res["statuses"].update(r["statuses"])
        res["seconds"] += r["seconds"]
        res["p50"].append(r["latency_ms"]["p50"])
        res["p99"].append(r["latency_ms"]["p99"])
        sent += len(msgs)
    time.sleep(2.0)
    sampler.stop()
    stored = int(httpx.get(f"{s.server_url}/rounds/{rid}", timeout=60).json()["reports"])
    wal_after = Path(str(db) + "-wal").stat().st_size if Path(str(db) + "-wal").exists() else 0
    return {"reports": sent, "stored": stored, "statuses": dict(res["statuses"]), "seconds": res["seconds"],
            "reports_per_second": sent / res["seconds"], "p50_ms": float(np.median(res["p50"])),
            "p99_ms": float(max(res["p99"])), "wal_max_mb": sampler.wal_max / 2**20,
            "wal_after_mb": wal_after / 2**20, "db_mb": db.stat().st_size / 2**20,
            "bytes_per_report": db.stat().st_size / max(stored, 1), "server_rss_max_mb": sampler.rss_max}


def singles(s: Services, n: int, tmp: Path) -> dict:
    rid, cfg = _round(s, n)
    r = _loadgen(f"{s.server_url}/rounds/{rid}/reports", _messages(n, cfg, seed=7), 50, tmp, rate=1000.0)
    return {"reports": n, "statuses": r["statuses"], "p50_ms": r["latency_ms"]["p50"], "p99_ms": r["latency_ms"]["p99"]}


def _restart(s: Services) -> None:
    p = s.procs[0]
    s.procs[0] = subprocess.Popen(p.args, env=s.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    from shoal.deploy.simulation.processes import wait_healthy

    wait_healthy(s.server_url, s.procs[0])


def kills_during_ingest(s: Services, kills: int) -> dict:
    acked_total = duplicates = missing = 0
    db = Path(s.tmp.name) / "server.db"
    for k in range(kills):
        rid, cfg = _round(s, 5000, dim=4)
        msgs = _messages(4000, cfg, seed=100 + k, dim=4)

        def kill() -> None:
            s.procs[0].kill()
            s.procs[0].wait()

        def post(c: httpx.Client, i: int, rid: str = rid, msgs: list[str] = msgs) -> httpx.Response:
            return c.post(f"{s.server_url}/rounds/{rid}/reports", content=msgs[i].encode(),
                          headers={"content-type": "application/json"})

        acked = send_until_killed(len(msgs), post, kill, after=0.5 + 0.3 * k)
        _restart(s)
        ids = stored_message_ids(f"sqlite:///{db}", rid)
        acked_ids = {json.loads(msgs[i])["message_id"] for i in acked}
        acked_total += len(acked)
        missing += len(acked_ids - set(ids))
        duplicates += len(ids) - len(set(ids))
    return {"kills": kills, "acknowledged": acked_total, "missing": missing, "duplicates": duplicates}


def kills_during_decode(s: Services, kills: int) -> dict:
    op = {"Authorization": f"Bearer {s.env['SHOAL_OPERATOR_TOKEN']}"}
    stranded = recovered = 0
    for k in range(kills):
        rid, cfg = _round(s, 60_000, dim=8)
        msgs = _messages(60_000, cfg, seed=200 + k, dim=8)
        with httpx.Client(timeout=60) as c:
            for lo in range(0, len(msgs), 5000):
                c.post(f"{s.server_url}/rounds/{rid}/reports/batch", content=('{"messages":[' + ",".join(
                    msgs[lo:lo + 5000]) + "]}").encode(), headers={"content-type": "application/json"})
        t = threading.Thread(target=_quiet_post, args=(f"{s.server_url}/rounds/{rid}/cluster", op))
        t.start()
        while httpx.get(f"{s.server_url}/rounds/{rid}").json()["state"] != "decoding":
            time.sleep(0.01)
        time.sleep(0.2 * k)
        s.procs[0].kill()
        s.procs[0].wait()
        t.join()
        _restart(s)
        state = httpx.get(f"{s.server_url}/rounds/{rid}").json()["state"]
        stranded += state == "decoding"
        r = httpx.post(f"{s.server_url}/rounds/{rid}/cluster", headers=op, timeout=120)
        recovered += r.status_code == 200
    return {"kills": kills, "stranded": stranded, "clustered_after_restart": recovered}


def kills_during_forward(s: Services, kills: int) -> dict:
    """Devices post sealed messages to the shuffler (min batch 100) while it
    forwards; SIGKILL it, restart it on the same buffer, ``kills`` times; a
    last restart at min batch 1 releases the remainder. Every message the
    shuffler acknowledged must reach the server exactly once."""
    import base64

    from shoal.common.wire.envelope import seal
    from shoal.common.wire.signing import config_digest

    assert s.shuffler_url
    op = {"Authorization": f"Bearer {s.env['SHOAL_OPERATOR_TOKEN']}"}
    rnd = httpx.post(s.server_url + "/rounds", json={"k": 2, "dim": 4, "epsilon": 2.0, "n_expected": 10_000},
                     headers=op, timeout=30).json()
    rid, cfg = rnd["id"], config_from_dict(rnd["config"])
    key = base64.b64decode(rnd["server_public_key"])
    digest = config_digest(rnd["config"], rnd["server_public_key"])
    per_kill = 1500
    msgs = encode_arrays(np.random.default_rng(5).uniform(-0.5, 0.5, (per_kill * kills, 4)), cfg).to_messages()
    sealed = [base64.b64encode(seal(m.model_dump_json().encode(), key, rid)).decode() for m in msgs]
    tokens = httpx.post(s.shuffler_url + "/enrol", json={"count": len(msgs)}, timeout=60,
                        headers={"Authorization": f"Bearer {s.env['SHOAL_ENROL_TOKEN']}"}).json()["tokens"]
    acked_ids: set[str] = set()
    argv = list(s.procs[1].args)
    for k in range(kills):
        lo = k * per_kill

        def post(c: httpx.Client, i: int, lo: int = lo) -> httpx.Response:
            return c.post(f"{s.shuffler_url}/rounds/{rid}/messages", headers={"X-Device-Token": tokens[lo + i]},
                          json={"sealed": sealed[lo + i], "config_digest": digest})

        def kill() -> None:
            s.procs[1].kill()
            s.procs[1].wait()

        acked = send_until_killed(per_kill, post, kill, after=0.5 + 0.2 * k)
        acked_ids |= {msgs[lo + i].message_id for i in acked}
        if k == kills - 1:  # the last restart releases whatever is left
            argv[argv.index("--min-batch") + 1] = "1"
        s.procs[1] = subprocess.Popen(argv, env=s.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        from shoal.deploy.simulation.processes import wait_healthy

        wait_healthy(s.shuffler_url, s.procs[1])
    end = time.time() + 60
    db = f"sqlite:///{Path(s.tmp.name) / 'server.db'}"
    while time.time() < end and not acked_ids <= set(stored_message_ids(db, rid)):
        time.sleep(0.2)
    stored = stored_message_ids(db, rid)
    return {"kills": kills, "acknowledged": len(acked_ids), "missing": len(acked_ids - set(stored)),
            "duplicates": len(stored) - len(set(stored))}


def _quiet_post(url: str, headers: dict) -> None:
    try:
        httpx.post(url, headers=headers, timeout=120)
    except httpx.HTTPError:
        pass


def floods(s: Services, big_mb: int) -> dict:
    rid, cfg = _round(s, 1000, dim=4)
    one = _messages(1, cfg, seed=9, dim=4)[0]
    body = ('{"messages":[' + ",".join([one] * (big_mb * 2**20 // len(one))) + "]}").encode()
    statuses: Counter = Counter()
    peak = [0.0]
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.05):
            peak[0] = max(peak[0], rss_mb(s.procs[0].pid))

    w = threading.Thread(target=watch)
    w.start()
    base = rss_mb(s.procs[0].pid)

    def send() -> None:
        try:
            r = httpx.post(f"{s.server_url}/rounds/{rid}/reports/batch", content=body,
                           headers={"content-type": "application/json"}, timeout=120)
            statuses[r.status_code] += 1
        except httpx.HTTPError as exc:
            statuses[type(exc).__name__] += 1

    threads = [threading.Thread(target=send) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    w.join()
    out = {"server_batches": f"4 x {len(body) / 2**20:.0f} MB", "server_statuses": dict(statuses),
           "server_rss_before_mb": base, "server_rss_peak_mb": peak[0]}
    return out


def shuffler_floods(s: Services) -> dict:
    assert s.shuffler_url
    pid = s.procs[1].pid
    base = rss_mb(pid)
    statuses: Counter = Counter()
    huge = b"x" * (200 << 20)
    r = httpx.post(f"{s.shuffler_url}/rounds/abc/messages", content=huge,
                   headers={"content-type": "application/json", "X-Device-Token": "t" * 32}, timeout=120)
    statuses[f"200MiB:{r.status_code}"] += 1
    body = {"sealed": "QUJDRA==", "config_digest": "0" * 64}
    with httpx.Client(timeout=30) as c:
        for i in range(2000):
            r = c.post(f"{s.shuffler_url}/rounds/junk{i}/messages", json=body, headers={"X-Device-Token": "t" * 32})
            statuses[f"junk:{r.status_code}"] += 1
    db = Path(s.tmp.name) / "shuffler.db"
    return {"shuffler_statuses": dict(statuses), "shuffler_rss_before_mb": base, "shuffler_rss_after_mb": rss_mb(pid),
            "shuffler_db_mb": db.stat().st_size / 2**20 if db.exists() else 0.0}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reports", type=int, default=1_000_000)
    ap.add_argument("--singles", type=int, default=20_000)
    ap.add_argument("--kills", type=int, default=5)
    ap.add_argument("--flood-mb", type=int, default=60)
    ap.add_argument("--smoke", action="store_true", help="small sizes (CI)")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--only", choices=["steady", "forward"], default=None, help="run only one part")
    args = ap.parse_args()
    if args.smoke:
        args.reports, args.singles, args.kills = 20_000, 2000, 1
    rows: dict = {"machine": machine(), "args": {k: str(v) for k, v in vars(args).items()}}
    with tempfile.TemporaryDirectory() as tmpname:
        tmp = Path(tmpname)
        s = Services(via_shuffler=True, min_batch=100)
        try:
            if args.only == "forward":
                rows["forward_kills"] = kills_during_forward(s, args.kills)
                print(json.dumps(rows, indent=1))
                return 0
            rows["steady"] = steady_load(s, args.reports, tmp)
            if args.only == "steady":
                print(json.dumps(rows, indent=1))
                return 0
            rows["singles"] = singles(s, args.singles, tmp)
            rows["floods"] = floods(s, args.flood_mb)
            rows["floods_at_limit"] = floods(s, 15)  # just under the default 16 MiB body limit
            rows["shuffler"] = shuffler_floods(s)
            rows["ingest_kills"] = kills_during_ingest(s, args.kills)
            rows["decode_kills"] = kills_during_decode(s, max(1, args.kills // 2))
            rows["forward_kills"] = kills_during_forward(s, args.kills)
        finally:
            s.close()
    text = "```\n" + json.dumps(rows, indent=1) + "\n```\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    problems = []
    st, ik, dk = rows["steady"], rows["ingest_kills"], rows["decode_kills"]
    if st["stored"] != st["reports"]:
        problems.append(f"steady load stored {st['stored']} of {st['reports']}")
    if ik["missing"] or ik["duplicates"]:
        problems.append(f"ingest kills: {ik}")
    if dk["stranded"] or dk["clustered_after_restart"] != dk["kills"]:
        problems.append(f"decode kills: {dk}")
    fk = rows["forward_kills"]
    if fk["missing"] or fk["duplicates"]:
        problems.append(f"forward kills: {fk}")
    for key in ("floods", "floods_at_limit"):
        if any(str(k).startswith("5") and str(k) != "503" for k in rows[key]["server_statuses"]):
            problems.append(f"{key}: {rows[key]}")
    for p in problems:
        print("reliability bench:", p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
