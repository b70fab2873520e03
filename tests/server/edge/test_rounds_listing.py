"""GET /rounds (issue 39, Build 6): pages of rounds, newest first, with the next
page's cursor in headers (the body stays a list), on SQLite and PostgreSQL;
every round listed with its privacy in brief (the central epsilon in the
shuffle and central models, the device's in the local model)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from tests_helpers import pg_schema

from shoal.server.edge.app import create_app
from shoal.server.edge.settings import Settings
from shoal.server.storage.store import Store

OP = "o" * 20
HEADERS = {"Authorization": f"Bearer {OP}"}
LOCAL = {"k": 2, "dim": 2, "epsilon": 2.0, "n_expected": 1000}


def _client(db_url: str, tmp_path: Path) -> Iterator[TestClient]:
    app = create_app(Settings(db_url=db_url, key_path=f"{tmp_path}/k.pem", operator_token=OP,
                              shuffler_token="s" * 20))
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


@pytest.fixture(params=["sqlite", "postgres"])
def client(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TestClient]:
    if request.param == "sqlite":
        yield from _client(f"sqlite:///{tmp_path}/s.db", tmp_path)
    else:
        with pg_schema() as url:
            yield from _client(url, tmp_path)


@pytest.fixture
def sqlite_client(tmp_path: Path) -> Iterator[TestClient]:
    yield from _client(f"sqlite:///{tmp_path}/s.db", tmp_path)


def _store(client: TestClient) -> Store:
    store: Store = client.app.state.service.store  # type: ignore[attr-defined]
    return store


def _rounds(client: TestClient, count: int, created: float | None = None) -> list[str]:
    """``count`` rounds with one config (straight into the store: creating 100
    rounds through the API derives 100 configs), optionally all created at the
    same instant; their ids, newest first as GET /rounds orders them."""
    config = client.post("/rounds", json=LOCAL, headers=HEADERS).json()["config"]
    store = _store(client)
    for i in range(count - 1):
        store.create_round(f"r{i:05d}", config)
    if created is not None:
        store._execute(store._sql("UPDATE rounds SET created = ?"), (created,))
    return [r.id for r in sorted(store.list_rounds(), key=lambda r: (r.created, r.id), reverse=True)]


def _listing(client: TestClient, **query: object):
    return client.get("/rounds", params=query, headers=HEADERS)


def _all_pages(client: TestClient, limit: int) -> list[list[str]]:
    pages, cursor = [], None
    while True:
        r = _listing(client, limit=limit, **({"cursor": cursor} if cursor else {}))
        assert r.status_code == 200
        pages.append([x["id"] for x in r.json()])
        cursor = r.headers.get("x-next-cursor")
        if cursor is None:
            assert "link" not in r.headers
            return pages


def test_the_first_page_is_the_newest_hundred_rounds(client: TestClient):
    ids = _rounds(client, 105)
    r = _listing(client)
    assert r.status_code == 200 and isinstance(r.json(), list)  # the body is still a list
    assert [x["id"] for x in r.json()] == ids[:100]
    assert r.headers["x-next-cursor"]


def test_following_the_cursor_lists_every_round_once_newest_first(client: TestClient):
    ids = _rounds(client, 23)
    pages = _all_pages(client, 5)
    assert [len(p) for p in pages] == [5, 5, 5, 5, 3]
    assert [i for p in pages for i in p] == ids


def test_rounds_created_in_the_same_instant_are_split_across_pages_by_id(client: TestClient):
    ids = _rounds(client, 7, created=1.7e9)
    assert [i for p in _all_pages(client, 3) for i in p] == ids


def test_a_full_last_page_has_no_next_cursor(client: TestClient):
    _rounds(client, 4)
    assert [len(p) for p in _all_pages(client, 2)] == [2, 2]


def test_a_round_created_between_pages_does_not_shift_the_next_page(client: TestClient):
    ids = _rounds(client, 6)
    first = _listing(client, limit=3)
    client.post("/rounds", json=LOCAL, headers=HEADERS)  # newer than every listed round
    second = _listing(client, limit=3, cursor=first.headers["x-next-cursor"])
    assert [x["id"] for x in second.json()] == ids[3:]


def test_the_link_header_is_the_next_page_url(client: TestClient):
    ids = _rounds(client, 4)
    r = _listing(client, limit=3)
    link = r.headers["link"]
    assert link.startswith("<") and link.endswith('>; rel="next"')
    nxt = client.get(link[1:link.index(">")], headers=HEADERS)
    assert [x["id"] for x in nxt.json()] == ids[3:]


def test_listing_needs_the_operator_token(sqlite_client: TestClient):
    assert sqlite_client.get("/rounds").status_code == 401


def _refused(client: TestClient, **query: object) -> str:
    r = _listing(client, **query)
    assert r.status_code == 422, r.text
    return str(r.json()["detail"])


def test_a_limit_of_zero_is_refused(sqlite_client: TestClient):
    assert "greater than or equal to 1" in _refused(sqlite_client, limit=0)


def test_a_limit_over_1000_is_refused(sqlite_client: TestClient):
    assert "less than or equal to 1000" in _refused(sqlite_client, limit=1001)


def test_a_limit_that_is_not_an_integer_is_refused(sqlite_client: TestClient):
    assert "'limit'" in _refused(sqlite_client, limit="ten") and "valid integer" in _refused(sqlite_client, limit="ten")


def test_a_fractional_limit_is_refused(sqlite_client: TestClient):
    assert "valid integer" in _refused(sqlite_client, limit="2.5")


def test_a_cursor_that_is_not_base64_is_refused(sqlite_client: TestClient):
    assert "cursor: not a cursor this server gave" in _refused(sqlite_client, cursor="!!!")


def test_a_cursor_without_a_creation_time_is_refused(sqlite_client: TestClient):
    cursor = base64.urlsafe_b64encode(b"abc:0123").decode()
    assert "cursor: not a cursor this server gave" in _refused(sqlite_client, cursor=cursor)


def test_a_cursor_with_an_infinite_creation_time_is_refused(sqlite_client: TestClient):
    cursor = base64.urlsafe_b64encode(b"inf:0123").decode()
    assert "cursor: not a cursor this server gave" in _refused(sqlite_client, cursor=cursor)


def test_a_cursor_without_a_round_id_is_refused(sqlite_client: TestClient):
    cursor = base64.urlsafe_b64encode(b"1700000000.5:").decode()
    assert "cursor: not a cursor this server gave" in _refused(sqlite_client, cursor=cursor)


def test_an_unknown_query_parameter_is_refused(sqlite_client: TestClient):
    assert "'limt'" in _refused(sqlite_client, limt=5)


# -- privacy in brief --
def _privacy(client: TestClient, body: dict[str, object]) -> dict[str, object]:
    created = client.post("/rounds", json=body, headers=HEADERS)
    assert created.status_code == 201, created.text
    listed = next(x for x in _listing(client).json() if x["id"] == created.json()["id"])
    assert listed["privacy"] == created.json()["privacy"] == client.get(f"/rounds/{listed['id']}").json()["privacy"]
    return dict(listed["privacy"])


def test_a_local_round_lists_the_device_epsilon_as_its_epsilon_and_no_delta(sqlite_client: TestClient):
    assert _privacy(sqlite_client, LOCAL) == {"model": "local", "epsilon": 2.0}


def test_a_shuffle_round_lists_the_central_epsilon_and_eps0_as_device_epsilon(sqlite_client: TestClient):
    body = LOCAL | {"model": "shuffle", "epsilon": 1.0, "delta": 1e-6, "min_batch": 1000}
    privacy = _privacy(sqlite_client, body)
    config = _listing(sqlite_client).json()[0]["config"]
    assert privacy["model"] == "shuffle"
    # the central guarantee eps0 achieves: at most, and within 1e-4 of, what was asked
    assert 1.0 - 1e-4 < privacy["epsilon"] <= 1.0 and privacy["delta"] == pytest.approx(1e-6)
    assert privacy["device_epsilon"] == pytest.approx(config["epsilon"]) and privacy["device_epsilon"] > 1.0


def test_a_central_round_lists_its_epsilon_and_delta_and_no_device_epsilon(sqlite_client: TestClient):
    privacy = _privacy(sqlite_client, LOCAL | {"model": "central", "delta": 1e-6})
    assert privacy == {"model": "central", "epsilon": pytest.approx(2.0), "delta": pytest.approx(1e-6)}
