"""/rounds/{id}/reports (devices) and /rounds/{id}/shuffled (the shuffler)."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request

from shoal.common.errors import ReportError
from shoal.common.wire.binary import CONTENT_TYPE, SKETCH_MAGIC, sketch_message
from shoal.common.wire.models import CodebookMessage, DeviceMessage, PointMessage, SketchMessage
from shoal.server.edge.api_models import (
    AcceptedOut,
    BatchIn,
    RefusedOut,
    SealedBatchIn,
    ShuffledOut,
)
from shoal.server.edge.deps import ServerSettings, Service, Shuffler

router = APIRouter(prefix="/rounds/{round_id}", tags=["reports"])


def _check_round(round_id: str, messages: list[DeviceMessage | SketchMessage | PointMessage | CodebookMessage]) -> None:
    for m in messages:
        if m.round_id != round_id:
            raise ReportError(f"message for round {m.round_id!r} posted to round {round_id!r}")


@router.post("/reports", status_code=202, response_model=AcceptedOut)
async def post_report(round_id: str, body: DeviceMessage | SketchMessage | PointMessage | CodebookMessage,
                      service: Service) -> AcceptedOut:
    """One report (tree: hist/vec; sketch round: sketch and n0): validated on
    the event loop, then awaits its (group) commit. A central round's point is
    parsed only to be refused by its kind (points travel sealed)."""
    _check_round(round_id, [body])
    new, dup = await service.ingest_async(round_id, [body])
    return AcceptedOut(accepted=new, duplicates=dup)


@router.post("/reports/binary", status_code=202, response_model=AcceptedOut,
             openapi_extra={"requestBody": {"required": True, "content": {CONTENT_TYPE: {"schema": {
                 "type": "string", "format": "binary",
                 "description": "b'SHB' + format 2 + protocol, then per device 16 bytes of message id and a "
                                "22-byte tree row; or one local sketch: b'SHS' + format 1 + protocol, message id, "
                                "n0, grid exponent, width, 2m grid integers (common/wire/binary.py)"}}}}})
async def post_binary(round_id: str, request: Request, service: Service, settings: ServerSettings) -> AcceptedOut:
    """A batch of tree reports in the compact binary form (issue 19): 38 bytes
    a device instead of ~230 of JSON, parsed with numpy, validated like JSON.
    A local sketch's binary report (issue 45, Build 5: 8 m + 28 bytes instead
    of ~34 m of JSON) is read into its ``SketchMessage`` and ingested exactly
    as the JSON one is (the same checks: length, the grid of its n0)."""
    if request.headers.get("content-type", "").split(";")[0].strip() != CONTENT_TYPE:
        raise HTTPException(status_code=415, detail=f"binary report batches have Content-Type {CONTENT_TYPE}")
    body = await request.body()
    if body[:3] == SKETCH_MAGIC:
        message = sketch_message(body, round_id)
        new, dup = await service.ingest_async(round_id, [message])
        return AcceptedOut(accepted=new, duplicates=dup)
    new, dup = await service.ingest_binary_async(round_id, body, settings.max_batch)
    return AcceptedOut(accepted=new, duplicates=dup)


@router.post("/reports/batch", status_code=202, response_model=AcceptedOut)
def post_batch(round_id: str, body: BatchIn, service: Service, settings: ServerSettings) -> AcceptedOut:
    if len(body.messages) > settings.max_batch:
        raise HTTPException(status_code=413, detail=f"batch of {len(body.messages)} messages exceeds {settings.max_batch}")
    _check_round(round_id, body.messages)
    new, dup = service.ingest(round_id, body.messages)
    return AcceptedOut(accepted=new, duplicates=dup)


@router.post("/shuffled", status_code=202, response_model=ShuffledOut)
def post_shuffled(round_id: str, body: SealedBatchIn, service: Service, settings: ServerSettings,
                  _: Shuffler) -> ShuffledOut:
    """A released batch: every item that opens and fits the round is stored;
    the rest are listed in ``refused`` (the shuffler drops them)."""
    if len(body.sealed) > settings.max_batch:
        raise HTTPException(status_code=413, detail=f"batch of {len(body.sealed)} messages exceeds {settings.max_batch}")
    new, dup, refused = service.ingest_sealed(round_id, body.sealed)
    return ShuffledOut(accepted=new, duplicates=dup,
                       refused=[RefusedOut(index=i, reason=reason, detail=detail) for i, reason, detail in refused])
