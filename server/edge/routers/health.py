"""/healthz and /metrics (Prometheus text)."""

from __future__ import annotations

import base64

from fastapi import APIRouter, Request, Response
from fastapi.responses import PlainTextResponse

from shoal.common.randomness.public_stream import PROTOCOL_VERSION, PROTOCOLS
from shoal.server.edge.deps import Service

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/protocol")
def protocol() -> dict[str, object]:
    """The wire protocol versions this server accepts in configs and messages
    (``common/randomness/public_stream.py``; a message of another version gets 422)."""
    return {"protocols": list(PROTOCOLS), "current": PROTOCOL_VERSION}


@router.get("/server-key")
def server_key(service: Service) -> dict[str, str]:
    """The server's identity fingerprint and keys, for operators to distribute.
    Devices must not trust this answer: they pin the fingerprint out of band."""
    return {"fingerprint": service.identity.fingerprint,
            "signing_key": base64.b64encode(service.identity.public_raw).decode(),
            "server_public_key": service.public_key}


@router.get("/metrics", response_class=PlainTextResponse)
def metrics(request: Request) -> Response:
    """Prometheus text format (``server/edge/metrics.py``): report counters,
    decode times, rounds by state, reports per live round, request latency."""
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    return Response(generate_latest(request.app.state.registry), media_type=CONTENT_TYPE_LATEST)
