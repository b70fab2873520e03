"""Refine rounds over a real socket: shares in, one Lloyd step out, composed
privacy; a missing share makes the round fail loudly."""

import base64

import httpx
import numpy as np
import pytest
from tests_helpers import done_tree_round

from shoal.common.kinds.refine import contributions, refine_from_dict
from shoal.common.mechanisms.secure_sum import encode_devices
from shoal.common.wire.messages import sealed_share_parts
from shoal.deploy.simulation.datasets import paper_mixture


def _sealed_shares(ds, refine_round):
    cfg = refine_from_dict(refine_round["config"])
    key = base64.b64decode(refine_round["server_public_key"])
    shares = encode_devices(contributions(ds.points, cfg), cfg.secure_sum, np.random.default_rng(0))
    return [p for parts in sealed_share_parts(shares, key, refine_round["id"]) for p in parts], cfg


def test_refine_round_takes_one_lloyd_step_with_composed_privacy(server):
    ds = paper_mixture(3000, d=4, k=3, seed=2)
    parent, first = done_tree_round(server, ds.points)
    r = httpx.post(server.url + f"/rounds/{parent}/refine", headers=server.op_headers(),
                   json={"epsilon": 1.0, "delta": 1e-7, "min_devices": 1000})
    assert r.status_code == 201, r.text
    ref = r.json()
    # A second refine round on the same parent (never filled): its budget counts too.
    r2 = httpx.post(server.url + f"/rounds/{parent}/refine", headers=server.op_headers(),
                    json={"epsilon": 0.5, "delta": 1e-8, "min_devices": 1000})
    assert r2.status_code == 201, r2.text
    sealed, cfg = _sealed_shares(ds, ref)
    shuffler = {"Authorization": f"Bearer {server.shuffler}"}
    rng = np.random.default_rng(1)
    sealed = [sealed[i] for i in rng.permutation(len(sealed))]
    for lo in range(0, len(sealed), 5000):
        assert httpx.post(server.url + f"/rounds/{ref['id']}/shuffled", json={"sealed": sealed[lo:lo + 5000]},
                          headers=shuffler, timeout=60).status_code == 202
    r = httpx.post(server.url + f"/rounds/{ref['id']}/cluster", headers=server.op_headers(), timeout=120)
    assert r.status_code == 200, r.text
    res = r.json()
    assert res["diagnostics"]["devices"] == 3000
    # The refined centers are the means of the parent's Voronoi cells, up to the noise.
    ball = ds.bound.to_ball(ds.points)
    c0 = cfg.center_array
    lab = np.argmin(((ball[:, None] - c0[None]) ** 2).sum(-1), axis=1)
    got = np.array(res["ball_centers"])
    sizes = np.bincount(lab, minlength=3)
    # The parent is random (device randomness comes from the OS): one of its
    # centers may own no point, and then the refine keeps it (a mean of noise
    # would be worse). Cells large enough to beat the noise move to their mean.
    for j in range(3):
        if sizes[j] == 0:
            assert np.allclose(got[j], c0[j]), (j, got[j], c0[j])
        elif sizes[j] >= 300:
            assert np.abs(got[j] - ball[lab == j].mean(0)).max() < 0.05, (j, sizes[j])
    assert sizes.max() >= 1000
    pr = res["privacy"]
    assert pr["central_epsilon"] == first["privacy"]["central_epsilon"] + 1.0 + 0.5
    assert pr["delta"] == 1e-7 + 1e-8 and pr["device_epsilon"] is None
    assert len(pr["rounds"]) == 3 and "not collude" in pr["guarantees"][0]["words"]
    # A refine round takes no direct reports.
    r = httpx.post(server.url + f"/rounds/{ref['id']}/reports", json={})
    assert r.status_code in (409, 422)


def test_a_refine_round_with_a_missing_share_fails_loudly(server):
    ds = paper_mixture(1200, d=4, k=3, seed=3)
    parent, _ = done_tree_round(server, ds.points)
    ref = httpx.post(server.url + f"/rounds/{parent}/refine", headers=server.op_headers(),
                     json={"epsilon": 1.0, "delta": 1e-7, "min_devices": 1000}).json()
    sealed, _ = _sealed_shares(ds, ref)
    shuffler = {"Authorization": f"Bearer {server.shuffler}"}
    kept = sealed[1:]  # the shuffler lost one share
    for lo in range(0, len(kept), 5000):
        assert httpx.post(server.url + f"/rounds/{ref['id']}/shuffled", json={"sealed": kept[lo:lo + 5000]},
                          headers=shuffler, timeout=60).status_code == 202
    r = httpx.post(server.url + f"/rounds/{ref['id']}/cluster", headers=server.op_headers(), timeout=120)
    assert r.status_code == 409 and "missing" in r.json()["detail"]
    state = httpx.get(server.url + f"/rounds/{ref['id']}").json()
    assert state["state"] == "failed" and "SecureSumError" in state["error"]
    assert httpx.get(server.url + f"/rounds/{ref['id']}/result").status_code == 409


def test_refine_needs_a_done_parent_and_the_operator(server):
    body = {"k": 3, "dim": 4, "epsilon": 8.0, "n_expected": 1000, "encoder": "lsh"}
    rnd = httpx.post(server.url + "/rounds", json=body, headers=server.op_headers()).json()
    ask = {"epsilon": 1.0, "delta": 1e-7, "min_devices": 100}
    assert httpx.post(server.url + f"/rounds/{rnd['id']}/refine", json=ask).status_code in (401, 403)
    r = httpx.post(server.url + f"/rounds/{rnd['id']}/refine", json=ask, headers=server.op_headers())
    assert r.status_code == 409 and "state done" in r.text
    r = httpx.post(server.url + f"/rounds/{rnd['id']}/refine", json=ask | {"min_devices": 3}, headers=server.op_headers())
    assert r.status_code == 422


def _send_shares(server, round_json, contributions_of, ds):
    from shoal.common.kinds import parse_config

    cfg = parse_config(round_json["config"])
    key = base64.b64decode(round_json["server_public_key"])
    shares = encode_devices(contributions_of(ds.points, cfg), cfg.secure_sum, np.random.default_rng(0))
    sealed = [p for parts in sealed_share_parts(shares, key, round_json["id"]) for p in parts]
    shuffler = {"Authorization": f"Bearer {server.shuffler}"}
    for lo in range(0, len(sealed), 5000):
        assert httpx.post(server.url + f"/rounds/{round_json['id']}/shuffled", json={"sealed": sealed[lo:lo + 5000]},
                          headers=shuffler, timeout=60).status_code == 202
    r = httpx.post(server.url + f"/rounds/{round_json['id']}/cluster", headers=server.op_headers(), timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


def test_a_refine_round_on_a_partition_round_splits_each_center_in_two_by_default(server):
    from shoal.common.kinds.partition import contributions as partition_contributions

    ds = paper_mixture(2000, d=4, k=3, seed=4)
    body = {"k": 3, "dim": 4, "epsilon": 1.0, "n_expected": 2000, "encoder": "partition", "model": "shuffle",
            "delta": 1e-6, "min_batch": 1000}
    part = httpx.post(server.url + "/rounds", json=body, headers=server.op_headers())
    assert part.status_code == 201, part.text
    _send_shares(server, part.json(), partition_contributions, ds)
    ask = {"epsilon": 1.0, "delta": 1e-7, "min_devices": 1000}
    ref = httpx.post(server.url + f"/rounds/{part.json()['id']}/refine", json=ask, headers=server.op_headers())
    assert ref.status_code == 201, ref.text
    assert ref.json()["config"]["k"] == 6 and ref.json()["config"]["keep"] == 3
    plain = httpx.post(server.url + f"/rounds/{part.json()['id']}/refine", json=ask | {"split": 1},
                       headers=server.op_headers()).json()
    assert plain["config"]["k"] == 3 and plain["config"]["keep"] == 0
    bad = httpx.post(server.url + f"/rounds/{part.json()['id']}/refine", json=ask | {"split": 5},
                     headers=server.op_headers())
    assert bad.status_code == 422 and "split" in bad.text
    res = _send_shares(server, ref.json(), contributions, ds)
    assert len(res["centers"]) == 3 and len(res["sizes"]) == 3 and res["diagnostics"]["candidates"] == 6
    assert res["diagnostics"]["devices"] == 2000


def test_a_one_bit_partition_rounds_mean_centers_the_next_partition_rounds_hyperplanes(server):
    from shoal.common.kinds.partition import contributions as partition_contributions

    ds = paper_mixture(2000, d=4, k=3, seed=4)
    body = {"k": 3, "dim": 4, "epsilon": 1.0, "n_expected": 2000, "encoder": "partition", "model": "shuffle",
            "delta": 1e-6, "min_batch": 1000}
    first = httpx.post(server.url + "/rounds", json=body | {"tuning": {"bits": 1}}, headers=server.op_headers())
    assert first.status_code == 201, first.text
    mean = _send_shares(server, first.json(), partition_contributions, ds)["diagnostics"]["mean"]
    assert np.linalg.norm(np.asarray(mean) - ds.points.mean(0)) < 0.05  # 2000 devices' mean, noise sd ~ 0.005
    wrong = httpx.post(server.url + "/rounds", json=body | {"tuning": {"center": mean[:3]}}, headers=server.op_headers())
    assert wrong.status_code in (400, 422) and "tuning.center must be 4 finite numbers" in wrong.text
    part = httpx.post(server.url + "/rounds", json=body | {"tuning": {"center": mean}}, headers=server.op_headers())
    assert part.status_code == 201, part.text
    cfg = part.json()["config"]
    assert np.allclose(cfg["center"], ds.bound.to_ball(np.asarray([mean]))[0])
    res = _send_shares(server, part.json(), partition_contributions, ds)
    assert len(res["centers"]) == 3 and res["diagnostics"]["devices"] == 2000


def test_a_refine_round_on_a_tree_round_does_not_split(server):
    ds = paper_mixture(1200, d=4, k=3, seed=3)
    parent, _ = done_tree_round(server, ds.points)
    ref = httpx.post(server.url + f"/rounds/{parent}/refine", headers=server.op_headers(),
                     json={"epsilon": 1.0, "delta": 1e-7, "min_devices": 1000}).json()
    assert ref["config"]["k"] == 3 and ref["config"]["keep"] == 0


def test_every_result_of_a_family_composes_the_rounds_opened_after_its_decode(server):
    """Issue 45: statements are composed when read. A refine child decoded
    before its siblings were opened, the siblings, and the parent all show
    every round opened on the parent, with the composed (eps, delta)."""
    from tests_helpers import send_shares

    ds = paper_mixture(400, d=3, k=3, seed=4)
    parent, first = done_tree_round(server, ds.points)
    op = server.op_headers()

    def child(eps: float, delta: float) -> dict:
        r = httpx.post(server.url + f"/rounds/{parent}/refine", headers=op,
                       json={"epsilon": eps, "delta": delta, "min_devices": 100})
        assert r.status_code == 201, r.text
        return r.json()

    def decode(rnd: dict) -> dict:
        send_shares(server, rnd, ds.points)
        r = httpx.post(server.url + f"/rounds/{rnd['id']}/cluster", headers=op, timeout=120)
        assert r.status_code == 200, r.text
        return r.json()

    one = child(1.0, 1e-7)
    decoded = decode(one)
    assert decoded["privacy"]["central_epsilon"] == first["privacy"]["central_epsilon"] + 1.0
    two, three = child(0.5, 1e-8), child(0.25, 1e-9)  # opened after the first child's decode
    decode(two)
    eps = first["privacy"]["central_epsilon"] + 1.0 + 0.5 + 0.25
    ids = [one["id"], two["id"], three["id"]]
    for rid in (one["id"], two["id"]):
        pr = httpx.get(server.url + f"/rounds/{rid}/result").json()["privacy"]
        assert pr["central_epsilon"] == pytest.approx(eps) and pr["delta"] == pytest.approx(1e-7 + 1e-8 + 1e-9)
        assert [row["round"] for row in pr["rounds"][1:]] == sorted(ids)
        assert pr["composed"]["parent"] == parent and pr["composed"]["central_epsilon"] == pytest.approx(eps)
    first_read = httpx.get(server.url + f"/rounds/{one['id']}/result").json()["privacy"]
    assert first_read["as_decoded"]["central_epsilon"] == decoded["privacy"]["central_epsilon"]
    own = httpx.get(server.url + f"/rounds/{parent}/result").json()["privacy"]
    assert own["central_epsilon"] == first["privacy"]["central_epsilon"]  # the parent's own statement stays
    assert [row["round"] for row in own["composed"]["rounds"][1:]] == sorted(ids)
    assert own["composed"]["central_epsilon"] == pytest.approx(eps)
    assert "opened on it so far" in own["composed"]["read"]


def test_a_refine_round_opens_on_a_refine_round_and_the_chain_composes_from_its_first_round(server):
    """Issue 41: the partition stage's refine chain. A refine round on a refine round takes a plain
    Lloyd step from its centers; every member's statement composes the first round and the whole
    chain; a local refine round does not open on a refine round."""
    from tests_helpers import send_shares

    ds = paper_mixture(400, d=3, k=3, seed=5)
    parent, first = done_tree_round(server, ds.points)
    op = server.op_headers()

    def refine_on(rid: str, eps: float, delta: float) -> dict:
        r = httpx.post(server.url + f"/rounds/{rid}/refine", headers=op,
                       json={"epsilon": eps, "delta": delta, "min_devices": 100})
        assert r.status_code == 201, r.text
        send_shares(server, r.json(), ds.points)
        res = httpx.post(server.url + f"/rounds/{r.json()['id']}/cluster", headers=op, timeout=120)
        assert res.status_code == 200, res.text
        return {"id": r.json()["id"], "config": r.json()["config"], "result": res.json()}

    one = refine_on(parent, 1.0, 1e-7)
    two = refine_on(one["id"], 0.5, 1e-8)
    assert two["config"]["parent_id"] == one["id"] and two["config"]["keep"] == 0 and two["config"]["k"] == 3
    assert np.allclose(two["config"]["centers"], one["result"]["ball_centers"])  # the step starts from its parent's
    # The first step on a tree round is plain; the second combines with it by its stated noise variance.
    assert set(one["result"]["diagnostics"]["combined"]) <= {0.0, 1.0}  # a mean taken whole, or a gated parent's
    assert all(v is None or v > 0 for v in one["result"]["diagnostics"]["center_variance"])
    assert all(0.0 <= lam <= 1.0 for lam in two["result"]["diagnostics"]["combined"])
    eps, delta = first["privacy"]["central_epsilon"] + 1.5, first["privacy"]["delta"] + 1e-7 + 1e-8
    decoded = two["result"]["privacy"]
    assert decoded["central_epsilon"] == pytest.approx(eps) and decoded["delta"] == pytest.approx(delta)
    assert [(row["round"], row["parent"]) for row in decoded["rounds"][1:]] == [(one["id"], parent), (two["id"], one["id"])]
    for rid in (parent, one["id"], two["id"]):
        pr = httpx.get(server.url + f"/rounds/{rid}/result").json()["privacy"]
        assert pr["composed"]["parent"] == parent and pr["composed"]["central_epsilon"] == pytest.approx(eps)
        assert len(pr["composed"]["rounds"]) == 3
    local = httpx.post(server.url + f"/rounds/{two['id']}/refine", headers=op, json={"model": "local", "epsilon": 1.0})
    assert local.status_code in (400, 409, 422) and "a local refine round opens on a first round" in local.text
