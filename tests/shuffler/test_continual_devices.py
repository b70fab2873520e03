"""A continual round end to end (issue 18, Build 5/6): devices insert their
point sealed to the curator through a real shuffler and later withdraw it
with the withdrawal sealed at insertion; the operator closes steps over
HTTP and everyone reads the releases, which follow the population."""

from __future__ import annotations

import httpx
import numpy as np
import pytest
from shuffler_helpers import _reports, _spawn_shuffler, _wait_until, enrolled
from tests_helpers import free_port

from shoal.client.device import Device
from shoal.client.ledger import Ledger
from shoal.client.participation import TransportError
from shoal.common.errors import PrivacyError


@pytest.fixture
def small_batches(server, tmp_path):
    """A shuffler that releases any batch (this test knows which events landed before each step)."""
    port = free_port()
    proc = _spawn_shuffler(server, str(tmp_path / "small.db"), port, 1)
    yield f"http://127.0.0.1:{port}"
    proc.kill()
    proc.wait()


def _flush(url, server, rid, stored):
    httpx.post(url + f"/rounds/{rid}/flush", headers={"Authorization": f"Bearer {server.shuffler}"})
    assert _wait_until(lambda: _reports(server, rid) == stored), _reports(server, rid)


def test_devices_insert_and_withdraw_and_each_closed_step_follows_the_population(server, small_batches, tmp_path):
    url = small_batches
    # k = 3: the greedy's first two centers, then the private mean (server/decoders/continual/stream.py)
    body = {"k": 3, "dim": 2, "epsilon": 50.0, "n_expected": 100, "model": "central", "algorithm": "continual",
            "bound": {"radius": 2.0}, "tuning": {"horizon": 3, "levels": 6}}
    r = httpx.post(server.url + "/rounds", json=body, headers=server.op_headers())
    assert r.status_code == 201, r.text
    rid = r.json()["id"]
    assert r.json()["config"]["kind"] == "continual" and r.json()["config"]["params"]["delta"] == 0.0
    pin = httpx.get(server.url + "/server-key").json()["fingerprint"]
    with pytest.raises(PrivacyError, match="sees this device's raw point"):
        Device(server.url, tmp_path / "no.json", shuffler_url=url, server_key=pin).participate(rid, [0.1, 0.2])
    rng = np.random.default_rng(0)
    a, b = np.array([1.2, 1.2]), np.array([-1.2, -0.4])
    # 48 devices a cluster: at eps = 50 a cluster of 24 split over two cells can stay under every fine level's gate
    # (the curator alone, 24 a cluster: a center > 0.5 off for 2 of 1,000 public seeds; 48: 0 of 1,000)
    pts = np.vstack([a + rng.normal(0, 0.02, (48, 2)), b + rng.normal(0, 0.02, (48, 2))])
    toks = enrolled(url, server, 96)
    devices = [Device(server.url, tmp_path / f"d{i}.json", shuffler_url=url, server_key=pin, device_token=toks[i],
                      allow_no_local_guarantee=True) for i in range(96)]
    with pytest.raises(TransportError, match="inserted nothing"):
        devices[0].withdraw(rid)
    for d, p in zip(devices, pts, strict=True):
        d.participate(rid, p)
    entry = Ledger(tmp_path / "d0.json").entries[rid]
    assert entry["guarantee"] == "none" and entry["central_epsilon"] <= 50.0 + 1e-9 and entry["withdrawal"]
    assert "sees this device's raw point" in entry["note"] and "withdrawal is covered" in entry["note"]
    _flush(url, server, rid, 96)
    assert httpx.post(server.url + f"/rounds/{rid}/steps").status_code == 401  # operators only
    r = httpx.post(server.url + f"/rounds/{rid}/steps", headers=server.op_headers())
    assert r.status_code == 200, r.text
    one = r.json()
    assert one["step"] == 1 and one["horizon"] == 3 and one["elbow"]["suggested_k"] >= 1
    centers = np.asarray(one["centers"])
    # a center at each cluster (within 0.5 of the 2.7 between them: the nets' cells, not the noise, set this)
    assert np.linalg.norm(centers - a, axis=1).min() < 0.5 and np.linalg.norm(centers - b, axis=1).min() < 0.5

    for d in devices[:48]:  # cluster a leaves
        d.withdraw(rid)
    # a second withdrawal resends the same sealed bytes: acknowledged as a duplicate, kept once
    assert devices[0].withdraw(rid) == {"accepted": 0, "duplicates": 1}
    _flush(url, server, rid, 144)
    two = httpx.post(server.url + f"/rounds/{rid}/steps", headers=server.op_headers()).json()
    assert two["step"] == 2
    centers = np.asarray(two["centers"])
    # k = 3 over one live cluster: the second center goes to the largest other released ball; a noise-only
    # ball passes the gate in ~7% of steps, and lands near the vanished cluster in 2 of 1,000 (curator alone)
    assert np.linalg.norm(centers - b, axis=1).min() < 0.5 and np.linalg.norm(centers - a, axis=1).min() > 1.0

    three = httpx.post(server.url + f"/rounds/{rid}/steps", headers=server.op_headers()).json()
    assert three["step"] == 3
    r = httpx.post(server.url + f"/rounds/{rid}/steps", headers=server.op_headers())
    assert r.status_code == 409 and "horizon" in r.json()["detail"]
    listed = httpx.get(server.url + f"/rounds/{rid}/steps").json()  # releases are public, as results are
    assert [s["step"] for s in listed] == [1, 2, 3] and listed[1] == two
    assert [s["step"] for s in httpx.get(server.url + f"/rounds/{rid}/steps?since=2").json()] == [3]
    assert httpx.get(server.url + f"/rounds/{rid}/steps?since=-1").status_code == 422
    r = httpx.post(server.url + f"/rounds/{rid}/cluster", headers=server.op_headers())
    assert r.status_code == 409 and "releases at every step" in r.json()["detail"]


def test_a_continual_round_asks_for_its_horizon_at_the_edge(server):
    body = {"k": 2, "dim": 2, "epsilon": 1.0, "n_expected": 100, "model": "central", "algorithm": "continual"}
    r = httpx.post(server.url + "/rounds", json=body, headers=server.op_headers())
    assert r.status_code == 422 and "horizon" in r.text
    r = httpx.post(server.url + "/rounds", json=body | {"tuning": {"horizon": 8, "lift_steps": 1}},
                   headers=server.op_headers())
    assert r.status_code == 422 and "lift_steps" in r.text
    r = httpx.post(server.url + "/rounds", json=body | {"dim": 9, "tuning": {"horizon": 8}}, headers=server.op_headers())
    assert r.status_code in (400, 422) and "dim must be in [1, 8]" in r.text


def test_steps_of_a_round_that_is_not_continual_are_refused(server):
    body = {"k": 2, "dim": 2, "epsilon": 1.0, "n_expected": 100, "model": "central", "delta": 1e-6}
    rid = httpx.post(server.url + "/rounds", json=body, headers=server.op_headers()).json()["id"]
    r = httpx.post(server.url + f"/rounds/{rid}/steps", headers=server.op_headers())
    assert r.status_code == 409 and "only continual rounds have steps" in r.json()["detail"]
