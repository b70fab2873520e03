"""The FastAPI aggregation server: ``create_app(settings)``."""

from __future__ import annotations

import logging
import secrets

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from shoal.server import http_errors
from shoal.server.routers import health, reports, rounds
from shoal.server.service import RoundService
from shoal.server.settings import Settings

log = logging.getLogger("shoal.server")


class BodyLimit:
    """Pure ASGI middleware: 411 without Content-Length, 413 above the limit."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in ("POST", "PUT", "PATCH"):
            headers = dict(scope["headers"])
            length = headers.get(b"content-length")
            if length is None:
                await JSONResponse(status_code=411, content={"detail": "Content-Length required"})(scope, receive, send)
                return
            if not length.isdigit() or int(length) > self.max_bytes:
                body = {"detail": f"body over {self.max_bytes} bytes"}
                await JSONResponse(status_code=413, content=body)(scope, receive, send)
                return
        await self.app(scope, receive, send)


class InternalErrors:
    """Pure ASGI middleware: an exception nothing else handled becomes a JSON
    500 with an error id (logged with its traceback), and is not re-raised, so
    the client's keep-alive connection stays usable (issue 13: after a 500,
    uvicorn reset the connection and 9 of 20 follow-up requests failed).
    Every user mistake is a 4xx before it gets here; this is for our bugs."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception:
            error_id = secrets.token_hex(6)
            log.exception("internal error %s on %s %s", error_id, scope.get("method"), scope.get("path"))
            if started:
                raise
            body = {"detail": f"internal error {error_id}: see the server log", "error": "InternalError"}
            await JSONResponse(status_code=500, content=body)(scope, receive, send)


def create_app(settings: Settings) -> FastAPI:
    app = FastAPI(title="shoal aggregation server", version="0.1.0")
    app.state.service = RoundService(settings)

    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(InternalErrors)
    http_errors.install(app)
    app.include_router(health.router)
    app.include_router(rounds.router)
    app.include_router(reports.router)
    return app
