"""The FastAPI aggregation server: ``create_app(settings)``."""

from __future__ import annotations

import logging

from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles
from fastapi_offline import FastAPIOffline

from shoal.common.services.device_cors import SERVER_DEVICE_PATHS, allow_device_origins
from shoal.common.services.http_edge import guard
from shoal.server.edge import http_errors, metrics
from shoal.server.edge.dashboard import pages
from shoal.server.edge.routers import device_page, health, reports, rounds
from shoal.server.edge.settings import Settings
from shoal.server.rounds.service import RoundService, RoundsSettings

log = logging.getLogger("shoal.server")


def create_app(settings: Settings) -> FastAPI:
    # Swagger UI and ReDoc from files in the wheel, not a CDN (issue 16: /docs was blank offline).
    app = FastAPIOffline(title="shoal aggregation server", version="0.1.0")
    app.state.settings = settings
    app.state.service = RoundService(RoundsSettings(
        db_url=settings.db_url, key_path=settings.key_path, decode_lease_seconds=settings.decode_lease_seconds,
        decode_memory_bytes=settings.decode_memory_bytes, report_retention_days=settings.report_retention_days,
        dask_scheduler=settings.dask_scheduler, dask_deadline_seconds=settings.dask_deadline_seconds,
        dask_fallback=settings.dask_fallback, id_set_budget=settings.id_set_budget))

    app.state.registry = metrics.install(app, app.state.service)
    guard(app, settings.max_body_bytes, body_seconds=settings.body_seconds)
    # Browser devices on the operator's own pages (SHOAL_DEVICE_ORIGINS): CORS on the device endpoints only.
    allow_device_origins(app, settings.device_origins, SERVER_DEVICE_PATHS)
    http_errors.install(app)
    # The device endpoints first: routes are matched in order, and a POST of reports is most of the traffic
    # (issue 42: the binary batch route 9th of 12 cost 47 us of matching a request, 5th 9 us; its paths end
    # in /reports* or /shuffled, which no other router's path does, so nothing is shadowed).
    app.include_router(reports.router)
    app.include_router(health.router)
    # Before rounds.router: GET /rounds/open is not GET /rounds/{round_id}. /device: the TypeScript device's page.
    app.include_router(device_page.router)
    app.include_router(rounds.router)
    # The operator dashboard (server/edge/dashboard/): pages under /ui, behind a log-in with the operator token.
    app.include_router(pages.router)
    app.mount("/ui/static", StaticFiles(directory=pages.HERE / "static"), name="ui-static")
    pages.install(app)  # security headers under /ui (dashboard/headers.py)

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse("/ui/rounds", status_code=303)

    return app
