"""The shuffler between devices and a real server, all on loopback."""

import sqlite3
import time

import httpx
import numpy as np
import pytest
from shuffler_helpers import (
    _buffered,
    _reports,
    _sealed_messages,
    _spawn_shuffler,
    _wait_reports,
    _wait_until,
    enrolled,
)
from tests_helpers import free_port, send_until_killed, stored_message_ids

from shoal.client.device import Device
from shoal.common.wire.signing import TrustError


def test_batches_are_released_only_from_min_batch_on(server, shuffler):
    url, db, _ = shuffler
    rid, sealed = _sealed_messages(server, 25)
    toks = enrolled(url, server, 20)
    for i in range(19):
        r = httpx.post(url + f"/rounds/{rid}/messages", json=sealed.body(i), headers={"X-Device-Token": toks[i]})
        assert r.status_code == 202
    time.sleep(0.6)
    assert httpx.get(server.url + f"/rounds/{rid}").json()["reports"] == 0
    r = httpx.post(url + f"/rounds/{rid}/flush", headers={"Authorization": f"Bearer {server.shuffler}"})
    assert r.status_code == 409 and "below min_batch" in r.text
    held = httpx.get(url + f"/rounds/{rid}", headers={"Authorization": f"Bearer {server.shuffler}"})
    assert held.status_code == 200
    assert held.json() | {"note": ""} == {"round_id": rid, "pending": 19, "threshold": 20, "batch_formed": False,
                                         "releasable": False, "note": ""}
    httpx.post(url + f"/rounds/{rid}/messages", json=sealed.body(19), headers={"X-Device-Token": toks[19]})
    assert _wait_reports(server, rid, 20)
    assert _wait_until(lambda: _buffered(db) == 0)
    assert httpx.get(url + f"/rounds/{rid}", headers={"Authorization": f"Bearer {server.shuffler}"}).json()["pending"] == 0
    metrics = httpx.get(url + "/metrics").text
    assert "# HELP shoal_shuffler_forwarded_messages" in metrics
    assert "shoal_shuffler_forwarded_messages_total 20.0" in metrics
    assert f'shoal_shuffler_pending_messages{{round="{rid}"}} 0.0' in metrics
    log = open(db + ".log").read()  # noqa: SIM115
    assert f"shoal.shuffler: round {rid}: released a shuffled batch of 20 message(s)" in log


def test_a_rounds_buffer_is_read_only_with_the_shuffler_token(server, shuffler):
    url, _, _ = shuffler
    rid, _ = _sealed_messages(server, 2)
    assert httpx.get(url + f"/rounds/{rid}").status_code == 403
    assert httpx.get(url + f"/rounds/{rid}", headers={"Authorization": "Bearer " + "x" * 24}).status_code == 403


def test_one_message_per_device_per_round(server, shuffler):
    url, _, _ = shuffler
    rid, sealed = _sealed_messages(server, 2)
    h = {"X-Device-Token": enrolled(url, server, 1)[0]}
    r = httpx.post(url + f"/rounds/{rid}/messages", json=sealed.body(0), headers=h)
    assert r.status_code == 202 and r.json() == {"accepted": 1, "duplicates": 0}
    r = httpx.post(url + f"/rounds/{rid}/messages", json=sealed.body(1), headers=h)
    assert r.status_code == 409 and "already submitted" in r.text


class _LosesFirstAnswer(httpx.HTTPTransport):
    """Delivers every request, but drops the answer to the first sealed submission (a read timeout)."""

    lost = 0

    def handle_request(self, request):
        response = super().handle_request(request)
        if request.method == "POST" and request.url.path.endswith("/messages") and not self.lost:
            self.lost += 1
            response.read()
            raise httpx.ReadTimeout("answer lost", request=request)
        return response


def test_a_device_whose_first_answer_is_lost_retries_and_learns_its_message_is_stored(server, shuffler, tmp_path):
    url, db, _ = shuffler
    rid, _ = _sealed_messages(server, 1, min_batch=25)
    pin = httpx.get(server.url + "/server-key").json()["fingerprint"]
    transport = _LosesFirstAnswer()
    with httpx.Client(transport=transport, timeout=30) as http:
        device = Device(server.url, tmp_path / "ledger.json", server_key=pin, client=http, shuffler_url=url,
                        device_token=enrolled(url, server, 1)[0], backoff=0.01)
        assert device.participate(rid, [0.1, 0.2, 0.3]) == {"accepted": 0, "duplicates": 1}
    assert transport.lost == 1 and _buffered(db) == 1


def test_a_retry_of_a_stored_message_is_acknowledged_as_a_duplicate_and_kept_once(server, shuffler):
    # A device whose first answer was lost (a timeout under load) resends the same sealed bytes:
    # it must learn they are stored (2xx), not fail on a 409, and the batch must hold them once.
    url, db, _ = shuffler
    rid, sealed = _sealed_messages(server, 2)
    h = {"X-Device-Token": enrolled(url, server, 1)[0]}
    assert httpx.post(url + f"/rounds/{rid}/messages", json=sealed.body(0), headers=h).status_code == 202
    r = httpx.post(url + f"/rounds/{rid}/messages", json=sealed.body(0), headers=h)
    assert r.status_code == 202 and r.json() == {"accepted": 0, "duplicates": 1}
    assert _buffered(db) == 1
    assert httpx.post(url + f"/rounds/{rid}/messages", json=sealed.body(1)).status_code == 401


def test_the_shuffler_holds_only_ciphertext_and_no_device_token(server, shuffler):
    url, db, _ = shuffler
    rid, sealed = _sealed_messages(server, 3)
    toks = enrolled(url, server, len(sealed))
    for i in range(len(sealed)):
        assert httpx.post(url + f"/rounds/{rid}/messages", json=sealed.body(i), headers={"X-Device-Token": toks[i]}).status_code == 202
    dump = "\n".join(sqlite3.connect(db).iterdump())
    assert not any(t in dump for t in toks)
    rows = sqlite3.connect(db).execute("SELECT sealed FROM pending").fetchall()
    assert rows and all(b"hist" not in bytes(r[0]) and b"message_id" not in bytes(r[0]) for r in rows)


def test_buffered_messages_survive_a_shuffler_crash(server, shuffler, tmp_path):
    url, db, proc = shuffler
    rid, sealed = _sealed_messages(server, 10)
    toks = enrolled(url, server, 10)
    for i in range(len(sealed)):
        assert httpx.post(url + f"/rounds/{rid}/messages", json=sealed.body(i), headers={"X-Device-Token": toks[i]}).status_code == 202
    proc.kill()
    proc.wait()
    assert _buffered(db) == 10


def test_every_acknowledged_message_survives_a_shuffler_sigkill(server, tmp_path):
    """Devices send concurrently; SIGKILL the shuffler; restart it on the same
    buffer: every message it acknowledged reaches the server, exactly once."""
    port, db = free_port(), str(tmp_path / "kill.db")
    proc = _spawn_shuffler(server, db, port, min_batch=50)
    rid, sealed, ids = _sealed_messages(server, 3000, with_ids=True)
    toks = enrolled(f"http://127.0.0.1:{port}", server, 3000)

    def kill():
        proc.kill()
        proc.wait()

    acked = send_until_killed(
        3000,
        lambda c, i: c.post(f"http://127.0.0.1:{port}/rounds/{rid}/messages", json=sealed.body(i),
                            headers={"X-Device-Token": toks[i]}),
        kill,
    )
    assert 0 < len(acked) < 3000
    proc = _spawn_shuffler(server, db, port, min_batch=1)  # releases whatever survived
    try:
        assert _wait_reports(server, rid, len(acked), seconds=20)
        time.sleep(0.5)
        stored = stored_message_ids(server.db, rid)
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
    pin = httpx.get(server.url + "/server-key").json()["fingerprint"]
    with pytest.raises(TransportError, match="shuffler_url"):
        Device(server.url, tmp_path / "lonely.json", server_key=pin).participate(rid, [0.1, 0.2, 0.3])
    with pytest.raises(TrustError, match="pin the server's key"):
        Device(server.url, tmp_path / "unpinned.json", shuffler_url=url).participate(rid, [0.1, 0.2, 0.3])
    pts = np.random.default_rng(1).uniform(-0.5, 0.5, (30, 3))
    toks = enrolled(url, server, 30)
    for i in range(24):
        Device(server.url, tmp_path / f"d{i}.json", shuffler_url=url, server_key=pin, device_token=toks[i]).participate(rid, pts[i])
    time.sleep(0.6)  # 24 buffered: below the round's min_batch of 25 (above the shuffler's 20)
    assert httpx.get(server.url + f"/rounds/{rid}").json()["reports"] == 0
    for i in range(24, 30):
        Device(server.url, tmp_path / f"d{i}.json", shuffler_url=url, server_key=pin, device_token=toks[i]).participate(rid, pts[i])
    assert _wait_reports(server, rid, 25)
    # Whatever was buffered when the 25th arrived went as one batch; a tail below 25 waits.
    assert _wait_until(lambda: _reports(server, rid) + _buffered(shuffler[1]) == 30)
    assert _reports(server, rid) >= 25 and _buffered(shuffler[1]) < 25


def test_a_tree_round_takes_one_part_and_both_forms_are_refused(server, shuffler):
    url, _, _ = shuffler
    rid, sealed = _sealed_messages(server, 2)
    h = {"X-Device-Token": enrolled(url, server, 1)[0]}
    r = httpx.post(url + f"/rounds/{rid}/messages", json={"parts": list(sealed), "config_digest": sealed.digest}, headers=h)
    assert r.status_code == 422 and "takes 1 parts" in r.text
    r = httpx.post(url + f"/rounds/{rid}/messages", json=sealed.body(0) | {"parts": list(sealed)}, headers=h)
    assert r.status_code == 422 and "exactly one of" in r.text


def test_devices_seal_their_points_to_the_curator_in_a_central_round(server, shuffler, tmp_path):
    """Issue 17: a central round's device sends its clipped raw point sealed to the
    server, only with its owner's consent; its ledger records no local guarantee
    but the release's central (eps, delta); the server decodes the points."""
    from shoal.client.device import Device
    from shoal.client.ledger import Ledger
    from shoal.common.errors import PrivacyError

    url, _, _ = shuffler
    body = {"k": 2, "dim": 2, "epsilon": 4.0, "n_expected": 40, "model": "central", "algorithm": "maxcover-003",
            "delta": 1e-6, "bound": {"radius": 2.0}}
    r = httpx.post(server.url + "/rounds", json=body, headers=server.op_headers())
    assert r.status_code == 201, r.text
    rid = r.json()["id"]
    assert r.json()["config"]["kind"] == "central" and r.json()["config"]["spec"]["algorithm"] == "maxcover-003"
    pin = httpx.get(server.url + "/server-key").json()["fingerprint"]
    with pytest.raises(PrivacyError, match="sees this device's raw point"):
        Device(server.url, tmp_path / "no.json", shuffler_url=url, server_key=pin).participate(rid, [0.1, 0.2])
    r = httpx.post(server.url + f"/rounds/{rid}/reports", json={"round_id": rid, "message_id": "0" * 32, "points": [[0, 0]]})
    assert r.status_code in (409, 422) and "sealed" in r.text  # never in the clear
    pts = np.vstack([np.full((20, 2), 0.6), np.full((20, 2), -0.6)]) + np.random.default_rng(0).normal(0, .01, (40, 2))
    toks = enrolled(url, server, 40)
    for i in range(40):
        Device(server.url, tmp_path / f"c{i}.json", shuffler_url=url, server_key=pin, device_token=toks[i],
               allow_no_local_guarantee=True).participate(rid, pts[i])
    entry = Ledger(tmp_path / "c0.json").entries[rid]
    assert entry["guarantee"] == "none" and entry["central_epsilon"] <= 4.0 + 1e-9
    assert Ledger(tmp_path / "c0.json").spent == 0.0
    httpx.post(url + f"/rounds/{rid}/flush", headers={"Authorization": f"Bearer {server.shuffler}"})
    # The shuffler releases batches of >= 20 (its own threshold); a smaller tail may stay buffered.
    assert _wait_until(lambda: _reports(server, rid) + _buffered(shuffler[1]) == 40)
    assert _reports(server, rid) >= 20
    r = httpx.post(server.url + f"/rounds/{rid}/cluster", headers=server.op_headers(), timeout=60)
    assert r.status_code == 200, r.text
    res = r.json()
    assert res["privacy"]["model"] == "central" and res["privacy"]["device_epsilon"] is None
    assert len(res["centers"]) == 2
