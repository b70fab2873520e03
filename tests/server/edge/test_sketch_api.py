"""Sketch rounds over a real socket: devices with many records, the
shuffle-model secure sum, the SNR and privacy in the result, bad input."""

import base64

import httpx
import numpy as np
import pytest
from tests_helpers import stored_message_ids

from shoal.client.device import Device
from shoal.client.sketch_encoder import sketch_messages, sketch_shares
from shoal.common.bounds import PublicBound
from shoal.common.errors import PrivacyError
from shoal.common.kinds.sketch import sketch_round_from_dict
from shoal.common.mechanisms.sketch import exact_sketch, noise_variance
from shoal.common.wire.messages import sealed_share_parts
from shoal.deploy.simulation.datasets import Dataset
from shoal.server.decoders.kmeans import kmeans_cost, weighted_kmeans


def _create(server, **kw):
    body = {"k": 3, "dim": 4, "epsilon": 1.0, "n_expected": 20_000, "encoder": "sketch",
            "bound": {"radius": 1.0}} | kw
    r = httpx.post(server.url + "/rounds", json=body, headers=server.op_headers())
    assert r.status_code == 201, r.text
    return r.json()


def _count(server, round_id):
    return len(stored_message_ids(server.db, round_id))


def _mixture(n, seed):
    """Three clusters in d = 4, spread 0.1, inside the radius-1 bound."""
    rng = np.random.default_rng(seed)
    mu = np.array([[0.5, 0.0, 0.0, 0.0], [-0.3, 0.4, 0.0, 0.0], [0.0, -0.4, 0.3, 0.0]])
    return Dataset(f"mixture-{n}", mu[rng.integers(0, 3, n)] + 0.1 * rng.standard_normal((n, 4)), 3,
                   PublicBound(radius=1.0))


def _relative_sse(ds, centers):
    lloyd = weighted_kmeans(ds.points, np.ones(len(ds.points)), ds.k, np.random.default_rng(0), restarts=2)
    return kmeans_cost(ds.points, np.asarray(centers)) / kmeans_cost(ds.points, lloyd)


def test_local_sketch_round_with_devices_of_many_records(server, tmp_path):
    """Twenty devices of 1000 records each (seed 002's (L, n0) regime), one
    through ``Device.participate``: the result carries k centers, the SNR of
    Sec. 5 and a local privacy statement."""
    ds = _mixture(20_000, seed=3)
    rnd = _create(server)
    rid, cfg = rnd["id"], sketch_round_from_dict(rnd["config"])
    assert cfg.sketch.size == 10 * 3 * 4 and rnd["config"]["kind"] == "sketch"
    # A device's user may own all 1000 records: its ledger charges 1000 x eps (user level).
    with pytest.raises(PrivacyError, match="needs epsilon 1000"):
        Device(server.url, tmp_path / "small.json", cap=10.0).participate(rid, ds.points[:1000])
    device = Device(server.url, tmp_path / "ledger.json", cap=2000.0)
    assert device.participate(rid, ds.points[:1000]) == {"accepted": 1, "duplicates": 0}
    msgs = [m.model_dump(mode="json") for m in sketch_messages(ds.points[1000:], np.full(19, 1000), cfg)]
    r = httpx.post(server.url + f"/rounds/{rid}/reports/batch", json={"messages": msgs}, timeout=60)
    assert r.status_code == 202 and r.json()["accepted"] == 19
    r = httpx.post(server.url + f"/rounds/{rid}/cluster", headers=server.op_headers(), timeout=120)
    assert r.status_code == 200, r.text
    res = r.json()
    assert np.asarray(res["centers"]).shape == (3, 4)
    assert abs(sum(res["sizes"]) - 20_000) < 1e-6 * 20_000
    dg = res["diagnostics"]
    assert dg["devices"] == 20 and dg["records"] == 20_000 and dg["m"] == 120
    # Seed 002, Eq. 6 with the true ||z||^2 (about 9.5 here; the estimate varied 9.0-10.1 over 6 noise draws).
    z2 = float(np.sum(np.abs(exact_sketch(cfg.bound.to_ball(ds.points), cfg.omega())) ** 2))
    assert dg["snr_estimated"] == pytest.approx(z2 / noise_variance(cfg.sketch, np.full(20, 1000), z2), rel=0.3)
    assert res["privacy"]["device_epsilon"] == 1.0
    assert res["privacy"]["model"] == "local" and res["privacy"]["reports"] == ["ScrambledSketchEvent"]
    assert _relative_sse(ds, res["centers"]) < 1.5
    assert device.ledger.spent == 1000.0


def test_shuffle_model_sketch_round_sums_shares_with_central_noise(server):
    """One-record devices send sealed secure-sum shares (via the shuffler's
    endpoint here directly with the shuffler credential); the server only
    ever adds them, and the statement is central (eps, delta), no local eps."""
    # 2,000 devices (16-19 s against 36 s at 4,000): relative SSE 1.015-1.07 over data seeds 4-6
    # (1.009-1.014 at 4,000), against the bound of 1.5 below
    ds = _mixture(2000, seed=4)
    rnd = _create(server, model="shuffle", delta=1e-6, min_batch=1000, n_expected=2000, epsilon=4.0)
    rid, cfg = rnd["id"], sketch_round_from_dict(rnd["config"])
    key = base64.b64decode(rnd["server_public_key"])
    sealed = [p for parts in sealed_share_parts(sketch_shares(ds.points, cfg, np.random.default_rng(0)), key, rid)
              for p in parts]
    np.random.default_rng(1).shuffle(sealed)
    for lo in range(0, len(sealed), 500):
        r = httpx.post(server.url + f"/rounds/{rid}/shuffled", json={"sealed": sealed[lo:lo + 500]},
                       headers={"Authorization": f"Bearer {server.shuffler}"}, timeout=120)
        assert r.status_code == 202, r.text
    r = httpx.post(server.url + f"/rounds/{rid}/cluster", headers=server.op_headers(), timeout=120)
    assert r.status_code == 200, r.text
    res = r.json()
    pr = res["privacy"]
    assert pr["model"] == "shuffle" and pr["device_epsilon"] is None
    assert pr["central_epsilon"] == 4.0 and pr["delta"] == 1e-6 and pr["min_devices"] == 1000
    assert res["diagnostics"]["devices"] == 2000
    assert _relative_sse(ds, res["centers"]) < 1.5


def test_sketch_round_bad_input_is_rejected_and_nothing_is_stored(server):
    rnd = _create(server)
    rid, cfg = rnd["id"], sketch_round_from_dict(rnd["config"])
    good = sketch_messages(np.zeros((5, 4)), np.array([5]), cfg)[0].model_dump(mode="json")
    url = server.url + f"/rounds/{rid}/reports"
    cases = [
        ("wrong length", httpx.post(url, json=good | {"sketch": good["sketch"][:-2]}), 422, "reals"),
        ("n0 zero", httpx.post(url, json=good | {"n0": 0}), 422, "n0"),
        ("unknown field", httpx.post(url, json=good | {"device": "x"}), 422, "device"),
        ("round mismatch", httpx.post(url, json=good | {"round_id": "other"}), 422, "posted to round"),
        ("a tree report", httpx.post(url, json={"round_id": rid, "message_id": "b" * 32}), 422, "sketch"),
    ]
    nan = ('{"round_id":"' + rid + '","message_id":"' + "c" * 32 + '","n0":1,"sketch":[NaN' + ",0" * 239 + "]}").encode()
    cases.append(("NaN", httpx.post(url, content=nan, headers={"content-type": "application/json"}), 422, "finite"))
    for name, resp, status, needle in cases:
        assert resp.status_code == status, (name, resp.status_code, resp.text)
        assert needle in resp.text, (name, resp.text)
    assert _count(server, rid) == 0
    tree = httpx.post(server.url + "/rounds", json={"k": 3, "dim": 4, "epsilon": 1.0, "n_expected": 100},
                      headers=server.op_headers()).json()
    r = httpx.post(server.url + f"/rounds/{tree['id']}/reports", json=good | {"round_id": tree["id"]})
    assert r.status_code == 422 and "tree round" in r.text
    assert _count(server, tree["id"]) == 0
    shuffle = _create(server, model="shuffle", delta=1e-6, min_batch=1000)
    r = httpx.post(server.url + f"/rounds/{shuffle['id']}/reports", json=good | {"round_id": shuffle["id"]})
    assert r.status_code == 409 and "secure-sum shares" in r.text
    r = httpx.post(server.url + "/rounds", json={"k": 3, "dim": 4, "epsilon": 1.0, "n_expected": 100,
                                                 "encoder": "sketch", "tuning": {"bogus": 1}}, headers=server.op_headers())
    assert r.status_code == 422 and "bogus" in r.text
    assert httpx.get(server.url + "/healthz").status_code == 200
