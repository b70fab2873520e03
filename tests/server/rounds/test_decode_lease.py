"""Issue 13: a decode holds a lease. A SIGKILL during /cluster used to leave
the round ``decoding`` for ever (/cluster, reports and /close answered 409;
only DELETE got out, throwing the reports away), and DELETE during a decode
answered 204 while the decode went on and still returned a result."""

import threading
import time

import httpx
import numpy as np

from shoal.client.encoder import encode_arrays
from shoal.common.kinds.tree import config_from_dict


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
    state = ""
    with httpx.Client(timeout=10) as poll:  # one connection: each poll a few ms, against a decode of ~0.2 s
        while time.time() < end and state != "decoding":
            state = poll.get(server.url + f"/rounds/{rid}").json()["state"]
    return t, out, state


def test_a_round_stranded_by_a_crash_during_cluster_can_be_clustered_again(server):
    rid = _round_with_reports(server, 60_000)
    t, out, state = _cluster_in_background(server, rid)
    assert state == "decoding"
    server.kill()  # SIGKILL mid-decode, as soon as it was seen running (a second GET here raced its end)
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


def test_delete_during_a_decode_is_refused_and_the_decode_finishes(tmp_path, monkeypatch):
    """In-process, with the tree decoder held on an event: the decode is
    certainly running while DELETE and a second /cluster arrive (over a real
    socket this raced the decode, which can finish first on a fast machine)."""
    from fastapi.testclient import TestClient

    from shoal.server.edge.app import create_app
    from shoal.server.edge.settings import Settings
    from shoal.server.rounds.kinds import tree

    entered, release = threading.Event(), threading.Event()
    real_decode = tree.KIND.decode

    def held_decode(*args, **kwargs):
        entered.set()
        assert release.wait(60)
        return real_decode(*args, **kwargs)

    monkeypatch.setattr(tree.KIND, "decode", held_decode)
    op = {"Authorization": "Bearer " + "o" * 20}
    app = create_app(Settings(db_url=f"sqlite:///{tmp_path}/s.db", key_path=f"{tmp_path}/k.pem",
                              operator_token="o" * 20, shuffler_token="s" * 20))
    with TestClient(app) as c:
        r = c.post("/rounds", json={"k": 2, "dim": 3, "epsilon": 4.0, "n_expected": 2000}, headers=op)
        rid, cfg = r.json()["id"], config_from_dict(r.json()["config"])
        pts = np.random.default_rng(0).uniform(-0.5, 0.5, (2000, 3))
        msgs = [m.model_dump(mode="json") for m in encode_arrays(pts, cfg).to_messages()]
        assert c.post(f"/rounds/{rid}/reports/batch", json={"messages": msgs}).status_code == 202
        out = {}
        t = threading.Thread(target=lambda: out.setdefault("r", c.post(f"/rounds/{rid}/cluster", headers=op)))
        t.start()
        assert entered.wait(60)
        assert c.get(f"/rounds/{rid}").json()["state"] == "decoding"
        r = c.delete(f"/rounds/{rid}", headers=op)
        assert r.status_code == 409 and "decoding" in r.text
        again = c.post(f"/rounds/{rid}/cluster", headers=op)
        assert again.status_code == 409 and "already decoding" in again.text
        release.set()
        t.join(60)
        assert out["r"].status_code == 200, out["r"].text
        assert c.get(f"/rounds/{rid}/result").status_code == 200
        assert c.delete(f"/rounds/{rid}", headers=op).status_code == 204
        assert c.get(f"/rounds/{rid}").status_code == 404
