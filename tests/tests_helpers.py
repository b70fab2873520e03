"""Helpers shared by test modules (importable: tests/ is on sys.path)."""

import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from shoal.deploy.bench.scratch_schema import PG_URL, scratch_schema
from shoal.deploy.simulation.processes import free_port, wait_healthy

__all__ = ["PG_URL", "free_port", "pg_schema", "run_schemathesis", "send_until_killed", "spawn_server",
           "stored_message_ids", "wait_healthy"]

@contextmanager
def pg_schema() -> Iterator[str]:
    """A fresh schema on the real PostgreSQL (dropped afterwards); yields a URL
    whose search_path is that schema. Skips the test, with the reason, when
    the server is not reachable."""
    with scratch_schema(PG_URL) as url:
        if url is None:
            pytest.skip(f"PostgreSQL not reachable at {PG_URL}")
        yield url


def spawn_server(env: dict[str, str], port: int, db: str) -> subprocess.Popen[bytes]:
    """``shoal server`` on 127.0.0.1:``port`` with store ``db``, quiet."""
    return subprocess.Popen(
        [sys.executable, "-m", "shoal.common.cli", "server", "--port", str(port), "--db", db],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )


def send_until_killed(count: int, post: Callable[[httpx.Client, int], httpx.Response], kill: Callable[[], None],
                      threads: int = 8, after: float = 1.0) -> set[int]:
    """Devices 0..count-1 POST concurrently (``post(client, i)``); ``kill`` runs
    after ``after`` seconds. Returns the devices whose message was acknowledged
    (202); a device thread stops at its first transport error."""
    acked: set[int] = set()
    lock = threading.Lock()

    def device(indices: Sequence[int]) -> None:
        with httpx.Client(timeout=5) as c:
            for i in indices:
                try:
                    r = post(c, i)
                except httpx.HTTPError:
                    return
                if r.status_code == 202:
                    with lock:
                        acked.add(i)

    workers = [threading.Thread(target=device, args=(range(t, count, threads),)) for t in range(threads)]
    for w in workers:
        w.start()
    stop = threading.Event()
    stop.wait(after)
    kill()  # SIGKILL while devices are sending
    for w in workers:
        w.join()
    return acked


SCHEMATHESIS_EXAMPLES = int(os.environ.get("SHOAL_SCHEMATHESIS_EXAMPLES", "12"))


def run_schemathesis(url: str, header: str | None) -> tuple[int, str]:
    exe = Path(sys.executable).parent / "schemathesis"
    if not exe.exists():
        pytest.skip("schemathesis is not installed (it is in the dev extra)")
    cmd = [str(exe), "run", url + "/openapi.json", "--checks", "not_a_server_error,response_schema_conformance",
           "--max-examples", str(SCHEMATHESIS_EXAMPLES), "--seed", "13", "--suppress-health-check", "all"]
    if header:
        cmd += ["-H", header]
    import tempfile

    with tempfile.TemporaryDirectory() as cwd:  # its example cache stays out of the checkout
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=cwd)
    return out.returncode, out.stdout + out.stderr


def stored_message_ids(db_url: str, round_id: str) -> list[str]:
    """The message ids a server's SQLite store holds for a round, read from
    the file directly (as an auditor would: both tables rows sit in, the
    inbox and ``report_rows``), duplicates included."""
    import sqlite3

    con = sqlite3.connect(db_url.removeprefix("sqlite:///"))
    try:
        rows = con.execute("SELECT hex(r.message_id) FROM (SELECT round_seq, message_id FROM report_rows UNION ALL "
                           "SELECT round_seq, message_id FROM report_inbox) r JOIN rounds o ON o.seq = r.round_seq "
                           "WHERE o.id = ?", (round_id,)).fetchall()
    finally:
        con.close()
    return [str(r[0]).lower() for r in rows]


def done_tree_round(server, points, **body_changes) -> tuple[str, dict]:
    """A local lsh tree round (k=3) of ``points``' devices, reported and clustered
    over the server's socket: its id and result (refine rounds open on it).
    ``body_changes`` replace fields of the POST /rounds body."""
    from shoal.client.encoder import encode_arrays
    from shoal.common.kinds.tree import config_from_dict

    body = {"k": 3, "dim": points.shape[1], "epsilon": 8.0, "n_expected": points.shape[0], "encoder": "lsh"}
    body.update(body_changes)
    rnd = httpx.post(server.url + "/rounds", json=body, headers=server.op_headers()).json()
    cfg = config_from_dict(rnd["config"])
    msgs = [m.model_dump(mode="json") for m in encode_arrays(points, cfg).to_messages()]
    for lo in range(0, len(msgs), 5000):
        assert httpx.post(server.url + f"/rounds/{rnd['id']}/reports/batch", json={"messages": msgs[lo:lo + 5000]},
                          timeout=60).status_code == 202
    r = httpx.post(server.url + f"/rounds/{rnd['id']}/cluster", headers=server.op_headers(), timeout=120)
    assert r.status_code == 200, r.text
    return rnd["id"], r.json()


def send_shares(server, round_json, points, seed=0) -> None:
    """A secure-sum round's shares of ``points``' devices (each device's contribution
    by the round kind's device half), sealed and posted as the shuffler forwards them."""
    import base64

    import numpy as np

    from shoal.client.kinds import device_kind
    from shoal.common.kinds import kind_name, parse_config
    from shoal.common.mechanisms.secure_sum import encode_devices
    from shoal.common.wire.messages import sealed_share_parts

    cfg = parse_config(round_json["config"])
    contributions = device_kind(kind_name(round_json["config"])).contributions
    shares = encode_devices(contributions(points, cfg), cfg.secure_sum, np.random.default_rng(seed))
    key = base64.b64decode(round_json["server_public_key"])
    sealed = [p for parts in sealed_share_parts(shares, key, round_json["id"]) for p in parts]
    sealed = [sealed[i] for i in np.random.default_rng(seed + 1).permutation(len(sealed))]
    for lo in range(0, len(sealed), 5000):
        assert httpx.post(server.url + f"/rounds/{round_json['id']}/shuffled", json={"sealed": sealed[lo:lo + 5000]},
                          headers={"Authorization": f"Bearer {server.shuffler}"}, timeout=60).status_code == 202
