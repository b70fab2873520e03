"""The dashboard's routes under /ui (package docstring).

Pages are rendered on the server from the same ``RoundService`` the REST API
uses; actions are plain HTML forms (POST, then 303 back to a page), so the
pages work without the small script, which only refreshes report counts.
A shoal error in an action renders the page again with the message and the
status ``http_errors.status_for`` gives the REST API. Every POST, log-in and
log-out included, carries a CSRF token (``session.py``); wrong log-in tokens
are rate-limited (``limits.py``); ``headers.py`` sets the security headers.

Over 300 lines: every page and action of the dashboard, with the log-in they
share, in one router a reader follows top to bottom.
"""

from __future__ import annotations

import datetime
import json
import logging
import secrets
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from shoal.common.errors import ShoalError
from shoal.server.edge.api_models import CreateRoundIn, ElbowIn, RefineIn
from shoal.server.edge.dashboard import session
from shoal.server.edge.dashboard.headers import SecurityHeaders
from shoal.server.edge.dashboard.limits import LoginLimiter
from shoal.server.edge.dashboard.view import result_view, summary
from shoal.server.edge.http_errors import status_for
from shoal.server.edge.round_privacy import round_privacy
from shoal.server.rounds.service import RoundService
from shoal.server.storage.store import RoundRow

HERE = Path(__file__).parent
templates = Jinja2Templates(directory=HERE / "templates")
router = APIRouter(prefix="/ui", include_in_schema=False)
log = logging.getLogger("shoal.server.dashboard")


def install(app: FastAPI) -> None:
    """The security headers on every response under /ui (call after the app's
    other middleware, so they also cover its error responses there)."""
    app.add_middleware(SecurityHeaders)


class _NoSession(Exception):
    pass


def _service(request: Request) -> RoundService:
    service: RoundService = request.app.state.service
    return service


def _token(request: Request) -> str:
    return str(request.app.state.settings.operator_token)


def _sessions(request: Request) -> session.Sessions:
    """This app's revoked sessions (``session.Sessions``), made on first use."""
    state = request.app.state
    if not hasattr(state, "dashboard_sessions"):
        state.dashboard_sessions = session.Sessions()
    sessions: session.Sessions = state.dashboard_sessions
    return sessions


def _limiter(request: Request) -> LoginLimiter:
    """This app's log-in rate limit (``limits.py``), made on first use."""
    state = request.app.state
    if not hasattr(state, "dashboard_login_limiter"):
        state.dashboard_login_limiter = LoginLimiter()
    limiter: LoginLimiter = state.dashboard_login_limiter
    return limiter


def _cookie(request: Request) -> str:
    cookie = request.cookies.get(session.COOKIE)
    if not _sessions(request).valid(_token(request), cookie):
        raise _NoSession
    assert cookie is not None
    return cookie


def _to_login(request: Request) -> RedirectResponse:
    return RedirectResponse(f"/ui/login?next={quote(request.url.path)}", status_code=303)


async def _form(request: Request) -> dict[str, str]:
    body = (await request.body()).decode("utf-8", errors="replace")
    return {k: v[0].strip() for k, v in parse_qs(body, keep_blank_values=True).items()}


EXPIRED = "the form expired: reload the page and try again"


async def _posted(request: Request) -> tuple[str, dict[str, str], bool] | RedirectResponse:
    """A posted form: (session cookie, fields, whether its CSRF token is valid),
    or the redirect to the log-in page when there is no session."""
    try:
        cookie = _cookie(request)
    except _NoSession:
        return _to_login(request)
    form = await _form(request)
    return cookie, form, session.valid_csrf(_token(request), cookie, form.get("csrf"))


def _page(request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
    return templates.TemplateResponse(request, name, context, status_code=status)


def _when(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts, tz=datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


# -- login --
@router.get("", response_class=HTMLResponse)
def home() -> RedirectResponse:
    return RedirectResponse("/ui/rounds", status_code=303)


def _safe_next(nxt: str | None) -> str:
    """Where to go after log-in: a dashboard path only (never another site)."""
    nxt = nxt or "/ui/rounds"
    return nxt if nxt.startswith("/ui/") and "//" not in nxt and "\\" not in nxt else "/ui/rounds"


def _login_form(request: Request, status: int = 200, error: str | None = None, nxt: str = "/ui/rounds",
                retry_after: int | None = None) -> HTMLResponse:
    """The log-in page, with a fresh double-submit value in its form and cookie."""
    nonce = session.new_login_nonce()
    resp = _page(request, "login.html", status=status, next=_safe_next(nxt), error=error, login_csrf=nonce)
    resp.set_cookie(session.LOGIN_COOKIE, nonce, max_age=session.LOGIN_FORM_SECONDS, path="/ui/login",
                    httponly=True, samesite="strict", secure=request.url.scheme == "https")
    if retry_after is not None:
        resp.headers["Retry-After"] = str(retry_after)
    return resp


@router.get("/login", response_class=HTMLResponse)
def login_page(request: Request, next: str = "/ui/rounds") -> HTMLResponse:
    return _login_form(request, nxt=next)


@router.post("/login")
async def login(request: Request) -> Response:
    """Check the operator token: 429 while this address or the server is over the
    rate limit (the token is then not checked), 403 for a stale form or a wrong
    token, else a fresh session cookie and a redirect to ``next``."""
    form = await _form(request)
    nxt = _safe_next(form.get("next"))
    address = request.client.host if request.client else "unknown"
    limiter = _limiter(request)
    wait = limiter.retry_after(address)
    if wait is not None:
        return _login_form(request, 429, f"too many wrong tokens: try again in {wait} s", nxt, retry_after=wait)
    if not session.valid_login_nonce(request.cookies.get(session.LOGIN_COOKIE), form.get("csrf")):
        return _login_form(request, 403, EXPIRED, nxt)
    token = _token(request)
    if not secrets.compare_digest(form.get("token", "").encode(), token.encode()):
        limiter.failed(address)
        return _login_form(request, 403, "wrong operator token", nxt)
    resp = RedirectResponse(nxt, status_code=303)
    resp.set_cookie(session.COOKIE, session.new_session(token), max_age=session.LIFETIME_SECONDS, path="/ui",
                    httponly=True, samesite="strict", secure=request.url.scheme == "https")
    resp.delete_cookie(session.LOGIN_COOKIE, path="/ui/login")
    return resp


@router.post("/logout")
async def logout(request: Request) -> Response:
    """Revoke the session (``session.Sessions``) and drop its cookie; a form
    without the session's CSRF token is refused (403), so another site cannot
    log the operator out."""
    posted = await _posted(request)
    if isinstance(posted, RedirectResponse):
        resp: Response = RedirectResponse("/ui/login", status_code=303)
    else:
        cookie, _, fresh = posted
        if not fresh:
            return _rounds(request, cookie, 403, EXPIRED)
        _sessions(request).revoke(cookie)
        resp = RedirectResponse("/ui/login", status_code=303)
    resp.delete_cookie(session.COOKIE, path="/ui")
    return resp


# -- rounds --
def _rows_json(rows: list[RoundRow]) -> list[dict[str, Any]]:
    return [{"id": r.id, "state": r.state, "reports": r.reports} for r in rows]


@router.get("/rounds", response_class=HTMLResponse)
def rounds_page(request: Request) -> Response:
    try:
        cookie = _cookie(request)
    except _NoSession:
        return _to_login(request)
    return _rounds(request, cookie)


def _rounds(request: Request, cookie: str, status: int = 200, error: str | None = None,
            form: dict[str, str] | None = None) -> HTMLResponse:
    service = _service(request)
    rows = sorted(service.store.list_rounds(), key=lambda r: -r.created)
    listed = []
    for r in rows:
        privacy = round_privacy(r)
        spec = r.config.get("spec")
        k = r.config.get("k", spec.get("k") if isinstance(spec, dict) else None)
        listed.append({"id": r.id, "state": r.state, "reports": r.reports, "created": _when(r.created),
                       "kind": r.config.get("kind", ""), "model": privacy.model, "k": k,
                       "epsilon": dict(privacy.rows()).get("epsilon")})
    return _page(request, "rounds.html", status=status, rounds=listed, csrf=session.csrf_token(_token(request), cookie),
                 error=error, form=form or {})


@router.get("/rounds.json")
def rounds_json(request: Request) -> Response:
    try:
        _cookie(request)
    except _NoSession:
        return JSONResponse({"detail": "log in at /ui/login"}, status_code=401)
    return JSONResponse(_rows_json(_service(request).store.list_rounds()))


def _floats(text: str) -> list[float]:
    return [float(v) for v in text.replace(" ", "").split(",") if v]


def _create_body(form: dict[str, str]) -> dict[str, Any]:
    body: dict[str, Any] = {key: form[key] for key in ("k", "dim", "epsilon", "n_expected", "encoder", "model")
                            if form.get(key)}
    for key in ("delta", "min_batch"):
        if form.get(key):
            body[key] = form[key]
    if form.get("low") or form.get("high"):
        try:
            body["bound"] = {"low": _floats(form.get("low", "")), "high": _floats(form.get("high", ""))}
        except ValueError as exc:
            raise ValueError(f"box bounds must be comma-separated numbers: {exc}") from exc
    elif form.get("radius"):
        body["bound"] = {"radius": form["radius"]}
    return body


def _validation_text(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'round'}: {e['msg']}" for e in exc.errors())


@router.post("/rounds")
async def create(request: Request) -> Response:
    posted = await _posted(request)
    if isinstance(posted, RedirectResponse):
        return posted
    cookie, form, fresh = posted
    if not fresh:
        return _rounds(request, cookie, 403, EXPIRED, form)
    try:
        request_obj = CreateRoundIn.model_validate(_create_body(form)).to_request()
        row = await run_in_threadpool(_service(request).create, request_obj)
    except ValidationError as exc:
        return _rounds(request, cookie, 422, _validation_text(exc), form)
    except ValueError as exc:
        return _rounds(request, cookie, 422, str(exc), form)
    except ShoalError as exc:
        return _rounds(request, cookie, status_for(exc), str(exc), form)
    return RedirectResponse(f"/ui/rounds/{row.id}?done=created", status_code=303)


STEPS_SHOWN = 20  # a continual round's page lists its latest steps (GET /rounds/{id}/steps has them all)
DONE = {"created": "round created: devices can report to it now", "step": "step closed: its release is below",
        "close": "round closed: no more reports are accepted; it can be clustered",
        "cluster": "round decoded: the result is below",
        "again": "round decoded again: the new result is below; every earlier one stays (GET /rounds/{id}/results)"}


@router.get("/rounds/{round_id}", response_class=HTMLResponse)
def round_page(request: Request, round_id: str, done: str | None = None) -> Response:
    try:
        cookie = _cookie(request)
    except _NoSession:
        return _to_login(request)
    return _round(request, cookie, round_id, message=DONE.get(done or ""))


@router.get("/rounds/{round_id}/state.json")
def round_state(request: Request, round_id: str) -> Response:
    try:
        _cookie(request)
        row = _service(request).get(round_id)
    except _NoSession:
        return JSONResponse({"detail": "log in at /ui/login"}, status_code=401)
    except ShoalError as exc:
        return JSONResponse({"detail": str(exc)}, status_code=status_for(exc))
    return JSONResponse({"id": row.id, "state": row.state, "reports": row.reports})


def _round(request: Request, cookie: str, round_id: str, status: int = 200, error: str | None = None,
           message: str | None = None) -> HTMLResponse:
    csrf = session.csrf_token(_token(request), cookie)
    service = _service(request)
    try:
        row = service.get(round_id)
    except ShoalError as exc:
        return _page(request, "missing.html", status=status_for(exc), error=str(exc), csrf=csrf)
    result = row.result if row.state == "done" else None
    steps = None
    try:
        if service.has_steps(round_id):  # a continual round: its latest release is the result shown
            releases = service.step_releases(round_id)
            steps = [{"step": r["step"], "suggested_k": (r.get("elbow") or {}).get("suggested_k"),
                      "first": ", ".join(f"{v:.4g}" for v in (r.get("centers") or [[]])[0])}
                     for r in releases[-STEPS_SHOWN:]][::-1]
            if releases:
                result = dict(releases[-1], privacy=service.privacy_of(round_id)[1])
        privacy = round_privacy(row)
    except ShoalError as exc:
        return _page(request, "missing.html", status=status_for(exc), error=str(exc), csrf=csrf)
    view = None
    if isinstance(result, dict):
        try:
            view = result_view(result)
        except Exception:  # noqa: BLE001 - a result the page cannot draw must not hide the round's page
            log.exception("round %s: its result could not be drawn", round_id)
            error = error or f"this result could not be drawn (see the server log); GET /rounds/{round_id}/result has it"
    return _page(request, "round.html", status=status, row=row, created=_when(row.created), csrf=csrf,
                 summary=summary(row.config, privacy), config_json=json.dumps(row.config, indent=1),
                 result=result, view=view, error=error, message=message, steps=steps,
                 decode_again=_may_decode_again(service, round_id), refinable=_refinable(service, round_id))


def _refinable(service: RoundService, round_id: str) -> bool:
    """Whether a refine round may open on this round (its kind's ``ServerKind.refinable``;
    a refine round is: the next step of a chain)."""
    try:
        return bool(service.round(round_id)[0].refinable)
    except ShoalError:
        return False


def _may_decode_again(service: RoundService, round_id: str) -> bool:
    """Whether a done round may be decoded again: its kind's decode is
    post-processing (``ServerKind.decode_draws_noise`` False; a central
    round's answer is released once, so its page says so instead)."""
    try:
        return not service.round(round_id)[0].decode_draws_noise
    except ShoalError:
        return False


async def _action(request: Request, round_id: str, what: str) -> Response:
    posted = await _posted(request)
    if isinstance(posted, RedirectResponse):
        return posted
    cookie, form, fresh = posted
    if not fresh:
        return _round(request, cookie, round_id, 403, EXPIRED)
    service = _service(request)
    try:
        if what == "close":
            await run_in_threadpool(service.close, round_id)
        elif what == "cluster":
            again = form.get("again") == "true"  # "Decode again (post-processing)" on a done round's page
            await run_in_threadpool(lambda: service.cluster(round_id, again=again))
            if again:
                return RedirectResponse(f"/ui/rounds/{round_id}?done=again", status_code=303)
        elif what == "step":
            await run_in_threadpool(service.close_step, round_id)
        elif what == "delete":
            await run_in_threadpool(service.delete, round_id)
            return RedirectResponse("/ui/rounds", status_code=303)
        elif what == "refine":
            body = {k: form[k] for k in ("model", "epsilon", "delta", "min_devices", "max_devices") if form.get(k)}
            child = await run_in_threadpool(service.create_refine, round_id, RefineIn.model_validate(body).to_request())
            return RedirectResponse(f"/ui/rounds/{child.id}?done=created", status_code=303)
        elif what == "elbow":
            body = {k: form[k] for k in ("epsilon", "delta", "min_devices", "max_devices") if form.get(k)}
            child = await run_in_threadpool(service.create_elbow, round_id, ElbowIn.model_validate(body).to_request())
            return RedirectResponse(f"/ui/rounds/{child.id}?done=created", status_code=303)
    except ValidationError as exc:
        return _round(request, cookie, round_id, 422, _validation_text(exc))
    except ShoalError as exc:
        return _round(request, cookie, round_id, status_for(exc), str(exc))
    return RedirectResponse(f"/ui/rounds/{round_id}?done={what}", status_code=303)


def _register(what: str) -> None:
    async def handler(request: Request, round_id: str) -> Response:
        return await _action(request, round_id, what)

    handler.__name__ = f"round_{what}"
    router.add_api_route(f"/rounds/{{round_id}}/{what}", handler, methods=["POST"])


for _what in ("close", "cluster", "step", "refine", "elbow", "delete"):
    _register(_what)
