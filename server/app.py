"""The FastAPI aggregation server: ``create_app(settings)``."""

from __future__ import annotations

import logging

from fastapi import FastAPI

from shoal.common.http_edge import guard
from shoal.server import http_errors
from shoal.server.routers import health, reports, rounds
from shoal.server.service import RoundService
from shoal.server.settings import Settings

log = logging.getLogger("shoal.server")


def create_app(settings: Settings) -> FastAPI:
    app = FastAPI(title="shoal aggregation server", version="0.1.0")
    app.state.service = RoundService(settings)

    guard(app, settings.max_body_bytes, body_seconds=settings.body_seconds)
    http_errors.install(app)
    app.include_router(health.router)
    app.include_router(rounds.router)
    app.include_router(reports.router)
    return app
