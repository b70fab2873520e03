"""Local refine rounds over a real socket: a local tree round's centers, fresh
devices' eps-LDP codebook reports in, one Lloyd step out, and a privacy
statement that stays local."""

import httpx
import numpy as np
from tests_helpers import done_tree_round

from shoal.client.kinds.local_refine import codebook_messages
from shoal.common.kinds.local_refine import local_refine_from_dict
from shoal.deploy.simulation.datasets import paper_mixture


def test_local_round_refines_locally_on_fresh_devices(server):
    ds = paper_mixture(24000, d=4, k=3, seed=2)
    parent, first = done_tree_round(server, ds.points[:4000])
    r = httpx.post(server.url + f"/rounds/{parent}/refine", headers=server.op_headers(), json={"epsilon": 4.0})
    assert r.status_code == 201, r.text
    ref = r.json()
    cfg = local_refine_from_dict(ref["config"])
    assert ref["config"]["kind"] == "local_refine" and cfg.parent_id == parent
    fresh = ds.points[4000:]
    msgs = [m.model_dump(mode="json") for m in codebook_messages(fresh, cfg)]
    for lo in range(0, len(msgs), 5000):
        assert httpx.post(server.url + f"/rounds/{ref['id']}/reports/batch", json={"messages": msgs[lo:lo + 5000]},
                          timeout=60).status_code == 202
    r = httpx.post(server.url + f"/rounds/{ref['id']}/cluster", headers=server.op_headers(), timeout=300)
    assert r.status_code == 200, r.text
    res = r.json()
    assert res["diagnostics"]["devices"] == 20000
    ball = ds.bound.to_ball(fresh)
    c0 = cfg.center_array
    lab = np.argmin(((ball[:, None] - c0[None]) ** 2).sum(-1), axis=1)
    sizes = np.bincount(lab, minlength=3)
    got = np.array(res["ball_centers"])
    sd = res["diagnostics"]["count_noise_sd"]
    for j in range(3):  # a cell well above the count noise moves to its mean, up to the reports' noise
        if sizes[j] > 10 * sd:
            assert np.linalg.norm(got[j] - ball[lab == j].mean(0)) < 0.25, (j, sizes[j], got[j])
    pr = res["privacy"]
    assert pr["model"] == "local" and pr["device_epsilon"] == 8.0 and pr["round_epsilon"] == 4.0
    assert pr["guarantees"][0]["epsilon"] == 4.0 and "hostile server" in pr["guarantees"][0]["against"]
    assert "parallel" in pr["composition"] and pr["rounds"][0] == first["privacy"]


def test_local_refine_takes_no_secure_sum_parameters(server):
    ds = paper_mixture(3000, d=4, k=3, seed=3)
    parent, _ = done_tree_round(server, ds.points)
    r = httpx.post(server.url + f"/rounds/{parent}/refine", headers=server.op_headers(),
                   json={"model": "local", "epsilon": 1.0, "delta": 1e-6})
    assert r.status_code == 422 and "local refine" in r.text


def test_a_shuffle_refine_still_opens_on_a_local_round_when_asked(server):
    ds = paper_mixture(3000, d=4, k=3, seed=4)
    parent, _ = done_tree_round(server, ds.points)
    r = httpx.post(server.url + f"/rounds/{parent}/refine", headers=server.op_headers(),
                   json={"epsilon": 1.0, "delta": 1e-7, "min_devices": 1000})
    assert r.status_code == 201 and r.json()["config"]["kind"] == "refine"


def test_local_refine_refuses_a_report_of_another_shape(server):
    ds = paper_mixture(3000, d=4, k=3, seed=5)
    parent, _ = done_tree_round(server, ds.points)
    ref = httpx.post(server.url + f"/rounds/{parent}/refine", headers=server.op_headers(), json={"epsilon": 1.0}).json()
    cfg = local_refine_from_dict(ref["config"])
    bad = codebook_messages(ds.points[:1], cfg)[0].model_dump(mode="json")
    bad["index"] = cfg.privunit.candidates  # not one of the round's candidates
    r = httpx.post(server.url + f"/rounds/{ref['id']}/reports", json=bad)
    assert r.status_code == 422 and "candidates" in r.text
    assert httpx.get(server.url + f"/rounds/{ref['id']}").json()["reports"] == 0
