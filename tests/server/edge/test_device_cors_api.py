"""Browser devices on an operator's own pages (SHOAL_DEVICE_ORIGINS,
``common/services/device_cors.py``): the server answers CORS for the listed origins
on the device endpoints, for GET and POST with content-type only, and on
nothing else."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from shoal.common.errors import ConfigError
from shoal.server.edge.app import create_app
from shoal.server.edge.settings import Settings

OP = "o" * 20
PAGE = "https://app.example"


def _client(tmp_path: Path, origins: tuple[str, ...]) -> TestClient:
    return TestClient(create_app(Settings(db_url=f"sqlite:///{tmp_path}/s.db", key_path=f"{tmp_path}/k.pem",
                                          operator_token=OP, shuffler_token="s" * 20, device_origins=origins)))


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with _client(tmp_path, (PAGE,)) as c:
        yield c


def _preflight(client: TestClient, path: str, origin: str = PAGE, method: str = "POST", headers: str = "content-type"):
    return client.options(path, headers={"Origin": origin, "Access-Control-Request-Method": method,
                                         "Access-Control-Request-Headers": headers})


def test_a_listed_page_may_post_a_report(client: TestClient) -> None:
    r = _preflight(client, "/rounds/r1/reports/binary")
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == PAGE
    assert "POST" in r.headers["access-control-allow-methods"]
    assert "access-control-allow-credentials" not in r.headers


def test_a_listed_page_reads_the_protocol_and_a_config(client: TestClient) -> None:
    r = client.get("/protocol", headers={"Origin": PAGE})
    assert r.status_code == 200 and r.headers["access-control-allow-origin"] == PAGE
    created = client.post("/rounds", json={"k": 2, "dim": 2, "epsilon": 2.0, "n_expected": 1000},
                          headers={"Authorization": f"Bearer {OP}"})
    r = client.get(f"/rounds/{created.json()['id']}/config", headers={"Origin": PAGE})
    assert r.status_code == 200 and r.headers["access-control-allow-origin"] == PAGE


def test_another_page_is_refused(client: TestClient) -> None:
    r = _preflight(client, "/rounds/r1/reports", origin="https://evil.example")
    assert r.status_code == 400
    assert "access-control-allow-origin" not in r.headers
    assert "access-control-allow-origin" not in client.get("/protocol", headers={"Origin": "https://evil.example"}).headers


def test_an_operator_endpoint_gets_no_cors(client: TestClient) -> None:
    r = _preflight(client, "/rounds/r1/cluster")
    assert "access-control-allow-origin" not in r.headers
    r = client.get("/rounds", headers={"Origin": PAGE, "Authorization": f"Bearer {OP}"})
    assert r.status_code == 200 and "access-control-allow-origin" not in r.headers


def test_a_page_cannot_send_an_operator_token_to_a_device_endpoint(client: TestClient) -> None:
    r = _preflight(client, "/rounds/r1", method="DELETE", headers="authorization")
    assert r.status_code == 400


def test_no_cross_origin_access_by_default(tmp_path: Path) -> None:
    with _client(tmp_path, ()) as c:
        assert "access-control-allow-origin" not in c.get("/protocol", headers={"Origin": PAGE}).headers


def test_unparsed_origins_are_refused() -> None:
    with pytest.raises(ConfigError, match="'app.example' is not an origin"):
        Settings(operator_token=OP, shuffler_token="s" * 20, device_origins=("app.example",))
    with pytest.raises(ConfigError, match="device_origins must be parsed origins"):
        Settings(operator_token=OP, shuffler_token="s" * 20, device_origins=("https://app.example/",))


def test_the_environment_sets_the_origins(monkeypatch: pytest.MonkeyPatch) -> None:
    from shoal.server.edge.settings import load_settings

    monkeypatch.setenv("SHOAL_OPERATOR_TOKEN", OP)
    monkeypatch.setenv("SHOAL_SHUFFLER_TOKEN", "s" * 20)
    monkeypatch.setenv("SHOAL_DEVICE_ORIGINS", f"{PAGE},http://localhost:5173")
    assert load_settings().device_origins == (PAGE, "http://localhost:5173")
    monkeypatch.setenv("SHOAL_DEVICE_ORIGINS", "https://app.example/path")
    with pytest.raises(ConfigError, match="SHOAL_DEVICE_ORIGINS"):
        load_settings()
