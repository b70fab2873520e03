"""Helpers for the shuffler suites: a pinned shuffler process, sealed messages
with their config digest, and polling the shuffler's buffer."""

import base64
import sqlite3
import subprocess
import sys
import time

import httpx
import numpy as np
from tests_helpers import wait_healthy

from shoal.client.encoder import encode_arrays
from shoal.common.kinds.tree import config_from_dict
from shoal.common.wire.envelope import seal
from shoal.common.wire.signing import config_digest


def _spawn_shuffler(server, db, port, min_batch, server_url=None):
    """A shuffler pinned to the server's identity (read here as an operator would, out of band)."""
    pin = httpx.get(server.url + "/server-key").json()["fingerprint"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "shoal.common.cli", "shuffler", "--server-url", server_url or server.url,
         "--port", str(port), "--min-batch", str(min_batch), "--db", db, "--server-key", pin],
        env=dict(server.env), stdout=open(db + ".log", "ab"), stderr=subprocess.STDOUT,  # noqa: SIM115 -- the child holds it
    )
    wait_healthy(f"http://127.0.0.1:{port}", proc)
    return proc


class Sealed(list):
    """Sealed messages of one round as shuffler request bodies (with the config digest)."""

    def __init__(self, items, digest):
        super().__init__(items)
        self.digest = digest

    def body(self, i):
        return {"sealed": self[i], "config_digest": self.digest}


def _sealed_messages(server, n, with_ids=False, min_batch=None):
    body = {"k": 2, "dim": 3, "epsilon": 2.0, "n_expected": 1000}
    if min_batch:
        body |= {"model": "shuffle", "delta": 1e-6, "min_batch": min_batch}
    rnd = httpx.post(server.url + "/rounds", json=body, headers=server.op_headers()).json()
    cfg = config_from_dict(rnd["config"])
    key = base64.b64decode(rnd["server_public_key"])
    msgs = encode_arrays(np.random.default_rng(0).uniform(-0.5, 0.5, (n, 3)), cfg).to_messages()
    sealed = Sealed([base64.b64encode(seal(m.model_dump_json().encode(), key, rnd["id"])).decode() for m in msgs],
                    config_digest(rnd["config"], rnd["server_public_key"]))
    if with_ids:
        return rnd["id"], sealed, [m.message_id for m in msgs]
    return rnd["id"], sealed


def _wait_until(check, seconds=10.0):
    end = time.time() + seconds
    while time.time() < end:
        if check():
            return True
        time.sleep(0.05)
    return False


def _reports(server, rid):
    return httpx.get(server.url + f"/rounds/{rid}").json()["reports"]


def _wait_reports(server, rid, n, seconds=10.0):
    return _wait_until(lambda: _reports(server, rid) >= n, seconds)


def _buffered(db):
    """Messages in the shuffler's buffer (pending, or in a formed batch not yet acknowledged)."""
    con = sqlite3.connect(db)
    return sum(con.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("pending", "formed"))


def enrolled(shuffler_url, server, n):
    """``n`` device tokens issued by the shuffler's operator (POST /enrol)."""
    r = httpx.post(shuffler_url.split("/rounds/")[0] + "/enrol", json={"count": n},
                   headers={"Authorization": f"Bearer {server.env['SHOAL_ENROL_TOKEN']}"})
    assert r.status_code == 201, r.text
    return r.json()["tokens"]
