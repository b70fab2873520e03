"""What a person's browser needs to take part without the operator (issue 40):
``GET /rounds/open``, the public list of the rounds a device may join, and
``/device``, the demo page of the TypeScript device (``clients/js``).

``GET /rounds/open`` answers, for each open round, only what a device needs
to choose one and what its ledger will be charged: id, kind, model, wire
protocol, dimension, public bound and the round's privacy in brief (the
same numbers as ``GET /rounds/{id}``'s ``privacy``). No report counts,
results, errors or creation times: those are the operator's. At most
``limit`` rounds (default and cap ``OPEN_CAP``), newest first; ``more``
says whether there were others. Public, so rate limited per client address
(``OPEN_PER_ADDRESS`` a minute; ``OPEN_GLOBAL`` over all addresses) with
the dashboard log-in's sliding window (``dashboard/limits.py``, whose
limits apply here too: behind a proxy every client shares its address).

``/device/`` serves ``clients/js/demo/`` (the page, its script and style)
and ``clients/js/dist/shoal-device.js``, the bundle ``npm run build``
writes, from the source tree this package was installed from (the
editable install the repository's Makefile makes). The bundle is not
Python package data: it is built by npm, not committed. Until it is built
(or where ``clients/`` is absent, as in a wheel) ``/device/`` answers 404
with the command that builds it. The pages have the dashboard's security
headers and CSP (``dashboard/headers.py``: scripts, styles and fetches
from this origin only), so the page can reach this server but no other
(a shuffle-model round needs a shuffler: the page lists those rounds but
does not join them).
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from pydantic import BaseModel, Field

from shoal.server.edge.dashboard.limits import LoginLimiter
from shoal.server.edge.deps import Service
from shoal.server.edge.round_privacy import round_privacy
from shoal.server.storage.store import RoundRow

router = APIRouter()

OPEN_CAP = 100
OPEN_PER_ADDRESS = 120  # requests a minute from one address
OPEN_GLOBAL = 3000  # over all addresses together

JS_ROOT = Path(__file__).resolve().parents[3] / "clients" / "js"
PAGE_FILES = {  # what /device/<name> serves: (file, media type)
    "": (JS_ROOT / "demo" / "index.html", "text/html; charset=utf-8"),
    "demo.js": (JS_ROOT / "demo" / "demo.js", "text/javascript; charset=utf-8"),
    "demo.css": (JS_ROOT / "demo" / "demo.css", "text/css; charset=utf-8"),
    "shoal-device.js": (JS_ROOT / "dist" / "shoal-device.js", "text/javascript; charset=utf-8"),
}
NOT_BUILT = ("The device page needs the TypeScript device's bundle, {path}, which is not there. "
             "Build it from the source tree: cd clients/js && npm ci && npm run build, then reload.")


class OpenRoundOut(BaseModel):
    """One open round as a device sees it before joining."""

    id: str
    kind: str = Field(description="the round kind (tree, local_refine, sketch, refine, ...)")
    model: str = Field(description="local, shuffle or central")
    protocol: int = Field(description="the wire protocol version of the round's config")
    dim: int = Field(description="the dimension of a point")
    bound: dict[str, Any] = Field(description="the public bound points are clipped into")
    epsilon: float | None = Field(description="the round's guarantee (as GET /rounds/{id} privacy.epsilon)")
    delta: float | None = Field(None, description="the central delta; absent in the local model")
    device_epsilon: float | None = Field(None, description="shuffle rounds: the eps0 one message has if the "
                                                             "shuffler colludes (what a device's ledger charges)")


class OpenRoundsOut(BaseModel):
    rounds: list[OpenRoundOut]
    more: bool = Field(description="true when more rounds are open than were listed")


class _Limiter(LoginLimiter):
    """Every request counts (the log-in counts only wrong tokens)."""

    def admit(self, address: str) -> int | None:
        """None if the request may go on (and it is counted), else the seconds to wait."""
        wait = self.retry_after(address)
        if wait is None:
            self.failed(address)
        return wait


def _limiter(request: Request) -> _Limiter:
    state = request.app.state
    if not hasattr(state, "open_rounds_limiter"):
        state.open_rounds_limiter = _Limiter(per_address=OPEN_PER_ADDRESS, total=OPEN_GLOBAL)
    limiter: _Limiter = state.open_rounds_limiter
    return limiter


def _open_round(rid: str, config: dict[str, Any], created: float) -> OpenRoundOut:
    privacy = round_privacy(RoundRow(id=rid, config=config, state="open", created=created, reports=0,
                                     result=None, error=None))
    return OpenRoundOut(id=rid, kind=str(config.get("kind", "tree")), model=privacy.model,
                        protocol=int(config.get("protocol", 0)), dim=int(config.get("dim", 0)),
                        bound=dict(config.get("bound") or {}), epsilon=privacy.epsilon, delta=privacy.delta,
                        device_epsilon=privacy.device_epsilon)


@router.get("/rounds/open", response_model=OpenRoundsOut, response_model_exclude_none=True, tags=["rounds"],
            responses={429: {"description": "over the per-address or global rate limit; see Retry-After"}})
def open_rounds(request: Request, service: Service,
                limit: Annotated[int, Query(ge=1, le=OPEN_CAP, description="at most this many rounds")] = OPEN_CAP,
                ) -> OpenRoundsOut:
    """The open rounds a device may join, newest first, with only their public
    fields (no operator token). Rate limited per client address."""
    wait = _limiter(request).admit(request.client.host if request.client else "")
    if wait is not None:
        raise HTTPException(status_code=429, detail=f"too many requests for the open rounds: retry in {wait} s",
                            headers={"Retry-After": str(wait)})
    rows = service.store.list_open_rounds(limit + 1)
    return OpenRoundsOut(rounds=[_open_round(*r) for r in rows[:limit]], more=len(rows) > limit)


@router.get("/device", include_in_schema=False)
def device_root() -> RedirectResponse:
    return RedirectResponse("/device/", status_code=308)


@router.get("/device/{name:path}", include_in_schema=False)
def device_page(name: str) -> Response:
    """The demo page of the TypeScript device (module docstring)."""
    found = PAGE_FILES.get(name)
    if found is None:
        raise HTTPException(status_code=404, detail=f"no file {name!r} on the device page")
    path, media = found
    bundle = PAGE_FILES["shoal-device.js"][0]
    if name == "" and not bundle.is_file():
        return HTMLResponse("<!doctype html><meta charset=utf-8><title>shoal device page</title>"
                            f"<p>{html.escape(NOT_BUILT.format(path=bundle))}</p>", status_code=404)
    if not path.is_file():
        raise HTTPException(status_code=404, detail=NOT_BUILT.format(path=path))
    return FileResponse(path, media_type=media)
