"""Issue 13: a full disk is a 503 with Retry-After, nothing half-written, and
the connection stays usable. The server runs with a file-size limit
(RLIMIT_FSIZE: writes past it fail with EFBIG, as on a full filesystem; no
root or loop device needed)."""

import os
import resource
import subprocess
import sys

import httpx
import numpy as np
from tests_helpers import free_port, wait_healthy

from shoal.client.encoder import encode_arrays
from shoal.common.kinds.tree import config_from_dict


def _spawn_limited(env, port, db, limit_bytes):
    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    return subprocess.Popen([sys.executable, "-m", "shoal.common.cli", "server", "--port", str(port), "--db", db],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=limit)


def test_a_full_disk_is_a_503_and_loses_nothing_acknowledged(server, tmp_path):
    server.kill()
    port = free_port()
    proc = _spawn_limited(server.env, port, server.db, 1_500_000)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc)
        r = httpx.post(url + "/rounds", json={"k": 2, "dim": 4, "epsilon": 2.0, "n_expected": 10**5},
                       headers=server.op_headers())
        rid = r.json()["id"]
        cfg = config_from_dict(r.json()["config"])
        # 80k reports (~4.8 MB stored) outgrow the limit even split between the
        # database and its WAL (each file up to 1.5 MB: checkpoints run under load)
        msgs = [m.model_dump_json() for m in
                encode_arrays(np.random.default_rng(0).uniform(-0.5, 0.5, (80_000, 4)), cfg).to_messages()]
        acked, statuses = 0, []
        with httpx.Client(timeout=30) as c:
            for lo in range(0, len(msgs), 1000):
                body = '{"messages": [' + ",".join(msgs[lo:lo + 1000]) + "]}"
                r = c.post(url + f"/rounds/{rid}/reports/batch", content=body.encode(),
                           headers={"content-type": "application/json"})
                statuses.append(r.status_code)
                if r.status_code == 202:
                    acked += 1000
                else:
                    assert r.status_code == 503, r.text
                    assert r.headers["Retry-After"].isdigit() and "storage unavailable" in r.json()["detail"]
                    # the same connection still answers
                    assert c.get(url + "/healthz").status_code == 200
                    assert c.get(url + f"/rounds/{rid}").status_code in (200, 503)
                    break
        assert 503 in statuses and acked > 0
    finally:
        proc.kill()
        proc.wait()
    server.start()  # no limit: everything acknowledged is there, nothing else
    assert httpx.get(server.url + f"/rounds/{rid}").json()["reports"] == acked
    assert os.path.getsize(server.db[len("sqlite:///"):]) > 0
