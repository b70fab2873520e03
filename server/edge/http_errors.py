"""HTTP status codes for shoal's errors, chosen in one place."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from shoal.common.errors import (
    BatchTooLarge,
    ConfigError,
    DecodeError,
    PrivacyError,
    ReportError,
    ShoalError,
)
from shoal.common.wire.envelope import EnvelopeError
from shoal.server.rounds.reduction import DaskUnavailable
from shoal.server.rounds.service import RoundStateError
from shoal.server.storage.store import StorageUnavailable, UnknownRound

RETRY_AFTER_SECONDS = 5  # what a 503 asks the client to wait

STATUS: list[tuple[type[ShoalError], int]] = [
    (StorageUnavailable, 503),
    (DaskUnavailable, 503),
    (UnknownRound, 404),
    (RoundStateError, 409),
    (DecodeError, 409),
    (BatchTooLarge, 413),
    (ReportError, 422),
    (ConfigError, 422),
    (PrivacyError, 422),
    (EnvelopeError, 400),
    (ShoalError, 400),
]


def status_for(exc: ShoalError) -> int:
    for cls, code in STATUS:
        if isinstance(exc, cls):
            return code
    return 400


def install(app: FastAPI) -> None:

    @app.exception_handler(ShoalError)
    async def _shoal_error(request: Request, exc: ShoalError) -> JSONResponse:
        status = status_for(exc)
        headers = {"Retry-After": str(RETRY_AFTER_SECONDS)} if status == 503 else None
        return JSONResponse(status_code=status, content={"detail": str(exc), "error": type(exc).__name__},
                            headers=headers)
