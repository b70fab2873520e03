"""Security headers on every response under /ui (issue 39: the dashboard had none)
and under /device, the public page a person takes part from (issue 40).

- ``Content-Security-Policy``: scripts, styles, forms and fetches from this
  origin only, no inline script or style (the templates have none: the one
  script and the stylesheet are files under /ui/static; plots are inline SVG
  markup, which is not script), no plugins, no ``<base>``, and
  ``frame-ancestors 'none'``: no other page may frame the dashboard;
- ``X-Frame-Options: DENY``: the same for browsers without CSP 2;
- ``X-Content-Type-Options: nosniff``: a file is only what its type says;
- ``Referrer-Policy: no-referrer``: round ids in URLs do not leak to links;
- ``Cache-Control: no-store``: pages with results and CSRF tokens are not
  kept by the browser or a proxy (the two static files are tiny).

A pure ASGI middleware, so it covers the router's pages, the static files
mount and the app's own 404s and errors under /ui alike.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

PREFIX = "/ui"
PREFIXES = (PREFIX, "/device")
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "form-action 'self'; base-uri 'none'; object-src 'none'; frame-ancestors 'none'")
HEADERS = {
    "content-security-policy": CSP,
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}


class SecurityHeaders:
    """Sets ``HEADERS`` on every HTTP response whose path is one of ``PREFIXES``
    or under it (replacing any value a route set for the same header)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._raw = [(k.encode(), v.encode()) for k, v in HEADERS.items()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if not any(path == p or path.startswith(p + "/") for p in PREFIXES):
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in HEADERS_BYTES]
                message = {**message, "headers": kept + self._raw}
            await send(message)

        await self.app(scope, receive, send_with_headers)


HEADERS_BYTES = {k.encode() for k in HEADERS}
