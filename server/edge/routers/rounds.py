"""/rounds: create, list, inspect, configure, cluster, results, delete."""

from __future__ import annotations

from fastapi import APIRouter, Response

from shoal.server.edge.api_models import CreateRoundIn, RefineIn, ResultOut, RoundOut
from shoal.server.edge.deps import Operator, Service
from shoal.server.storage.store import RoundRow

router = APIRouter(prefix="/rounds", tags=["rounds"])


def _out(row: RoundRow, service: Service) -> RoundOut:
    return RoundOut(
        id=row.id, state=row.state, reports=row.reports, created=row.created,
        config=row.config, server_public_key=service.public_key, error=row.error,
    )


@router.post("", status_code=201, response_model=RoundOut)
def create_round(body: CreateRoundIn, service: Service, _: Operator) -> RoundOut:
    return _out(service.create(body.to_request()), service)


@router.get("", response_model=list[RoundOut])
def list_rounds(service: Service, _: Operator) -> list[RoundOut]:
    return [_out(r, service) for r in service.store.list_rounds()]


@router.get("/{round_id}", response_model=RoundOut)
def get_round(round_id: str, service: Service) -> RoundOut:
    return _out(service.get(round_id), service)


@router.get("/{round_id}/config")
def get_config(round_id: str, service: Service, response: Response) -> dict[str, object]:
    """The round's public config, signed by the server's identity key
    (``common/signing.py``): devices and the shuffler verify it against the
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


@router.post("/{round_id}/cluster", response_model=ResultOut)
def cluster(round_id: str, service: Service, _: Operator) -> ResultOut:
    # A sync endpoint: FastAPI runs it in its thread pool, off the event loop.
    return ResultOut(**service.cluster(round_id))


@router.get("/{round_id}/result", response_model=ResultOut)
def result(round_id: str, service: Service) -> ResultOut:
    return ResultOut(**service.result(round_id))


@router.delete("/{round_id}", status_code=204)
def delete_round(round_id: str, service: Service, _: Operator) -> Response:
    service.delete(round_id)
    return Response(status_code=204)
