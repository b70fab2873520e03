"""The dashboard's routes under /ui (package docstring).

Pages are rendered on the server from the same ``RoundService`` the REST API
uses; actions are plain HTML forms (POST, then 303 back to a page), so the
pages work without the small script, which only refreshes report counts.
A shoal error in an action renders the page again with the message and the
status ``http_errors.status_for`` gives the REST API.

Over 300 lines: every page and action of the dashboard, with the log-in they
share, in one router a reader follows top to bottom.
"""

from __future__ import annotations

import datetime
import json
import secrets
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

import numpy as np
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from markupsafe import Markup
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from shoal.common.errors import ShoalError
from shoal.common.picture import coreset_picture, project
from shoal.server.edge.api_models import CreateRoundIn, ElbowIn, RefineIn
from shoal.server.edge.dashboard import session
from shoal.server.edge.dashboard.svg import centers_plot, line_plot
from shoal.server.edge.http_errors import status_for
from shoal.server.rounds.service import RoundService
from shoal.server.storage.store import RoundRow

HERE = Path(__file__).parent
templates = Jinja2Templates(directory=HERE / "templates")
router = APIRouter(prefix="/ui", include_in_schema=False)

SUMMARY_KEYS = ("kind", "encoder", "model", "k", "dim", "epsilon", "delta", "n_expected", "min_batch", "levels",
                "parent_round")


class _NoSession(Exception):
    pass


def _service(request: Request) -> RoundService:
    service: RoundService = request.app.state.service
    return service


def _token(request: Request) -> str:
    return str(request.app.state.settings.operator_token)


def _cookie(request: Request) -> str:
    cookie = request.cookies.get(session.COOKIE)
    if not session.valid_session(_token(request), cookie):
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


def _flat(config: dict[str, Any]) -> dict[str, Any]:
    """A config with a central round's spec fields (model, algorithm, eps, delta) at the top."""
    spec = config.get("spec")
    if not isinstance(spec, dict):
        return config
    return {**config, "model": "central", "encoder": spec.get("algorithm"), "epsilon": spec.get("epsilon"),
            "delta": spec.get("delta")}


def _summary(config: dict[str, Any]) -> list[tuple[str, Any]]:
    config = _flat(config)
    out = [(k, config[k]) for k in SUMMARY_KEYS if config.get(k) not in (None, "")]
    b = config.get("bound") or {}
    out.append(("bound", f"L2 radius {b['radius']}" if b.get("radius") is not None
                else f"box low {b.get('low')} high {b.get('high')}"))
    return out


# -- login --
@router.get("", response_class=HTMLResponse)
def home() -> RedirectResponse:
    return RedirectResponse("/ui/rounds", status_code=303)


@router.get("/login", response_class=HTMLResponse)
def login_page(request: Request, next: str = "/ui/rounds") -> HTMLResponse:
    return _page(request, "login.html", next=next if next.startswith("/ui") else "/ui/rounds")


@router.post("/login")
async def login(request: Request) -> Response:
    form = await _form(request)
    nxt = form.get("next", "/ui/rounds")
    nxt = nxt if nxt.startswith("/ui/") and "//" not in nxt else "/ui/rounds"
    token = _token(request)
    if not secrets.compare_digest(form.get("token", "").encode(), token.encode()):
        return _page(request, "login.html", status=403, next=nxt, error="wrong operator token")
    resp = RedirectResponse(nxt, status_code=303)
    resp.set_cookie(session.COOKIE, session.new_session(token), max_age=session.LIFETIME_SECONDS, path="/ui",
                    httponly=True, samesite="strict", secure=request.url.scheme == "https")
    return resp


@router.post("/logout")
async def logout(request: Request) -> Response:
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
    rows = sorted(_service(request).store.list_rounds(), key=lambda r: -r.created)
    listed = [{"id": r.id, "state": r.state, "reports": r.reports, "created": _when(r.created),
               "kind": r.config.get("kind", ""), "model": _flat(r.config).get("model", ""), "k": r.config.get("k"),
               "epsilon": _flat(r.config).get("epsilon")} for r in rows]
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
        "cluster": "round decoded: the result is below"}


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
    try:
        row = _service(request).get(round_id)
    except ShoalError as exc:
        return _page(request, "missing.html", status=status_for(exc), error=str(exc), csrf=csrf)
    result = row.result if row.state == "done" else None
    steps = None
    service = _service(request)
    if service.has_steps(round_id):  # a continual round: its latest release is the result shown
        releases = service.step_releases(round_id)
        steps = [{"step": r["step"], "suggested_k": r["elbow"]["suggested_k"],
                  "first": ", ".join(f"{v:.4g}" for v in r["centers"][0])} for r in releases[-STEPS_SHOWN:]][::-1]
        if releases:
            result = dict(releases[-1], privacy=service.privacy_of(round_id)[1])
    return _page(request, "round.html", status=status, row=row, created=_when(row.created), csrf=csrf,
                 summary=_summary(row.config), config_json=json.dumps(row.config, indent=1),
                 result=result, view=_result_view(result) if result else None, error=error, message=message,
                 steps=steps)


def _result_view(result: dict[str, Any]) -> dict[str, Any]:
    """What the result section shows: centers rows, verdict, privacy, plots
    (a result, or a continual round's latest step, which releases no sizes)."""
    centers = np.asarray(result["centers"], dtype=np.float64)
    quality = result.get("quality") or {}
    errors = quality.get("center_errors") or [None] * len(centers)
    sizes = result.get("sizes") or [None] * len(centers)
    rows = [{"i": i, "size": sizes[i], "error": errors[i],
             "coords": ", ".join(f"{v:.4g}" for v in c)} for i, c in enumerate(centers)]
    picture = result.get("picture")
    if picture:
        cloud, weights, note = np.asarray(picture["xy"]), np.asarray(picture["weights"]), picture["note"]
    else:
        picture = coreset_picture(centers, np.ones(len(centers)))
        cloud, weights, note = np.zeros((0, 2)), np.zeros(0), "centers only: this result has no coreset to draw"
    assert picture is not None
    d = centers.shape[1]
    labels = ("feature 0", "feature 1" if d > 1 else "") if d <= 2 else ("principal axis 1", "principal axis 2")
    plot = centers_plot(cloud, weights, project(picture, centers), *labels)
    elbow = result.get("elbow")
    costs = (elbow or {}).get("costs") or []  # [{k, cost, band}] (api_models.ElbowOut)
    elbow_svg = (Markup(line_plot([c["k"] for c in costs], [c["cost"] for c in costs], [c["band"] for c in costs],
                                  "k'", "estimated cost")) if costs else None)
    return {"rows": rows, "quality": quality, "privacy": result.get("privacy") or {}, "plot": Markup(plot),
            "plot_note": note, "elbow": elbow_svg, "suggested_k": (elbow or {}).get("suggested_k"),
            "band_rule": (elbow or {}).get("band_rule") or "two deviations",
            "step": result.get("step"), "diagnostics": json.dumps(result.get("diagnostics"), indent=1)}


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
            await run_in_threadpool(service.cluster, round_id)
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
