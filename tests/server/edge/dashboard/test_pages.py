"""The dashboard's pages in-process: log-in, CSRF, errors with the REST API's
status codes, and a round created, clustered and read from its page."""

from __future__ import annotations

import html
import re
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from shoal.client.encoder import encode_arrays
from shoal.common.kinds.tree import config_from_dict
from shoal.deploy.simulation.datasets import city_locations
from shoal.server.edge.app import create_app
from shoal.server.edge.dashboard import session
from shoal.server.edge.settings import Settings

TOKEN = "op-" + "t" * 20


@pytest.fixture
def client(tmp_path: Path) -> TestClient:
    settings = Settings(db_url=f"sqlite:///{tmp_path / 'ui.db'}", key_path=str(tmp_path / "key.pem"),
                        operator_token=TOKEN, shuffler_token="sh-" + "s" * 20)
    return TestClient(create_app(settings))


def _login_csrf(client: TestClient) -> str:
    """The log-in form's CSRF value (the log-in page also sets it as a cookie)."""
    return re.search(r'name="csrf" value="([0-9a-f]+)"', client.get("/ui/login").text).group(1)


def _login(client: TestClient) -> str:
    r = client.post("/ui/login", data={"token": TOKEN, "next": "/ui/rounds", "csrf": _login_csrf(client)})
    assert r.status_code == 200
    return re.search(r'name="csrf" value="([0-9a-f]+)"', r.text).group(1)


ROUND = {"k": "6", "dim": "2", "epsilon": "4", "n_expected": "20000", "encoder": "auto", "model": "local",
         "low": "0,0", "high": "100,100"}


def test_pages_redirect_to_login_without_a_session(client: TestClient):
    r = client.get("/ui/rounds", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/ui/login?next=/ui/rounds"
    assert client.get("/ui/rounds.json").status_code == 401
    assert client.post("/ui/rounds", data=ROUND, follow_redirects=False).status_code == 303


def test_wrong_token_is_refused_with_403(client: TestClient):
    r = client.post("/ui/login", data={"token": "nope" * 5, "csrf": _login_csrf(client)})
    assert r.status_code == 403 and "wrong operator token" in r.text


def test_session_cookie_is_httponly_strict_and_expires(client: TestClient):
    r = client.post("/ui/login", data={"token": TOKEN, "csrf": _login_csrf(client)}, follow_redirects=False)
    cookie = r.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/ui" in cookie
    value = re.search(r"shoal_ui=([^;]+)", cookie).group(1)
    assert session.valid_session(TOKEN, value)
    assert not session.valid_session(TOKEN, value, now=2e10)  # expired
    assert not session.valid_session("another-token-xxxxxxxx", value)  # rotated token
    sid, issued, mac = value.split(".")
    assert not session.valid_session(TOKEN, f"{sid}.{int(issued) + 1}.{mac}")  # tampered issue time
    assert not session.valid_session(TOKEN, f"{'0' * 32}.{issued}.{mac}")  # another session id


def test_forms_without_the_csrf_token_are_refused(client: TestClient):
    _login(client)
    r = client.post("/ui/rounds", data=ROUND)
    assert r.status_code == 403 and "form expired" in r.text
    assert client.get("/ui/rounds.json").json() == []


def test_bad_round_parameters_are_a_422_with_the_field(client: TestClient):
    csrf = _login(client)
    r = client.post("/ui/rounds", data=ROUND | {"csrf": csrf, "epsilon": "0"})
    assert r.status_code == 422 and "epsilon" in r.text
    r = client.post("/ui/rounds", data=ROUND | {"csrf": csrf, "low": "0,x"})
    assert r.status_code == 422 and "comma-separated numbers" in r.text
    assert client.get("/ui/rounds.json").json() == []


def test_unknown_round_is_a_404_page(client: TestClient):
    _login(client)
    r = client.get("/ui/rounds/0123456789abcdef")
    assert r.status_code == 404 and "0123456789abcdef" in r.text


def test_clustering_an_empty_round_is_a_409_on_its_page(client: TestClient):
    csrf = _login(client)
    r = client.post("/ui/rounds", data=ROUND | {"csrf": csrf})
    rid = r.url.path.rsplit("/", 1)[1]
    r = client.post(f"/ui/rounds/{rid}/cluster", data={"csrf": csrf})
    assert r.status_code == 409 and "no reports" in r.text


def test_a_round_created_reported_and_clustered_shows_its_result(client: TestClient):
    csrf = _login(client)
    r = client.post("/ui/rounds", data=ROUND | {"csrf": csrf})
    assert r.status_code == 200
    rid = r.url.path.rsplit("/", 1)[1]
    cfg = config_from_dict(client.get(f"/rounds/{rid}/config").json()["config"])
    ds = city_locations(20_000, seed=3)
    msgs = [m.model_dump(mode="json") for m in encode_arrays(ds.points, cfg).to_messages()]
    for i in range(0, len(msgs), 5000):
        assert client.post(f"/rounds/{rid}/reports/batch", json={"messages": msgs[i:i + 5000]}).status_code == 202
    assert client.get(f"/ui/rounds/{rid}/state.json").json() == {"id": rid, "state": "open", "reports": 20_000}
    r = client.post(f"/ui/rounds/{rid}/cluster", data={"csrf": csrf})
    assert r.status_code == 200
    page = r.text
    result = client.get(f"/rounds/{rid}/result").json()
    assert result["quality"]["answer"] == "clusters"
    assert html.escape(result["quality"]["verdict"]) in page
    assert len(re.findall(r"<tr><td>\d+</td>", page)) == 6  # the centers table
    for c in result["centers"]:  # in original units
        assert ", ".join(f"{v:.4g}" for v in c) in page
    assert page.count('class="center"') == 6 and page.count('class="density"') == len(result["picture"]["xy"])
    assert "each device" in page  # the privacy statement in words
    r = client.post(f"/ui/rounds/{rid}/delete", data={"csrf": csrf})
    assert r.status_code == 200 and rid not in client.get("/ui/rounds.json").text


def test_the_dashboard_is_not_in_the_openapi_spec(client: TestClient):
    assert not any(p.startswith("/ui") for p in client.get("/openapi.json").json()["paths"])


def test_static_assets_are_served_locally(client: TestClient):
    assert "refresh" in client.get("/ui/static/dashboard.js").text
    assert client.get("/ui/static/dashboard.css").status_code == 200
    page = TestClient(client.app).get("/ui/login").text
    assert "http://" not in page and "https://" not in page  # no CDN


def test_centers_outside_the_coreset_still_draw(client: TestClient):
    from shoal.server.edge.dashboard.view import result_view

    view = result_view({"centers": [[0.0, 1.0, 2.0], [1.0, 1.0, 1.0]], "sizes": [1.0, 2.0], "quality": None,
                         "privacy": {}, "diagnostics": {}, "picture": None})
    assert str(view["plot"]).count('class="center"') == 2 and "centers only" in view["plot_note"]
    assert np.isfinite([float(v) for v in re.findall(r'cx="([-0-9.]+)"', str(view["plot"]))]).all()


def test_a_central_round_shows_its_algorithm_and_whom_its_guarantee_covers(client: TestClient):
    """Issue 17: points arrive sealed (as the shuffler forwards them), the server is
    the curator, and the page says the guarantee covers only readers of the result."""
    import base64

    from shoal.common.wire.envelope import seal
    from shoal.common.wire.fields import new_message_id
    from shoal.common.wire.models import PointMessage

    csrf = _login(client)
    op = {"Authorization": f"Bearer {TOKEN}"}
    body = {"k": 3, "dim": 2, "epsilon": 2.0, "n_expected": 6000, "model": "central", "delta": 1e-6,
            "bound": {"low": [0, 0], "high": [100, 100]}}
    r = client.post("/rounds", json=body, headers=op)
    assert r.status_code == 201, r.text
    rid, key = r.json()["id"], base64.b64decode(r.json()["server_public_key"])
    ds = city_locations(6000, k=3, seed=4)
    ball = ds.bound.to_ball(ds.points)
    sealed = [base64.b64encode(seal(PointMessage(round_id=rid, message_id=new_message_id(), points=[p.tolist()])
                                    .model_dump_json().encode(), key, rid)).decode() for p in ball]
    r = client.post(f"/rounds/{rid}/shuffled", json={"sealed": sealed}, headers={"Authorization": "Bearer sh-" + "s" * 20})
    assert r.status_code == 202 and r.json()["accepted"] == 6000, r.text
    page = client.get(f"/ui/rounds/{rid}").text
    assert "central" in page and "maxcover-003" in page
    r = client.post(f"/ui/rounds/{rid}/cluster", data={"csrf": csrf})
    assert r.status_code == 200
    result = client.get(f"/rounds/{rid}/result").json()
    assert result["privacy"]["model"] == "central" and len(result["centers"]) == 3
    assert "readers of the result" in r.text and "curator" in r.text


def test_a_local_refine_round_opened_from_a_round_page_shows_its_result(client: TestClient):
    from shoal.client.kinds.local_refine import codebook_messages
    from shoal.common.kinds.local_refine import local_refine_from_dict

    csrf = _login(client)
    rid = client.post("/ui/rounds", data=ROUND | {"csrf": csrf}).url.path.rsplit("/", 1)[1]
    cfg = config_from_dict(client.get(f"/rounds/{rid}/config").json()["config"])
    ds = city_locations(30_000, seed=4)
    msgs = [m.model_dump(mode="json") for m in encode_arrays(ds.points[:20_000], cfg).to_messages()]
    for i in range(0, len(msgs), 5000):
        assert client.post(f"/rounds/{rid}/reports/batch", json={"messages": msgs[i:i + 5000]}).status_code == 202
    assert client.post(f"/ui/rounds/{rid}/cluster", data={"csrf": csrf}).status_code == 200
    r = client.post(f"/ui/rounds/{rid}/refine", data={"csrf": csrf, "model": "local", "epsilon": "4"})
    assert r.status_code == 200 and "done=created" in str(r.url)
    child = r.url.path.rsplit("/", 1)[1]
    ref = local_refine_from_dict(client.get(f"/rounds/{child}/config").json()["config"])
    fresh = [m.model_dump(mode="json") for m in codebook_messages(ds.points[20_000:], ref)]
    for i in range(0, len(fresh), 5000):
        assert client.post(f"/rounds/{child}/reports/batch", json={"messages": fresh[i:i + 5000]}).status_code == 202
    r = client.post(f"/ui/rounds/{child}/cluster", data={"csrf": csrf})
    assert r.status_code == 200
    assert len(re.findall(r"<tr><td>\d+</td>", r.text)) == 6 and "each device" in r.text
    assert 'action="/ui/rounds/' + child + '/refine"' not in r.text  # no refine of a refine


def _sealed_points(client, body, points, message):
    """A round created over REST and its points delivered as the shuffler forwards them."""
    import base64

    from shoal.common.wire.envelope import seal

    r = client.post("/rounds", json=body, headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 201, r.text
    rid, key = r.json()["id"], base64.b64decode(r.json()["server_public_key"])
    sealed = [base64.b64encode(seal(message(rid, p).model_dump_json().encode(), key, rid)).decode() for p in points]
    r = client.post(f"/rounds/{rid}/shuffled", json={"sealed": sealed}, headers={"Authorization": "Bearer sh-" + "s" * 20})
    assert r.status_code == 202 and r.json()["accepted"] == len(points), r.text
    return rid


def test_a_greedy_round_page_draws_its_elbow_curve_and_names_the_suggested_k(client: TestClient):
    """Issue 18, Build 3: the private elbow on the round's page (the page read a
    curve shape no result has, and a greedy-001 round's page was a 500)."""
    from shoal.common.wire.fields import new_message_id
    from shoal.common.wire.models import PointMessage

    csrf = _login(client)
    ds = city_locations(6000, k=3, seed=4)
    body = {"k": 5, "dim": 2, "epsilon": 2.0, "n_expected": 6000, "model": "central", "delta": 1e-6,
            "algorithm": "greedy-001", "bound": {"low": [0, 0], "high": [100, 100]}}
    rid = _sealed_points(client, body, ds.bound.to_ball(ds.points),
                         lambda rid, p: PointMessage(round_id=rid, message_id=new_message_id(), points=[p.tolist()]))
    r = client.post(f"/ui/rounds/{rid}/cluster", data={"csrf": csrf})
    assert r.status_code == 200, r.text
    suggested = client.get(f"/rounds/{rid}/result").json()["elbow"]["suggested_k"]
    assert 'data-plot="line"' in r.text and f"suggested k' = {suggested}" in r.text
    # The curator saw the raw points and released this elbow itself: no elbow round on a central round.
    assert f'action="/ui/rounds/{rid}/elbow"' not in r.text


def test_an_elbow_round_opened_from_a_greedy_round_page_draws_the_datas_cost(client: TestClient):
    """A local tree round decoded by the greedy: its ordered centers take an elbow
    round (the data's cost of every k' by secure sums), opened from its page."""
    csrf = _login(client)
    body = {"k": 5, "dim": 2, "epsilon": 4.0, "n_expected": 5_000, "encoder": "nettree",
            "bound": {"low": [0, 0], "high": [100, 100]}, "tuning": {"tree": {"centers": "greedy"}}}
    r = client.post("/rounds", json=body, headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 201, r.text
    rid = r.json()["id"]
    cfg = config_from_dict(r.json()["config"])
    ds = city_locations(5_000, k=3, seed=4)
    msgs = [m.model_dump(mode="json") for m in encode_arrays(ds.points, cfg).to_messages()]
    for i in range(0, len(msgs), 5000):
        assert client.post(f"/rounds/{rid}/reports/batch", json={"messages": msgs[i:i + 5000]}).status_code == 202
    r = client.post(f"/ui/rounds/{rid}/cluster", data={"csrf": csrf})
    assert r.status_code == 200 and f'action="/ui/rounds/{rid}/elbow"' in r.text
    r = client.post(f"/ui/rounds/{rid}/elbow", data={"csrf": csrf, "epsilon": "1", "delta": "1e-8",
                                                      "min_devices": "1000"})
    assert r.status_code == 200 and "done=created" in str(r.url)
    child = r.url.path.rsplit("/", 1)[1]
    _shares_through_the_shuffler(client, child, ds.points)
    r = client.post(f"/ui/rounds/{child}/cluster", data={"csrf": csrf})
    assert r.status_code == 200, r.text
    res = client.get(f"/rounds/{child}/result").json()
    assert 'data-plot="line"' in r.text and f"suggested k' = {res['elbow']['suggested_k']}" in r.text
    assert f'action="/ui/rounds/{child}/elbow"' not in r.text  # no elbow of an elbow
    r = client.post(f"/ui/rounds/{child}/elbow", data={"csrf": csrf, "epsilon": "1", "delta": "1e-8",
                                                        "min_devices": "1000"})
    assert r.status_code == 422 and "already costs every k" in html.unescape(r.text)


def _shares_through_the_shuffler(client, rid, points):
    """A secure-sum round's shares of ``points``' devices, delivered as the shuffler forwards them."""
    import base64

    import numpy as np

    from shoal.client.kinds import device_kind
    from shoal.common.kinds import kind_name, parse_config
    from shoal.common.mechanisms.secure_sum import encode_devices
    from shoal.common.wire.messages import sealed_share_parts

    got = client.get(f"/rounds/{rid}/config").json()
    data = got["config"]
    cfg = parse_config(data)
    contributions = device_kind(kind_name(data)).contributions
    shares = encode_devices(contributions(points, cfg), cfg.secure_sum, np.random.default_rng(0))
    key = base64.b64decode(client.get(f"/rounds/{rid}").json()["server_public_key"])
    sealed = [p for parts in sealed_share_parts(shares, key, rid) for p in parts]
    for lo in range(0, len(sealed), 5000):
        r = client.post(f"/rounds/{rid}/shuffled", json={"sealed": sealed[lo:lo + 5000]},
                        headers={"Authorization": "Bearer sh-" + "s" * 20})
        assert r.status_code == 202, r.text


def test_a_continual_round_page_closes_steps_and_shows_the_latest_release(client: TestClient):
    from shoal.common.wire.fields import new_message_id
    from shoal.common.wire.models import StreamMessage

    csrf = _login(client)
    rng = np.random.default_rng(0)
    pts = np.vstack([rng.normal([0.5, 0.5], 0.02, (30, 2)), rng.normal([-0.5, 0.0], 0.02, (30, 2))])
    body = {"k": 3, "dim": 2, "epsilon": 50.0, "n_expected": 60, "model": "central", "algorithm": "continual",
            "tuning": {"horizon": 4, "levels": 5}}
    rid = _sealed_points(client, body, pts, lambda rid, p: StreamMessage(
        round_id=rid, message_id=new_message_id(), op="insert", item=rng.bytes(16).hex(), point=p.tolist()))
    page = client.get(f"/ui/rounds/{rid}").text
    assert "No step closed yet" in page and "close step 1" in page and 'name="cluster"' not in page
    r = client.post(f"/ui/rounds/{rid}/step", data={"csrf": csrf})
    assert r.status_code == 200 and "step closed" in r.text
    assert "Step 1" in r.text and "close step 2" in r.text and "readers of the result" in r.text
    assert 'data-plot="line"' in r.text and "n/a" in r.text  # the step's elbow; a step releases no sizes
    for _ in range(3):
        client.post(f"/ui/rounds/{rid}/step", data={"csrf": csrf})
    r = client.post(f"/ui/rounds/{rid}/step", data={"csrf": csrf})
    assert r.status_code == 409 and "horizon" in r.text and "Step 4" in r.text
