"""The decode button of a round's page (issue 44 on the dashboard): "Decode" for
a round not decoded yet; on a done round "Decode again (post-processing)" only
where the kind's decode is post-processing (``decode_draws_noise`` False),
posting ``again``; a central round's page says "released once" instead."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from dashboard_rounds import Api, blobs, central, tree
from fastapi.testclient import TestClient

from shoal.server.edge.app import create_app
from shoal.server.edge.settings import Settings

TOKEN, SHUFFLER = "op-" + "t" * 20, "sh-" + "s" * 20
AGAIN = "Decode again (post-processing)"


@pytest.fixture
def site(tmp_path: Path) -> tuple[TestClient, Api, str]:
    """A server in-process, an API client of it, and a logged-in page client's CSRF token."""
    client = TestClient(create_app(Settings(db_url=f"sqlite:///{tmp_path / 'ui.db'}", key_path=str(tmp_path / "k.pem"),
                                            operator_token=TOKEN, shuffler_token=SHUFFLER)))
    login = re.search(r'name="csrf" value="([0-9a-f]+)"', client.get("/ui/login").text).group(1)
    r = client.post("/ui/login", data={"token": TOKEN, "csrf": login})
    csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', r.text).group(1)
    return client, Api(client, TOKEN, SHUFFLER), csrf


def _actions(page: str) -> str:
    return page.split('<div class="actions">', 1)[1].split("</div>", 1)[0]


def _versions(client: TestClient, rid: str) -> list[int]:
    r = client.get(f"/rounds/{rid}/results", headers={"Authorization": f"Bearer {TOKEN}"})
    return [v["version"] for v in r.json()]


def test_a_round_not_decoded_yet_offers_decode(site):
    client, api, _ = site
    rid = api.create({"k": 2, "dim": 2, "epsilon": 4.0, "n_expected": 100})["id"]
    actions = _actions(client.get(f"/ui/rounds/{rid}").text)
    assert ">Decode</button>" in actions
    assert AGAIN not in actions and 'name="again"' not in actions and "released once" not in actions


def test_a_done_local_round_offers_decode_again_which_adds_a_result_version(site):
    client, api, csrf = site
    rid = tree(api, blobs(2000, 2, seed=3))
    actions = _actions(client.get(f"/ui/rounds/{rid}").text)
    assert AGAIN in actions and '<input type="hidden" name="again" value="true">' in actions
    assert ">Decode</button>" not in actions
    r = client.post(f"/ui/rounds/{rid}/cluster", data={"csrf": csrf, "again": "true"})
    assert r.status_code == 200 and r.url.params["done"] == "again"
    assert "round decoded again" in r.text
    assert _versions(client, rid) == [1, 2]


def test_posting_decode_without_again_on_a_done_round_keeps_its_one_result(site):
    client, api, csrf = site
    rid = tree(api, blobs(2000, 2, seed=3))
    assert client.post(f"/ui/rounds/{rid}/cluster", data={"csrf": csrf}).status_code == 200
    assert _versions(client, rid) == [1]


def test_a_done_central_round_says_released_once_and_offers_no_decode(site):
    client, api, _ = site
    rid = central(api)
    actions = _actions(client.get(f"/ui/rounds/{rid}").text)
    assert "released once" in actions
    assert 'action="/ui/rounds/' + rid + '/cluster"' not in actions and AGAIN not in actions


def test_decode_again_posted_for_a_central_round_is_a_409_on_its_page(site):
    client, api, csrf = site
    rid = central(api)
    r = client.post(f"/ui/rounds/{rid}/cluster", data={"csrf": csrf, "again": "true"})
    assert r.status_code == 409 and "a second decode would be a second release" in r.text
    assert _versions(client, rid) == [1]


def test_decode_again_posted_for_a_round_not_decoded_yet_is_a_409_on_its_page(site):
    client, api, csrf = site
    rid = api.create({"k": 2, "dim": 2, "epsilon": 4.0, "n_expected": 100})["id"]
    r = client.post(f"/ui/rounds/{rid}/cluster", data={"csrf": csrf, "again": "true"})
    assert r.status_code == 409 and "has no result to decode again" in r.text
