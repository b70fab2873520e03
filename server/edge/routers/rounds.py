"""/rounds: create, list, inspect, configure, cluster, results, delete, a
continual round's steps, and the shuffler's buffer of a round (pending,
flush) through the server."""

from __future__ import annotations

from typing import Annotated, Any

import httpx
from fastapi import APIRouter, HTTPException, Query, Request, Response
from fastapi.responses import JSONResponse

from shoal.server.edge.api_models import (
    ClusterIn,
    CreateRoundIn,
    ElbowIn,
    RefineIn,
    ResultOut,
    ResultVersionOut,
    RoundOut,
    RoundPrivacyOut,
    RoundsPageIn,
    StepOut,
    encode_cursor,
)
from shoal.server.edge.deps import Operator, ServerSettings, Service
from shoal.server.edge.round_privacy import round_privacy
from shoal.server.rounds.statements import with_live_statement
from shoal.server.storage.store import RoundRow

router = APIRouter(prefix="/rounds", tags=["rounds"])


def _out(row: RoundRow, service: Service) -> RoundOut:
    return RoundOut(
        id=row.id, state=row.state, reports=row.reports, created=row.created,
        config=row.config, server_public_key=service.public_key, error=row.error,
        privacy=RoundPrivacyOut(**round_privacy(row).summary()),
    )


@router.post("", status_code=201, response_model=RoundOut)
def create_round(body: CreateRoundIn, service: Service, _: Operator) -> RoundOut:
    return _out(service.create(body.to_request()), service)


@router.get("", response_model=list[RoundOut], responses={200: {"headers": {
    "X-Next-Cursor": {"description": "the next page's cursor (absent on the last page)", "schema": {"type": "string"}},
    "Link": {"description": "<URL of the next page>; rel=\"next\" (absent on the last page)",
             "schema": {"type": "string"}}}}})
def list_rounds(page: Annotated[RoundsPageIn, Query()], request: Request, response: Response,
                service: Service, _: Operator) -> list[RoundOut]:
    """One page of rounds, newest first (``limit``, default 100, at most 1000).

    The body stays a JSON list of rounds, as it was before paging (issue 39: 2,000
    rounds were one 1.5 MB answer), so callers that read a list keep working;
    the next page's cursor travels in headers: ``X-Next-Cursor`` (pass it back
    as ``cursor``) and ``Link: <...>; rel="next"`` (RFC 8288), both absent on
    the last page. The cursor is opaque; keyset paging on (created, id) means a
    round created or deleted between pages neither repeats nor skips another."""
    rows = service.store.list_rounds_page(page.limit + 1, page.before())
    if len(rows) > page.limit:
        rows = rows[:page.limit]
        cursor = encode_cursor(rows[-1].created, rows[-1].id)
        response.headers["X-Next-Cursor"] = cursor
        url = request.url.include_query_params(limit=page.limit, cursor=cursor)
        response.headers["Link"] = f'<{url}>; rel="next"'
    return [_out(r, service) for r in rows]


@router.get("/{round_id}", response_model=RoundOut)
def get_round(round_id: str, service: Service) -> RoundOut:
    return _out(service.get(round_id), service)


@router.get("/{round_id}/config")
def get_config(round_id: str, service: Service, response: Response) -> dict[str, object]:
    """The round's public config, signed by the server's identity key
    (``common/wire/signing.py``): devices and the shuffler verify it against the
    fingerprint they were given out of band."""
    row = service.get(round_id)
    response.headers["Cache-Control"] = "public, max-age=300"
    return service.identity.signed_config(row.id, row.config, service.public_key)


@router.post("/{round_id}/close", response_model=RoundOut)
def close_round(round_id: str, service: Service, _: Operator) -> RoundOut:
    """Stop accepting reports (open -> closed); clustering is still allowed."""
    service.close(round_id)
    return _out(service.get(round_id), service)


@router.post("/{round_id}/refine", status_code=201, response_model=RoundOut)
def create_refine(round_id: str, body: RefineIn, service: Service, _: Operator) -> RoundOut:
    """A second round on this (done) round's centers: devices contribute their
    point and a count to their nearest center through secure summation."""
    return _out(service.create_refine(round_id, body.to_request()), service)


@router.post("/{round_id}/elbow", status_code=201, response_model=RoundOut)
def create_elbow(round_id: str, body: ElbowIn, service: Service, _: Operator) -> RoundOut:
    """A second round on this (done) round's ordered centers: devices contribute
    their cost drops to the first k' centers, k' = 1..k, through secure summation;
    its result is the data's elbow curve with a band over every k' at once."""
    return _out(service.create_elbow(round_id, body.to_request()), service)


@router.post("/{round_id}/cluster", response_model=ResultOut)
def cluster(round_id: str, service: Service, _: Operator, body: ClusterIn | None = None) -> ResultOut:
    """Decode the round (in this process, or on a Dask cluster: ``body.dask``).
    The first decode is the round's release: on a done round this returns the
    stored result unchanged (``again`` decodes anew where that is
    post-processing; 409 for central rounds)."""
    # A sync endpoint: FastAPI runs it in its thread pool, off the event loop.
    body = body or ClusterIn()
    released = service.cluster(round_id, dask=body.dask, again=body.again, fallback=body.fallback)
    return ResultOut(**with_live_statement(released, round_id, service))  # as GET /result shows it


@router.get("/{round_id}/results", response_model=list[ResultVersionOut])
def results(round_id: str, service: Service, _: Operator) -> list[ResultVersionOut]:
    """Every result the round's decodes wrote, oldest first (version 1 is the
    release; ``again`` adds versions, never replaces one)."""
    return [ResultVersionOut(**r) for r in service.results(round_id)]


@router.get("/{round_id}/result", response_model=ResultOut)
def result(round_id: str, service: Service) -> ResultOut:
    # The privacy statement composed over every round opened on the round's parent now (issue 45).
    return ResultOut(**with_live_statement(service.result(round_id), round_id, service))


@router.post("/{round_id}/steps", response_model=StepOut)
def close_step(round_id: str, service: Service, _: Operator) -> StepOut:
    """Continual rounds: close the open step (the events committed so far
    belong to it) and return its release; 409 past the horizon or once the
    round is closed (the stream has ended)."""
    return StepOut(**service.close_step(round_id))


@router.get("/{round_id}/steps", response_model=list[StepOut])
def steps(round_id: str, service: Service,
          since: int = Query(0, ge=0, description="only the steps after this one")) -> list[StepOut]:
    """Continual rounds: the releases of the closed steps after ``since``, in order."""
    return [StepOut(**r) for r in service.step_releases(round_id, since)]


@router.delete("/{round_id}", status_code=204)
def delete_round(round_id: str, service: Service, _: Operator) -> Response:
    service.delete(round_id)
    return Response(status_code=204)


def _ask_shuffler(method: str, round_id: str, path: str, settings: Any) -> JSONResponse:
    """Relay an operator's question about a round's buffer to the shuffler
    (issue 16: the flush endpoint was undocumented and only at the shuffler).
    The server authenticates with the shuffler token it already shares."""
    if not settings.shuffler_url:
        raise HTTPException(status_code=409, detail="this server knows no shuffler: start it with SHOAL_SHUFFLER_URL "
                            "(or ask the shuffler directly with its token)")
    try:
        r = httpx.request(method, f"{settings.shuffler_url}/rounds/{round_id}{path}", timeout=600,
                          headers={"Authorization": f"Bearer {settings.shuffler_token}"})
    except httpx.HTTPError as exc:
        raise HTTPException(status_code=502, detail=f"the shuffler at {settings.shuffler_url} did not answer: {exc}") from exc
    try:
        body = r.json()
    except ValueError:
        body = {"detail": r.text[:500]}
    status = r.status_code if r.status_code in (200, 404, 409) else 502
    return JSONResponse(status_code=status, content=body)


@router.get("/{round_id}/pending")
def pending(round_id: str, service: Service, settings: ServerSettings, _: Operator) -> JSONResponse:
    """What the shuffler still holds for the round: pending messages, its batch
    threshold, whether they can be released (smaller tails never are)."""
    service.get(round_id)
    return _ask_shuffler("GET", round_id, "", settings)


@router.post("/{round_id}/flush")
def flush(round_id: str, service: Service, settings: ServerSettings, _: Operator) -> JSONResponse:
    """Ask the shuffler to release the round's pending messages now, as one
    shuffled batch, if there are at least its threshold (409 otherwise)."""
    service.get(round_id)
    return _ask_shuffler("POST", round_id, "/flush", settings)
