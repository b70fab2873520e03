"""Issue 13: a decode holds a lease. A SIGKILL during /cluster used to leave
the round ``decoding`` for ever (/cluster, reports and /close answered 409;
only DELETE got out, throwing the reports away), and DELETE during a decode
answered 204 while the decode went on and still returned a result."""

import threading
import time

import httpx
import numpy as np

from shoal.client.encoder import encode_arrays
from shoal.common.config import config_from_dict


def _round_with_reports(server, n):
    r = httpx.post(server.url + "/rounds", json={"k": 8, "dim": 8, "epsilon": 4.0, "n_expected": n},
                   headers=server.op_headers())
    rid = r.json()["id"]
    cfg = config_from_dict(r.json()["config"])
    msgs = [m.model_dump_json() for m in encode_arrays(np.random.default_rng(0).uniform(-0.5, 0.5, (n, 8)), cfg).to_messages()]
    with httpx.Client(timeout=60) as c:
        for lo in range(0, n, 5000):
            body = '{"messages": [' + ",".join(msgs[lo:lo + 5000]) + "]}"
            assert c.post(server.url + f"/rounds/{rid}/reports/batch", content=body.encode(),
                          headers={"content-type": "application/json"}).status_code == 202
    return rid


def _cluster_in_background(server, rid):
    out = {}

    def run():
        try:
            out["r"] = httpx.post(server.url + f"/rounds/{rid}/cluster", headers=server.op_headers(), timeout=120)
        except httpx.HTTPError as exc:
            out["error"] = exc

    t = threading.Thread(target=run)
    t.start()
    end = time.time() + 30
    while time.time() < end and httpx.get(server.url + f"/rounds/{rid}").json()["state"] != "decoding":
        time.sleep(0.01)
    return t, out


def test_a_round_stranded_by_a_crash_during_cluster_can_be_clustered_again(server):
    rid = _round_with_reports(server, 60_000)
    t, out = _cluster_in_background(server, rid)
    assert httpx.get(server.url + f"/rounds/{rid}").json()["state"] == "decoding"
    server.kill()  # SIGKILL mid-decode
    t.join()
    assert "error" in out
    server.start()
    row = httpx.get(server.url + f"/rounds/{rid}").json()
    assert row["state"] == "closed" and row["reports"] == 60_000
    assert "interrupted" in row["error"]
    r = httpx.post(server.url + f"/rounds/{rid}/cluster", headers=server.op_headers(), timeout=120)
    assert r.status_code == 200, r.text
    assert len(r.json()["centers"]) > 0
    assert httpx.get(server.url + f"/rounds/{rid}").json()["state"] == "done"


def test_delete_during_a_decode_is_refused_and_the_decode_finishes(server):
    rid = _round_with_reports(server, 60_000)
    t, out = _cluster_in_background(server, rid)
    r = httpx.delete(server.url + f"/rounds/{rid}", headers=server.op_headers())
    assert r.status_code == 409 and "decoding" in r.text
    again = httpx.post(server.url + f"/rounds/{rid}/cluster", headers=server.op_headers())
    assert again.status_code == 409 and "already decoding" in again.text
    t.join()
    assert out["r"].status_code == 200
    assert httpx.get(server.url + f"/rounds/{rid}/result").status_code == 200
    assert httpx.delete(server.url + f"/rounds/{rid}", headers=server.op_headers()).status_code == 204
    assert httpx.get(server.url + f"/rounds/{rid}").status_code == 404
