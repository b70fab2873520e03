"""The dashboard's hardening (issue 39): the log-in's rate limit, sessions that
a log-out or a new operator token revokes, CSRF on every POST (log-in and
log-out included), and the security headers on every response under /ui."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from shoal.server.edge.app import create_app
from shoal.server.edge.dashboard import session
from shoal.server.edge.dashboard.headers import HEADERS
from shoal.server.edge.dashboard.limits import GLOBAL, PER_ADDRESS, LoginLimiter
from shoal.server.edge.settings import Settings

TOKEN = "op-" + "t" * 20
CSRF = re.compile(r'name="csrf" value="([0-9a-f]+)"')


@pytest.fixture
def app(tmp_path: Path):
    return create_app(Settings(db_url=f"sqlite:///{tmp_path / 'ui.db'}", key_path=str(tmp_path / "key.pem"),
                               operator_token=TOKEN, shuffler_token="sh-" + "s" * 20))


def _client(app, address: str = "10.0.0.1") -> TestClient:
    return TestClient(app, client=(address, 40000))


def _try(client: TestClient, token: str):
    """One log-in attempt through the page, as a browser makes it."""
    csrf = CSRF.search(client.get("/ui/login").text).group(1)
    return client.post("/ui/login", data={"token": token, "csrf": csrf, "next": "/ui/rounds"}, follow_redirects=False)


def _logged_in(app, address: str = "10.0.0.1") -> tuple[TestClient, str]:
    client = _client(app, address)
    r = _try(client, TOKEN)
    assert r.status_code == 303 and r.headers["location"] == "/ui/rounds"
    return client, client.cookies[session.COOKIE]


# -- rate limit --
def test_the_21st_wrong_token_within_a_minute_from_one_address_is_a_429(app):
    client = _client(app)
    for i in range(PER_ADDRESS):
        r = _try(client, f"wrong-token-{i:04d}-xxxxxx")
        assert r.status_code == 403 and "wrong operator token" in r.text, i
    r = _try(client, "wrong-token-last-xxxxxxxx")
    assert r.status_code == 429 and "too many wrong tokens" in r.text
    assert 1 <= int(r.headers["retry-after"]) <= 60
    # Refused without being checked: the right token gets no different answer now.
    r = _try(client, TOKEN)
    assert r.status_code == 429 and session.COOKIE not in r.cookies
    # Another address is not limited by this one's failures.
    assert _try(_client(app, "10.0.0.2"), TOKEN).status_code == 303


def test_the_limit_slides_per_address_and_over_all_addresses():
    limiter = LoginLimiter(per_address=3, total=5, window=60.0)
    for t in (0.0, 10.0, 20.0):
        assert limiter.retry_after("a", now=t) is None
        limiter.failed("a", now=t)
    assert limiter.retry_after("a", now=30.0) == 30  # until the failure at t=0 leaves the window
    assert limiter.retry_after("a", now=60.5) is None  # it has: one more try
    limiter.failed("b", now=61.0)
    limiter.failed("c", now=61.0)
    limiter.failed("d", now=61.0)  # 5 failures in [10, 61] over all addresses: everyone waits
    assert limiter.retry_after("e", now=62.0) == 8  # the failure at t=10 leaves at 70
    assert limiter.retry_after("e", now=70.5) is None


def test_the_global_limit_stops_a_guess_spread_over_many_addresses(app):
    for i in range(GLOBAL):
        assert _try(_client(app, f"10.1.{i // 250}.{i % 250}"), f"wrong-token-{i:04d}-xxxxxx").status_code == 403
    r = _try(_client(app, "10.9.9.9"), TOKEN)
    assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1


# -- sessions --
def test_a_cookie_saved_before_log_out_is_sent_to_the_log_in_page_after_it(app):
    client, cookie = _logged_in(app)
    csrf = CSRF.search(client.get("/ui/rounds").text).group(1)
    r = client.post("/ui/logout", data={"csrf": csrf}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/ui/login"
    thief = _client(app, "10.0.0.3")
    thief.cookies.set(session.COOKIE, cookie, path="/ui")
    r = thief.get("/ui/rounds", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/ui/login")
    assert thief.get("/ui/rounds.json").status_code == 401
    # A new log-in is a new session, which works.
    assert _logged_in(app)[0].get("/ui/rounds", follow_redirects=False).status_code == 200


def test_log_out_needs_the_sessions_csrf_token(app):
    client, _ = _logged_in(app)
    r = client.post("/ui/logout", data={}, follow_redirects=False)
    assert r.status_code == 403 and "form expired" in r.text
    r = client.post("/ui/logout", data={"csrf": "0" * 64}, follow_redirects=False)
    assert r.status_code == 403
    assert client.get("/ui/rounds", follow_redirects=False).status_code == 200  # still logged in


def test_a_new_operator_token_revokes_every_cookie(app):
    client, cookie = _logged_in(app)
    settings = app.state.settings
    app.state.settings = dataclasses.replace(settings, operator_token="op-" + "n" * 20)
    r = client.get("/ui/rounds", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/ui/login")
    app.state.settings = settings  # the old token back: the same cookie works, so the token was the reason
    assert client.get("/ui/rounds", follow_redirects=False).status_code == 200


def test_a_restarted_server_refuses_cookies_issued_before_it_started(app):
    client, cookie = _logged_in(app)
    sid, issued, _ = cookie.split(".")
    assert session.Sessions(started=int(issued)).valid(TOKEN, cookie)
    assert not session.Sessions(started=int(issued) + 1).valid(TOKEN, cookie)  # it forgot its revocations


def test_log_in_needs_the_log_in_pages_csrf_value(app):
    client = _client(app)
    client.get("/ui/login")  # the cookie half is set, the form half is missing
    r = client.post("/ui/login", data={"token": TOKEN}, follow_redirects=False)
    assert r.status_code == 403 and "form expired" in r.text
    other = _client(app, "10.0.0.4")  # another site's form: a value, but not this browser's cookie
    r = other.post("/ui/login", data={"token": TOKEN, "csrf": "a" * 32}, follow_redirects=False)
    assert r.status_code == 403 and session.COOKIE not in r.cookies


def test_log_in_goes_only_to_dashboard_pages(app):
    client = _client(app)
    csrf = CSRF.search(client.get("/ui/login").text).group(1)
    for target in ("https://evil.example/ui/", "//evil.example/ui/x", "/ui/\\evil", "/rounds"):
        r = client.post("/ui/login", data={"token": TOKEN, "csrf": csrf, "next": target}, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/ui/rounds", target
        csrf = CSRF.search(client.get("/ui/login").text).group(1)


# -- headers --
def test_every_response_under_ui_carries_the_security_headers(app):
    client, _ = _logged_in(app)
    responses = {path: client.get(path, follow_redirects=False) for path in
                 ("/ui", "/ui/login", "/ui/rounds", "/ui/rounds.json", "/ui/rounds/0123456789abcdef",
                  "/ui/static/dashboard.js", "/ui/static/dashboard.css", "/ui/no-such-page")}
    responses["POST /ui/login"] = _try(_client(app, "10.0.0.5"), "wrong-token-xxxxxxxxxxxx")
    assert {p: r.status_code for p, r in responses.items()} == {
        "/ui": 303, "/ui/login": 200, "/ui/rounds": 200, "/ui/rounds.json": 200, "/ui/rounds/0123456789abcdef": 404,
        "/ui/static/dashboard.js": 200, "/ui/static/dashboard.css": 200, "/ui/no-such-page": 404,
        "POST /ui/login": 403}
    for path, r in responses.items():
        for name, value in HEADERS.items():
            assert r.headers.get(name) == value, (path, name)
    csp = HEADERS["content-security-policy"]
    assert "frame-ancestors 'none'" in csp and "'unsafe-inline'" not in csp and "script-src 'self'" in csp
    assert HEADERS["x-frame-options"] == "DENY" and HEADERS["x-content-type-options"] == "nosniff"
    assert HEADERS["referrer-policy"] == "no-referrer" and HEADERS["cache-control"] == "no-store"
    assert "content-security-policy" not in client.get("/healthz").headers  # the REST API is not the dashboard's
