"""Every result shape every kind produces, on its round's page (issue 39): made
through the real API (``dashboard_rounds.py``), decoded by each kind's real
decoder, then read from the dashboard: no 500, the centers table and plot
drawn, and the privacy numbers the round's kind states."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from dashboard_rounds import Api, every_shape
from fastapi.testclient import TestClient

from shoal.server.edge.app import create_app
from shoal.server.edge.settings import Settings

TOKEN, SHUFFLER = "op-" + "t" * 20, "sh-" + "s" * 20


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[TestClient, dict[str, str]]:
    """One server in-process with a decoded round of every shape, and a logged-in client."""
    tmp: Path = tmp_path_factory.mktemp("shapes")
    client = TestClient(create_app(Settings(db_url=f"sqlite:///{tmp / 'ui.db'}", key_path=str(tmp / "key.pem"),
                                            operator_token=TOKEN, shuffler_token=SHUFFLER)))
    shapes = every_shape(Api(client, TOKEN, SHUFFLER))
    csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', client.get("/ui/login").text).group(1)
    assert client.post("/ui/login", data={"token": TOKEN, "csrf": csrf}).status_code == 200
    return client, shapes


def _summary(page: str) -> dict[str, str]:
    """The round page's summary table, by row name."""
    table = page.split('<table class="summary">', 1)[1].split("</table>", 1)[0]
    return {k: html.unescape(v) for k, v in re.findall(r"<tr><th>([^<]+)</th><td>([^<]*)</td></tr>", table)}


def _result(client: TestClient, rid: str) -> dict:
    """What the page shows as the result: the round's result, or a continual round's latest step."""
    r = client.get(f"/rounds/{rid}/result")
    if r.status_code == 200:
        return r.json()
    return client.get(f"/rounds/{rid}/steps").json()[-1]


def test_every_result_shape_has_its_page_table_and_plot(site):
    client, shapes = site
    assert len(shapes) == 15
    for name, rid in shapes.items():
        r = client.get(f"/ui/rounds/{rid}")
        assert r.status_code == 200, (name, r.status_code, r.text[:300])
        result = _result(client, rid)
        centers_table = r.text.split('<table class="centers">', 1)[1].split("</table>", 1)[0]
        assert len(re.findall(r"<tr><td>\d+</td>", centers_table)) == len(result["centers"]), name
        assert r.text.count('data-plot="centers"') == 1 and r.text.count('class="center"') == len(result["centers"]), name
        assert ('data-plot="line"' in r.text) == bool((result.get("elbow") or {}).get("costs")), name
        assert "could not be drawn" not in r.text and "n/a" not in _summary(r.text).values(), name
        # CSP without 'unsafe-inline': no inline script, handler or style attribute on any page.
        assert not re.search(r"<script(?![^>]*\bsrc=)|\son[a-z]+=|\sstyle=", r.text), name


def test_kinds_with_an_elbow_curve_draw_it(site):
    client, shapes = site
    for name in ("central greedy", "elbow", "continual"):
        assert 'data-plot="line"' in client.get(f"/ui/rounds/{shapes[name]}").text, name


def test_fewer_distinct_centers_than_k_say_which_center_each_repeats(site):
    """The issue's 500: k rows of centers, one expected error per distinct center."""
    client, shapes = site
    for name in ("fewer distinct centers than k", "one point", "tree 2-D", "tree 5-D"):
        result = client.get(f"/rounds/{shapes[name]}/result").json()
        distinct = result["quality"]["distinct_centers"]
        page = client.get(f"/ui/rounds/{shapes[name]}").text
        assert page.count("(repeats center") == len(result["centers"]) - distinct, name
    result = client.get(f"/rounds/{shapes['fewer distinct centers than k']}/result").json()
    assert len(result["quality"]["center_errors"]) < len(result["centers"])  # the shape that was a 500


def test_a_shuffle_round_shows_the_central_epsilon_and_the_devices_eps0_apart(site):
    client, shapes = site
    rid = shapes["tree shuffle"]
    config = client.get(f"/rounds/{rid}").json()["config"]
    privacy = client.get(f"/rounds/{rid}/result").json()["privacy"]
    summary = _summary(client.get(f"/ui/rounds/{rid}").text)
    assert config["central_epsilon"] == 1.0 and config["epsilon"] > 1.2  # the config's epsilon is eps0
    assert summary["epsilon"] == f"{privacy['central_epsilon']:.4g}" == "1"
    assert summary["device epsilon"] == f"{config['epsilon']:.4g}" and summary["delta"] == "1e-06"
    assert summary["min batch"] == "100"
    row = client.get("/ui/rounds").text.split(f'data-round="{rid}"', 1)[1].split("</tr>", 1)[0]
    assert "<td>1</td>" in row and f"{config['epsilon']:.4g}" not in row


def test_a_central_round_shows_its_central_guarantee_and_no_device_epsilon(site):
    client, shapes = site
    summary = _summary(client.get(f"/ui/rounds/{shapes['central']}").text)
    assert summary["model"] == "central" and summary["encoder"] == "maxcover-003"
    assert summary["epsilon"] == "2" and summary["delta"] == "1e-06" and "device epsilon" not in summary


def test_a_local_round_shows_no_delta_and_no_batch(site):
    client, shapes = site
    for name in ("tree 2-D", "sketch", "local refine"):
        summary = _summary(client.get(f"/ui/rounds/{shapes[name]}").text)
        assert summary["model"] == "local" and "delta" not in summary and "min batch" not in summary, name
        assert "device epsilon" not in summary, name
    assert _summary(client.get(f"/ui/rounds/{shapes['tree 2-D']}").text)["epsilon"] == "8"


def test_a_round_opened_on_a_parent_shows_its_own_epsilon_and_the_composed_one(site):
    client, shapes = site
    summary = _summary(client.get(f"/ui/rounds/{shapes['refine']}").text)
    assert summary["model"] == "shuffle" and summary["epsilon"] == "1" and summary["delta"] == "1e-07"
    assert summary["with its parent"].startswith("9")  # the local parent's 8, plus 1
    summary = _summary(client.get(f"/ui/rounds/{shapes['local refine']}").text)
    assert summary["epsilon"] == "4" and summary["with its parent"] == "8"  # fresh devices: the larger one


def test_a_secure_sum_round_without_a_decode_yet_shows_its_own_guarantee(site):
    client, shapes = site
    api = Api(client, TOKEN, SHUFFLER)
    child = api.create({"epsilon": 0.5, "delta": 1e-8, "min_devices": 100}, f"/rounds/{shapes['tree 2-D']}/refine")
    summary = _summary(client.get(f"/ui/rounds/{child['id']}").text)
    assert summary["epsilon"] == "0.5" and summary["delta"] == "1e-08"


def test_a_refine_form_shows_exactly_on_the_rounds_a_refine_round_opens_on(site):
    """The registry's ``refinable``: tree, sketch, partition and refine rounds (a refine round's
    next step is a chain), not central, elbow, local refine or continual rounds."""
    client, shapes = site
    for name, rid in shapes.items():
        kind = client.get(f"/rounds/{rid}/config").json()["config"]["kind"]
        page = client.get(f"/ui/rounds/{rid}").text
        has_form = f'action="/ui/rounds/{rid}/refine"' in page
        assert has_form == (kind in ("tree", "sketch", "partition", "refine")), (name, kind)
