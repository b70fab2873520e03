"""Cross-origin access for browser devices (issue 40: the TypeScript device
embedded in a product's own web page).

A page served from ``https://app.example`` that runs ``shoal-device`` calls
the server (and, in shuffle rounds, the shuffler) on another origin; a
browser lets it read the answers only if the service says that origin may
(CORS). ``SHOAL_DEVICE_ORIGINS`` lists the origins, comma separated
(``https://app.example,https://www.app.example``; ``*`` for any page), and
is empty by default: no cross-origin access, as before.

It opens only the paths a device uses (``SERVER_DEVICE_PATHS``,
``SHUFFLER_DEVICE_PATHS``), only for GET and POST, with only the headers a
device sends (``content-type``; ``x-device-token`` at the shuffler) and no
credentials. An operator endpoint is never given CORS headers, and a
cross-origin request that carries an ``Authorization`` header fails the
browser's preflight: a page can reach what any device may, nothing an
operator token guards. Privacy does not rest on it: every message a device
sends is randomised (or sealed) before it leaves the page.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from shoal.common.errors import ConfigError

if TYPE_CHECKING:
    from fastapi import FastAPI
    from starlette.types import ASGIApp, Receive, Scope, Send

ORIGIN = re.compile(r"https?://(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+)(:[0-9]{1,5})?")
#: What a device calls at the server: the protocol, the server key, the open rounds, a round's state and
#: config, and its reports (JSON or binary).
SERVER_DEVICE_PATHS = re.compile(r"/(protocol|server-key|rounds/open|rounds/[^/]+(/config|/reports(/binary)?)?)")
#: What a device calls at the shuffler: its sealed message for a round.
SHUFFLER_DEVICE_PATHS = re.compile(r"/rounds/[^/]+/messages")


def parse_origins(text: str) -> tuple[str, ...]:
    """``SHOAL_DEVICE_ORIGINS`` as a tuple of origins (scheme://host[:port], no path), or ``("*",)``."""
    items = tuple(s.strip().rstrip("/") for s in text.split(",") if s.strip())
    if "*" in items:
        if len(items) > 1:
            raise ConfigError("SHOAL_DEVICE_ORIGINS: '*' (any page) cannot be combined with listed origins")
        return items
    for item in items:
        if not ORIGIN.fullmatch(item):
            raise ConfigError(f"SHOAL_DEVICE_ORIGINS: {item!r} is not an origin (scheme://host[:port], "
                              "http or https, no path), nor '*'")
    return items


class DeviceCORS:
    """Starlette's CORS middleware on the paths that match ``paths``; every
    other request passes through untouched (no CORS headers, no preflight)."""

    def __init__(self, app: ASGIApp, paths: re.Pattern[str], origins: tuple[str, ...], headers: tuple[str, ...]) -> None:
        from starlette.middleware.cors import CORSMiddleware

        self.app = app
        self.paths = paths
        self.cors = CORSMiddleware(app, allow_origins=list(origins), allow_methods=["GET", "POST"],
                                   allow_headers=list(headers), allow_credentials=False, max_age=600)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.paths.fullmatch(scope["path"]):
            await self.cors(scope, receive, send)
        else:
            await self.app(scope, receive, send)


def allow_device_origins(app: FastAPI, origins: tuple[str, ...], paths: re.Pattern[str],
                         headers: tuple[str, ...] = ("content-type",)) -> None:
    """Install ``DeviceCORS`` when any origin is listed (nothing otherwise)."""
    if origins:
        app.add_middleware(DeviceCORS, paths=paths, origins=origins, headers=headers)
