"""How ``create_app`` assembles the server: the device endpoints' routes are
matched first (issue 42: route matching walks the routes in order, and
reports are most of the traffic), and that order shadows no other route."""

from pathlib import Path

import pytest
from fastapi import FastAPI
from starlette.routing import Match

from shoal.server.edge.app import create_app
from shoal.server.edge.dashboard import pages
from shoal.server.edge.routers import device_page, health, reports, rounds
from shoal.server.edge.settings import Settings

ROUND = "0123456789abcdef0123456789abcdef"
REPORT_CALLS = [("POST", f"/rounds/{ROUND}/reports"), ("POST", f"/rounds/{ROUND}/reports/binary"),
                ("POST", f"/rounds/{ROUND}/reports/batch"), ("POST", f"/rounds/{ROUND}/shuffled")]


@pytest.fixture
def app(tmp_path: Path) -> FastAPI:
    return create_app(Settings(db_url=f"sqlite:///{tmp_path}/s.db", key_path=f"{tmp_path}/k.pem",
                               operator_token="o" * 20, shuffler_token="s" * 20))


def _scope(app: FastAPI, method: str, path: str) -> dict[str, object]:
    return {"type": "http", "method": method, "path": path, "root_path": "", "headers": [], "app": app}


def test_a_report_post_is_matched_by_the_first_router_included(app: FastAPI) -> None:
    for method, path in REPORT_CALLS:
        scope = _scope(app, method, path)
        first = next(i for i, r in enumerate(app.router.routes) if r.matches(scope)[0] == Match.FULL)
        included = [i for i, r in enumerate(app.router.routes) if not hasattr(r, "path")]  # the included routers
        assert first == included[0], (path, first, included)


def test_no_other_router_has_a_route_for_a_report_path(app: FastAPI) -> None:
    others = [r for router in (health.router, device_page.router, rounds.router, pages.router) for r in router.routes]
    assert len(others) > 20
    for method, path in REPORT_CALLS:
        for verb in (method, "GET"):
            hits = [getattr(r, "path", r) for r in others if r.matches(_scope(app, verb, path))[0] != Match.NONE]
            assert not hits, (verb, path, hits)
    assert {r.path for r in reports.router.routes} == {  # type: ignore[attr-defined]
        "/rounds/{round_id}/reports", "/rounds/{round_id}/reports/binary", "/rounds/{round_id}/reports/batch",
        "/rounds/{round_id}/shuffled"}
