"""Issue 13: a poison message in a shuffled batch costs only itself. Before
per-item outcomes, one undecryptable (or sealed but invalid) message made the
server refuse the whole batch, and the shuffler re-sent it forever: the round
got 0 reports."""

import base64
import os
import sqlite3
import subprocess
import sys
import time

import httpx
import numpy as np
from shuffler_helpers import _buffered, _reports, _sealed_messages, _wait_until, enrolled
from tests_helpers import free_port, wait_healthy

from shoal.client.encoder import encode_arrays
from shoal.common.kinds.tree import config_from_dict
from shoal.common.wire.envelope import seal
from shoal.common.wire.fields import new_message_id
from shoal.common.wire.models import DeviceMessage
from shoal.common.wire.signing import config_digest


def _round(server):
    body = {"k": 2, "dim": 3, "epsilon": 2.0, "n_expected": 1000}
    rnd = httpx.post(server.url + "/rounds", json=body, headers=server.op_headers()).json()
    return rnd, base64.b64decode(rnd["server_public_key"]), config_digest(rnd["config"], rnd["server_public_key"])


def _seal(obj_json: bytes, key: bytes, rid: str) -> str:
    return base64.b64encode(seal(obj_json, key, rid)).decode()


def test_a_poison_message_in_a_shuffled_batch_costs_only_itself(server, shuffler):
    url, db, _ = shuffler  # releases batches of 20
    rnd, key, digest = _round(server)
    rid = rnd["id"]
    msgs = encode_arrays(np.random.default_rng(0).uniform(-0.5, 0.5, (17, 3)), config_from_dict(rnd["config"])).to_messages()
    honest = [_seal(m.model_dump_json().encode(), key, rid) for m in msgs]
    undecryptable = base64.b64encode(os.urandom(300)).decode()
    empty = _seal(DeviceMessage(round_id=rid, message_id=new_message_id()).model_dump_json().encode(), key, rid)
    # A local round's tree device sends one report (hist_only_share): break one that carries a vector report.
    src = next(m for m in msgs if m.vec is not None)
    bad = src.model_copy(update={"message_id": new_message_id(), "vec": src.vec.model_copy(update={"index": 65535})})
    out_of_range = _seal(bad.model_dump_json().encode(), key, rid)
    items = [undecryptable, empty, out_of_range, *honest]
    tokens = enrolled(url, server, len(items))
    for tok, item in zip(tokens, items, strict=True):
        r = httpx.post(url + f"/rounds/{rid}/messages", json={"sealed": item, "config_digest": digest},
                       headers={"X-Device-Token": tok})
        assert r.status_code == 202, r.text
    assert _wait_until(lambda: _reports(server, rid) == 17, 15)
    assert _wait_until(lambda: _buffered(db) == 0)
    time.sleep(1.0)  # a re-send would show in the server's rejection counter
    health = httpx.get(url + "/healthz").json()
    assert health["forwarded"] == 20
    assert health["refused"] == {"undecryptable": 1, "invalid": 2}
    metrics = httpx.get(server.url + "/metrics").text
    assert 'shoal_reports_rejected_total{reason="sealed"} 3.0' in metrics
    assert _reports(server, rid) == 17


def test_the_server_names_each_refused_item_of_a_shuffled_batch(server):
    rnd, key, _ = _round(server)
    rid = rnd["id"]
    msgs = encode_arrays(np.random.default_rng(1).uniform(-0.5, 0.5, (3, 3)), config_from_dict(rnd["config"])).to_messages()
    other = msgs[2].model_copy(update={"round_id": "0123456789abcdef"})
    sealed = [_seal(msgs[0].model_dump_json().encode(), key, rid), "!!not base64!!",
              _seal(b'{"round_id": "x"}', key, rid), _seal(other.model_dump_json().encode(), key, rid),
              _seal(msgs[1].model_dump_json().encode(), key, rid)]
    r = httpx.post(server.url + f"/rounds/{rid}/shuffled", json={"sealed": sealed},
                   headers={"Authorization": f"Bearer {server.shuffler}"})
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["accepted"] == 2 and body["duplicates"] == 0
    assert [(x["index"], x["reason"]) for x in body["refused"]] == [(1, "malformed"), (2, "malformed"), (3, "wrong_round")]
    assert all("x" * 3 not in x["detail"] for x in body["refused"])
    assert _reports(server, rid) == 2


def test_a_message_with_no_report_is_refused_not_counted(server):
    rnd, _, _ = _round(server)
    rid = rnd["id"]
    r = httpx.post(server.url + f"/rounds/{rid}/reports", json={"round_id": rid, "message_id": new_message_id()})
    assert r.status_code == 422 and "carry no report" in r.text
    assert _reports(server, rid) == 0


def test_a_round_deleted_at_the_server_is_kept_orphaned_until_its_age_limit(server, tmp_path):
    """Issue 45: the server's 404 no longer makes the shuffler forget messages its
    devices were charged for; they are kept, counted in /healthz, and dropped
    (everything about the round) only at --max-round-age-hours (here 9 s)."""
    port = free_port()
    db = str(tmp_path / "sh.db")
    pin = httpx.get(server.url + "/server-key").json()["fingerprint"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "shoal.common.cli", "shuffler", "--server-url", server.url, "--port", str(port),
         "--min-batch", "20", "--db", db, "--server-key", pin, "--round-check-seconds", "0.3",
         "--max-round-age-hours", "0.0025"],
        env=dict(server.env), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc)
        rid, sealed = _sealed_messages(server, 5)
        toks = enrolled(url, server, 5)
        for i in range(5):
            assert httpx.post(url + f"/rounds/{rid}/messages", json=sealed.body(i),
                              headers={"X-Device-Token": toks[i]}).status_code == 202
        assert httpx.delete(server.url + f"/rounds/{rid}", headers=server.op_headers()).status_code == 204
        assert _wait_until(lambda: httpx.get(url + "/healthz").json()["orphaned"]["rounds"] == 1, 5)
        health = httpx.get(url + "/healthz").json()
        assert health["orphaned"]["messages"] == 5 and _buffered(db) == 5  # kept, not forgotten
        assert _wait_until(lambda: _buffered(db) == 0, 20)  # the age limit
        health = httpx.get(url + "/healthz").json()
        assert health["orphaned"]["rounds"] == 0 and health["expired"] == 5
        con = sqlite3.connect(db)
        assert all(con.execute(f"SELECT COUNT(*) FROM {t} WHERE round_id = ?", (rid,)).fetchone()[0] == 0
                   for t in ("round_keys", "members", "digests", "round_times", "orphaned"))
    finally:
        proc.kill()
        proc.wait()


def test_a_shuffler_told_pin_first_use_pins_the_identity_the_server_shows_and_keeps_it(server, tmp_path):
    port = free_port()
    db = str(tmp_path / "sh.db")
    env = {k: v for k, v in server.env.items() if k != "SHOAL_SERVER_KEY"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "shoal.common.cli", "shuffler", "--server-url", server.url, "--port", str(port),
         "--min-batch", "20", "--db", db, "--pin-first-use"], env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc)
        assert httpx.get(url + "/healthz").json()["server_key"] == "first use"
        pin = httpx.get(server.url + "/server-key").json()["fingerprint"]
        con = sqlite3.connect(db)
        assert bytes(con.execute("SELECT key FROM shuffler_keys WHERE name = 'server_pin'").fetchone()[0]).decode() == pin
        rid, sealed = _sealed_messages(server, 1)  # a config signed by that identity verifies
        tok = enrolled(url, server, 1)[0]
        assert httpx.post(url + f"/rounds/{rid}/messages", json=sealed.body(0),
                          headers={"X-Device-Token": tok}).status_code == 202
    finally:
        proc.kill()
        proc.wait()
