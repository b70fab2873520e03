"""GET /rounds/open and /device (issue 40): the public list of the rounds a
device may join (no token; only public fields; open rounds only; capped;
rate limited) and the TypeScript device's page with the dashboard's
security headers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from shoal.common.randomness.public_stream import PROTOCOL_VERSION
from shoal.server.edge.app import create_app
from shoal.server.edge.dashboard.headers import CSP
from shoal.server.edge.routers import device_page
from shoal.server.edge.settings import Settings

OP = "o" * 20
HEADERS = {"Authorization": f"Bearer {OP}"}
LOCAL = {"k": 2, "dim": 2, "epsilon": 2.0, "n_expected": 1000, "bound": {"radius": 5}}
SHUFFLE = {"k": 3, "dim": 2, "epsilon": 1.0, "delta": 1e-6, "min_batch": 100, "model": "shuffle",
           "n_expected": 1000, "bound": {"radius": 10}}
PUBLIC = {"id", "kind", "model", "protocol", "dim", "bound", "epsilon", "delta", "device_epsilon"}


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    app = create_app(Settings(db_url=f"sqlite:///{tmp_path}/s.db", key_path=f"{tmp_path}/k.pem",
                              operator_token=OP, shuffler_token="s" * 20))
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


def _create(client: TestClient, body: dict) -> dict:
    r = client.post("/rounds", json=body, headers=HEADERS)
    assert r.status_code == 201, r.text
    return r.json()


def test_open_rounds_lists_public_fields_without_a_token(client: TestClient) -> None:
    local = _create(client, LOCAL)
    shuffle = _create(client, SHUFFLE)
    r = client.get("/rounds/open")  # no Authorization header
    assert r.status_code == 200
    body = r.json()
    assert body["more"] is False
    listed = {x["id"]: x for x in body["rounds"]}
    assert list(listed) == [shuffle["id"], local["id"]]  # newest first
    for x in listed.values():
        assert set(x) <= PUBLIC, set(x) - PUBLIC  # no reports, result, error, created, seed, tree
    assert listed[local["id"]] == {"id": local["id"], "kind": "tree", "model": "local", "protocol": PROTOCOL_VERSION, "dim": 2,
                                   "bound": local["config"]["bound"], "epsilon": 2.0}
    s = listed[shuffle["id"]]
    # The same privacy numbers as GET /rounds/{id} shows (central epsilon, delta, the device's eps0).
    assert {k: s[k] for k in ("model", "epsilon", "delta", "device_epsilon")} == shuffle["privacy"]


def test_closed_and_deleted_rounds_are_not_listed(client: TestClient) -> None:
    a, b, c = (_create(client, LOCAL)["id"] for _ in range(3))
    assert client.post(f"/rounds/{a}/close", headers=HEADERS).status_code == 200
    assert client.delete(f"/rounds/{b}", headers=HEADERS).status_code == 204
    assert [x["id"] for x in client.get("/rounds/open").json()["rounds"]] == [c]


def test_open_rounds_are_capped(client: TestClient) -> None:
    config = _create(client, LOCAL)["config"]
    store = client.app.state.service.store  # type: ignore[attr-defined]
    for i in range(device_page.OPEN_CAP + 4):
        store.create_round(f"r{i:04d}", config)
    full = client.get("/rounds/open").json()
    assert len(full["rounds"]) == device_page.OPEN_CAP and full["more"] is True
    two = client.get("/rounds/open", params={"limit": 2}).json()
    assert len(two["rounds"]) == 2 and two["more"] is True
    assert client.get("/rounds/open", params={"limit": device_page.OPEN_CAP + 1}).status_code == 422
    assert client.get("/rounds/open", params={"limit": 0}).status_code == 422


def test_open_rounds_are_rate_limited(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(device_page, "OPEN_PER_ADDRESS", 5)
    for _ in range(5):
        assert client.get("/rounds/open").status_code == 200
    r = client.get("/rounds/open")
    assert r.status_code == 429
    assert 1 <= int(r.headers["retry-after"]) <= 60
    assert "too many requests" in r.json()["detail"]
    # Other public endpoints are not counted against it, nor blocked by it.
    assert client.get("/protocol").status_code == 200


def test_open_rounds_do_not_shadow_a_round(client: TestClient) -> None:
    """/rounds/open is routed before /rounds/{id}; a round's own page still answers."""
    rid = _create(client, LOCAL)["id"]
    assert client.get(f"/rounds/{rid}").json()["id"] == rid


def test_device_page_has_the_dashboards_headers(client: TestClient, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    r = client.get("/device", follow_redirects=False)
    assert r.status_code == 308 and r.headers["location"] == "/device/"
    # Whatever the state of clients/js/dist here, point the bundle at a file so the page is served.
    bundle = tmp_path / "shoal-device.js"
    bundle.write_text("export {};\n")
    files = dict(device_page.PAGE_FILES, **{"shoal-device.js": (bundle, "text/javascript; charset=utf-8")})
    monkeypatch.setattr(device_page, "PAGE_FILES", files)
    for name, media in [("", "text/html"), ("demo.js", "text/javascript"), ("demo.css", "text/css"),
                        ("shoal-device.js", "text/javascript")]:
        r = client.get(f"/device/{name}")  # no token, no session
        assert r.status_code == 200, (name, r.text)
        assert r.headers["content-type"].startswith(media)
        assert r.headers["content-security-policy"] == CSP
        assert r.headers["x-frame-options"] == "DENY" and r.headers["x-content-type-options"] == "nosniff"
    page = client.get("/device/").text
    assert "<style" not in page and "<script>" not in page  # the CSP allows no inline style or script
    assert client.get("/device/../pyproject.toml").status_code == 404
    assert client.get("/device/index.html.map").status_code == 404


def test_device_page_says_how_to_build_a_missing_bundle(client: TestClient, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    files = dict(device_page.PAGE_FILES, **{"shoal-device.js": (tmp_path / "absent.js", "text/javascript")})
    monkeypatch.setattr(device_page, "PAGE_FILES", files)
    r = client.get("/device/")
    assert r.status_code == 404
    assert "npm run build" in r.text and "absent.js" in r.text
    assert r.headers["content-security-policy"] == CSP
    r = client.get("/device/shoal-device.js")
    assert r.status_code == 404 and "npm run build" in r.json()["detail"]
