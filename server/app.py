"""The FastAPI aggregation server: ``create_app(settings)``."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from shoal.server import http_errors
from shoal.server.routers import health, reports, rounds
from shoal.server.service import RoundService
from shoal.server.settings import Settings


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


def create_app(settings: Settings) -> FastAPI:
    app = FastAPI(title="shoal aggregation server", version="0.1.0")
    app.state.service = RoundService(settings)

    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    http_errors.install(app)
    app.include_router(health.router)
    app.include_router(rounds.router)
    app.include_router(reports.router)
    return app
