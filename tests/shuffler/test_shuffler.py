"""The shuffler between devices and a real server, all on loopback."""

import base64
import sqlite3
import subprocess
import sys
import time

import httpx
import numpy as np
import pytest
from tests_helpers import free_port, send_until_killed, wait_healthy

from shoal.client.encoder import encode_arrays
from shoal.common.config import config_from_dict
from shoal.common.envelope import seal


@pytest.fixture
def shuffler(server, tmp_path):
    port = free_port()
    env = dict(server.env)
    db = str(tmp_path / "shuffler.db")
    proc = subprocess.Popen(
        [sys.executable, "-m", "shoal.client.cli", "shuffler", "--server-url", server.url, "--port", str(port),
         "--min-batch", "20", "--db", db],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    wait_healthy(url, proc)
    yield url, db, proc
    proc.kill()
    proc.wait()


def _spawn_shuffler(server, db, port, min_batch):
    proc = subprocess.Popen(
        [sys.executable, "-m", "shoal.client.cli", "shuffler", "--server-url", server.url, "--port", str(port),
         "--min-batch", str(min_batch), "--db", db],
        env=dict(server.env), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    wait_healthy(f"http://127.0.0.1:{port}", proc)
    return proc


def _sealed_messages(server, n, with_ids=False):
    r = httpx.post(server.url + "/rounds", json={"k": 2, "dim": 3, "epsilon": 2.0, "n_expected": 1000},
                   headers=server.op_headers())
    rnd = r.json()
    cfg = config_from_dict(rnd["config"])
    key = base64.b64decode(rnd["server_public_key"])
    msgs = encode_arrays(np.random.default_rng(0).uniform(-0.5, 0.5, (n, 3)), cfg).to_messages()
    sealed = [base64.b64encode(seal(m.model_dump_json().encode(), key, rnd["id"])).decode() for m in msgs]
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
    """Messages in the shuffler's buffer; a batch leaves it only after the server's 2xx."""
    return sqlite3.connect(db).execute("SELECT COUNT(*) FROM buffer").fetchone()[0]


def test_batches_are_released_only_from_min_batch_on(server, shuffler):
    url, db, _ = shuffler
    rid, sealed = _sealed_messages(server, 25)
    for i in range(19):
        r = httpx.post(url + f"/rounds/{rid}/messages", json={"sealed": sealed[i]}, headers={"X-Device-Token": f"device-{i:012d}"})
        assert r.status_code == 202
    time.sleep(0.6)
    assert httpx.get(server.url + f"/rounds/{rid}").json()["reports"] == 0
    r = httpx.post(url + f"/rounds/{rid}/flush", headers={"Authorization": f"Bearer {server.shuffler}"})
    assert r.status_code == 409 and "below min_batch" in r.text
    httpx.post(url + f"/rounds/{rid}/messages", json={"sealed": sealed[19]}, headers={"X-Device-Token": "device-000000000019"})
    assert _wait_reports(server, rid, 20)
    assert _wait_until(lambda: _buffered(db) == 0)


def test_one_message_per_device_per_round(server, shuffler):
    url, _, _ = shuffler
    rid, sealed = _sealed_messages(server, 2)
    h = {"X-Device-Token": "device-aaaaaaaaaaaa"}
    assert httpx.post(url + f"/rounds/{rid}/messages", json={"sealed": sealed[0]}, headers=h).status_code == 202
    r = httpx.post(url + f"/rounds/{rid}/messages", json={"sealed": sealed[1]}, headers=h)
    assert r.status_code == 409 and "already sent" in r.text
    assert httpx.post(url + f"/rounds/{rid}/messages", json={"sealed": sealed[1]}).status_code == 401


def test_the_shuffler_holds_only_ciphertext_and_no_device_token(server, shuffler):
    url, db, _ = shuffler
    rid, sealed = _sealed_messages(server, 3)
    for i, s in enumerate(sealed):
        httpx.post(url + f"/rounds/{rid}/messages", json={"sealed": s}, headers={"X-Device-Token": f"secret-device-{i:04d}"})
    dump = "\n".join(sqlite3.connect(db).iterdump())
    assert "secret-device" not in dump
    rows = sqlite3.connect(db).execute("SELECT sealed FROM buffer").fetchall()
    assert rows and all(b"hist" not in bytes(r[0]) and b"message_id" not in bytes(r[0]) for r in rows)


def test_buffered_messages_survive_a_shuffler_crash(server, shuffler, tmp_path):
    url, db, proc = shuffler
    rid, sealed = _sealed_messages(server, 10)
    for i, s in enumerate(sealed):
        assert httpx.post(url + f"/rounds/{rid}/messages", json={"sealed": s}, headers={"X-Device-Token": f"device-{i:012d}"}).status_code == 202
    proc.kill()
    proc.wait()
    assert _buffered(db) == 10


def test_every_acknowledged_message_survives_a_shuffler_sigkill(server, tmp_path):
    """Devices send concurrently; SIGKILL the shuffler; restart it on the same
    buffer: every message it acknowledged reaches the server, exactly once."""
    port, db = free_port(), str(tmp_path / "kill.db")
    proc = _spawn_shuffler(server, db, port, min_batch=50)
    rid, sealed, ids = _sealed_messages(server, 3000, with_ids=True)

    def kill():
        proc.kill()
        proc.wait()

    acked = send_until_killed(
        3000,
        lambda c, i: c.post(f"http://127.0.0.1:{port}/rounds/{rid}/messages", json={"sealed": sealed[i]},
                            headers={"X-Device-Token": f"device-{i:012d}"}),
        kill,
    )
    assert 0 < len(acked) < 3000
    proc = _spawn_shuffler(server, db, port, min_batch=1)  # releases whatever survived
    try:
        assert _wait_reports(server, rid, len(acked), seconds=20)
        time.sleep(0.5)
        con = sqlite3.connect(server.db[len("sqlite:///"):])
        stored = [r[0] for r in con.execute("SELECT message_id FROM reports WHERE round_id = ?", (rid,))]
        assert {ids[i] for i in acked} <= set(stored)
        assert len(stored) == len(set(stored))
        assert _wait_until(lambda: _buffered(db) == 0)
    finally:
        proc.kill()
        proc.wait()


def test_devices_join_a_shuffle_round_through_the_shuffler(server, shuffler, tmp_path):
    from shoal.client.device import Device, TransportError

    url, _, _ = shuffler
    body = {"k": 2, "dim": 3, "epsilon": 2.0, "n_expected": 100, "model": "shuffle", "delta": 1e-6, "min_batch": 25}
    r = httpx.post(server.url + "/rounds", json=body, headers=server.op_headers())
    assert r.status_code == 201, r.text
    rid = r.json()["id"]
    assert r.json()["config"]["min_batch"] == 25 and r.json()["config"]["epsilon"] >= 2.0
    with pytest.raises(TransportError, match="shuffler_url"):
        Device(server.url, tmp_path / "lonely.json").participate(rid, [0.1, 0.2, 0.3])
    pts = np.random.default_rng(1).uniform(-0.5, 0.5, (30, 3))
    for i in range(24):
        Device(server.url, tmp_path / f"d{i}.json", shuffler_url=url).participate(rid, pts[i])
    time.sleep(0.6)  # 24 buffered: below the round's min_batch of 25 (above the shuffler's 20)
    assert httpx.get(server.url + f"/rounds/{rid}").json()["reports"] == 0
    for i in range(24, 30):
        Device(server.url, tmp_path / f"d{i}.json", shuffler_url=url).participate(rid, pts[i])
    assert _wait_reports(server, rid, 25)
    # Whatever was buffered when the 25th arrived went as one batch; a tail below 25 waits.
    assert _wait_until(lambda: _reports(server, rid) + _buffered(shuffler[1]) == 30)
    assert _reports(server, rid) >= 25 and _buffered(shuffler[1]) < 25


def test_a_tree_round_takes_one_part_and_both_forms_are_refused(server, shuffler):
    url, _, _ = shuffler
    rid, sealed = _sealed_messages(server, 2)
    h = {"X-Device-Token": "device-bbbbbbbbbbbb"}
    r = httpx.post(url + f"/rounds/{rid}/messages", json={"parts": sealed}, headers=h)
    assert r.status_code == 422 and "takes 1 parts" in r.text
    r = httpx.post(url + f"/rounds/{rid}/messages", json={"sealed": sealed[0], "parts": sealed}, headers=h)
    assert r.status_code == 422 and "exactly one of" in r.text
