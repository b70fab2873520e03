"""/healthz and /metrics (Prometheus text)."""

from __future__ import annotations

import base64

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse

from shoal.server.edge.deps import Service

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/server-key")
def server_key(service: Service) -> dict[str, str]:
    """The server's identity fingerprint and keys, for operators to distribute.
    Devices must not trust this answer: they pin the fingerprint out of band."""
    return {"fingerprint": service.identity.fingerprint,
            "signing_key": base64.b64encode(service.identity.public_raw).decode(),
            "server_public_key": service.public_key}


@router.get("/metrics", response_class=PlainTextResponse)
def metrics(service: Service) -> str:
    m = service.metrics
    lines = [
        "# TYPE shoal_reports_accepted_total counter",
        f"shoal_reports_accepted_total {m['accepted']}",
        "# TYPE shoal_reports_duplicate_total counter",
        f"shoal_reports_duplicate_total {m['duplicates']}",
        "# TYPE shoal_reports_rejected_total counter",
    ]
    for reason in ("invalid", "sealed"):
        lines.append(f'shoal_reports_rejected_total{{reason="{reason}"}} {m["rejected_" + reason]}')
    d = service.decode_seconds
    lines += [
        "# TYPE shoal_decode_seconds summary",
        f"shoal_decode_seconds_count {len(d)}",
        f"shoal_decode_seconds_sum {sum(d):.6f}",
    ]
    return "\n".join(lines) + "\n"
