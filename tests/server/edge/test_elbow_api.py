"""Elbow rounds over a real socket: opened on a greedy round's ordered
centers, shares in through the shuffler's endpoint, the data's cost of
every k' out with its band and composed privacy; refused where the parent
has no order, is not done, or the caller is not the operator."""

import httpx
import numpy as np
from tests_helpers import done_tree_round, send_shares

from shoal.common.cost_drops import prefix_costs
from shoal.common.kinds.elbow import elbow_from_dict
from shoal.deploy.simulation.datasets import paper_mixture

GREEDY = {"k": 6, "encoder": "nettree", "tuning": {"tree": {"centers": "greedy"}}}


def _fill_and_decode(server, round_json, points, seed=0):
    send_shares(server, round_json, points, seed)
    r = httpx.post(server.url + f"/rounds/{round_json['id']}/cluster", headers=server.op_headers(), timeout=120)
    assert r.status_code == 200, r.text
    return elbow_from_dict(round_json["config"]), r.json()


def test_an_elbow_round_releases_the_datas_cost_of_every_k_within_its_band(server):
    ds = paper_mixture(3000, d=4, k=3, seed=2)
    parent, first = done_tree_round(server, ds.points, **GREEDY)
    assert first["elbow"]["objective"] == "kmeans"
    r = httpx.post(server.url + f"/rounds/{parent}/elbow", headers=server.op_headers(),
                   json={"epsilon": 1.0, "delta": 1e-7, "min_devices": 1000})
    assert r.status_code == 201, r.text
    elbow_round = r.json()
    assert elbow_round["config"]["kind"] == "elbow"
    # The parent's order, published (clipped into the ball again: a last-bit change at most).
    assert np.allclose(elbow_round["config"]["centers"], first["ball_centers"], rtol=0, atol=1e-12)
    cfg, res = _fill_and_decode(server, elbow_round, ds.points)
    assert res["diagnostics"]["devices"] == 3000
    exact = prefix_costs(ds.bound.to_ball(ds.points), cfg.center_array, 2).sum(0)
    costs = np.array([c["cost"] for c in res["elbow"]["costs"]])
    band = np.array([c["band"] for c in res["elbow"]["costs"]])
    assert costs.shape == (6,) and np.all(band > 0) and np.all(np.diff(band) < 0)  # fewer drops, less noise
    assert np.all(np.abs(costs - exact) <= band), (costs, exact, band)
    assert 1 <= res["elbow"]["suggested_k"] <= 6 and "at once" in res["elbow"]["band_rule"]
    assert np.allclose(res["centers"], first["centers"], rtol=1e-12) and res["sizes"] == []
    pr = res["privacy"]
    assert pr["model"] == "shuffle" and pr["device_epsilon"] is None
    assert pr["central_epsilon"] == first["privacy"]["central_epsilon"] + 1.0
    assert pr["delta"] == first["privacy"]["delta"] + 1e-7
    assert pr["rounds"][0] == first["privacy"] and pr["rounds"][1]["kind"] == "elbow"
    # A refine round opened on the same parent afterwards composes the elbow round too.
    ref = httpx.post(server.url + f"/rounds/{parent}/refine", headers=server.op_headers(),
                     json={"epsilon": 0.5, "delta": 1e-8, "min_devices": 1000}).json()
    send_shares(server, ref, ds.points, seed=5)
    refined = httpx.post(server.url + f"/rounds/{ref['id']}/cluster", headers=server.op_headers(), timeout=120).json()
    assert refined["privacy"]["central_epsilon"] == first["privacy"]["central_epsilon"] + 1.0 + 0.5
    assert sorted(r["kind"] for r in refined["privacy"]["rounds"][1:]) == ["elbow", "refine"]
    # Read now, the elbow round's statement composes the refine round opened after its decode (issue 45).
    live = httpx.get(server.url + f"/rounds/{elbow_round['id']}/result").json()["privacy"]
    assert live["central_epsilon"] == refined["privacy"]["central_epsilon"]
    assert live["as_decoded"]["central_epsilon"] == pr["central_epsilon"]
    assert sorted(r["kind"] for r in live["composed"]["rounds"][1:]) == ["elbow", "refine"]


def test_an_elbow_round_needs_ordered_centers(server):
    ds = paper_mixture(1200, d=4, k=3, seed=3)
    parent, first = done_tree_round(server, ds.points)  # k-means centers: no order, no elbow
    assert first.get("elbow") is None
    r = httpx.post(server.url + f"/rounds/{parent}/elbow", headers=server.op_headers(),
                   json={"epsilon": 1.0, "delta": 1e-7, "min_devices": 1000})
    assert r.status_code == 422 and "not in an order" in r.json()["detail"]


def test_an_elbow_round_needs_a_done_parent_and_the_operator(server):
    body = {"k": 3, "dim": 4, "epsilon": 8.0, "n_expected": 1000, "encoder": "lsh"}
    rnd = httpx.post(server.url + "/rounds", json=body, headers=server.op_headers()).json()
    ask = {"epsilon": 1.0, "delta": 1e-7, "min_devices": 100}
    assert httpx.post(server.url + f"/rounds/{rnd['id']}/elbow", json=ask).status_code in (401, 403)
    r = httpx.post(server.url + f"/rounds/{rnd['id']}/elbow", json=ask, headers=server.op_headers())
    assert r.status_code == 409 and "state done" in r.text
    assert httpx.post(server.url + "/rounds/nosuchround/elbow", json=ask, headers=server.op_headers()).status_code == 404


def test_an_elbow_request_is_validated_at_the_edge(server):
    url = server.url + "/rounds/whatever/elbow"
    good = {"epsilon": 1.0, "delta": 1e-7, "min_devices": 100}
    for bad, word in ((good | {"min_devices": 3}, "min_devices"), ({"epsilon": 1.0, "min_devices": 100}, "delta"),
                      (good | {"split": 2}, "split"), (good | {"max_devices": 50}, "max_devices"),
                      (good | {"epsilon": 0}, "epsilon")):
        r = httpx.post(url, json=bad, headers=server.op_headers())
        assert r.status_code == 422 and word in r.text, (bad, r.text)
