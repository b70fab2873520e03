"""The FastAPI aggregation server: ``create_app(settings)``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse

from shoal.server import http_errors
from shoal.server.routers import health, reports, rounds
from shoal.server.service import RoundService
from shoal.server.settings import Settings


def create_app(settings: Settings) -> FastAPI:
    app = FastAPI(title="shoal aggregation server", version="0.1.0")
    app.state.service = RoundService(settings)

    @app.middleware("http")
    async def limit_body(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        if request.method in ("POST", "PUT", "PATCH"):
            length = request.headers.get("content-length")
            if length is None:
                return JSONResponse(status_code=411, content={"detail": "Content-Length required"})
            if not length.isdigit() or int(length) > settings.max_body_bytes:
                return JSONResponse(status_code=413, content={"detail": f"body over {settings.max_body_bytes} bytes"})
        return await call_next(request)

    http_errors.install(app)
    app.include_router(health.router)
    app.include_router(rounds.router)
    app.include_router(reports.router)
    return app
