"""What both services (server and shuffler) put between the network and
their routes, so that a slow, huge or broken request costs little:

- ``serve``: uvicorn with a header timeout (a connection must finish its
  request line and headers within ``header_seconds``; issue 13: 1,100 half-sent
  requests held 1,100 descriptors for ever) and the descriptor limit raised;
- ``Guards``: a body's Content-Length required (chunked bodies refused) and bounded, at most ``large_slots``
  large bodies read at once (a 503 beyond), and each body chunk due within
  ``body_seconds`` (408 otherwise);
- ``InternalErrors``: an unexpected exception is a JSON 500 that keeps the
  connection usable;
- one error shape (``ERROR_SCHEMA``) published in the OpenAPI spec, and field
  errors that never echo their input.

Only the services import this module (devices never do); FastAPI, Starlette
and uvicorn are imported where used.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import resource
import secrets
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fastapi import FastAPI
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("shoal.http")

ERROR_SCHEMA = {
    "title": "Error",
    "type": "object",
    "description": "Every error answer: what went wrong (a sentence, or where/why for each invalid field) "
                   "and the error's class for a domain error",
    "properties": {
        "detail": {"anyOf": [
            {"type": "string"},
            {"type": "array", "items": {"type": "object", "properties": {
                "loc": {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]}},
                "msg": {"type": "string"}, "type": {"type": "string"}}}},
        ]},
        "error": {"type": "string"},
    },
    "required": ["detail"],
}


def document_errors(app: FastAPI) -> None:
    """Publish the one error shape in the OpenAPI spec: FastAPI's default 422
    schema (a list of field errors) replaced by ``ERROR_SCHEMA``, which every
    error answer of both services follows, and declared as every operation's
    ``default`` response."""

    from fastapi.openapi.utils import get_openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, routes=app.routes)
            schemas = schema.setdefault("components", {}).setdefault("schemas", {})
            schemas["HTTPValidationError"] = ERROR_SCHEMA
            for path in schema.get("paths", {}).values():
                for op in path.values():
                    op.setdefault("responses", {})["default"] = {
                        "description": "an error", "content": {"application/json": {
                            "schema": {"$ref": "#/components/schemas/HTTPValidationError"}}}}
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def answer_field_errors(app: FastAPI) -> None:
    """Invalid requests answer 422 with where and why for each field, never
    the offending input (it may hold NaN, which JSON cannot carry, a device's
    data, or megabytes of a sealed message)."""
    from fastapi import Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        detail = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
                  for e in exc.errors()]
        return JSONResponse(status_code=422, content={"detail": detail})


class Guards:
    """Pure ASGI middleware bounding what a request body may cost."""

    def __init__(self, app: ASGIApp, max_bytes: int, large_bytes: int = 1 << 20, large_slots: int = 2,
                 body_seconds: float = 30.0) -> None:
        self.app, self.max_bytes, self.large_bytes = app, max_bytes, large_bytes
        self.body_seconds = body_seconds
        self.slots = asyncio.Semaphore(large_slots)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        from starlette.responses import JSONResponse

        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        length = headers.get(b"content-length")
        if length is None:
            if b"transfer-encoding" in headers:  # a chunked body could not be bounded before reading it
                await JSONResponse(status_code=411, content={"detail": "Content-Length required"})(scope, receive, send)
                return
            length = b"0"  # neither header: the request has no body (RFC 9112, 6.3), e.g. curl -X POST
        if not length.isdigit() or int(length) > self.max_bytes:
            await JSONResponse(status_code=413, content={"detail": f"body over {self.max_bytes} bytes"})(
                scope, receive, send)
            return
        if int(length) <= self.large_bytes:
            await self._timed(scope, receive, send)
            return
        if self.slots.locked():
            await JSONResponse(status_code=503, headers={"Retry-After": "2"}, content={
                "detail": "too many large bodies in flight; retry shortly"})(scope, receive, send)
            return
        async with self.slots:
            await self._timed(scope, receive, send)

    async def _timed(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the app with each body chunk due within ``body_seconds``."""
        from starlette.responses import JSONResponse

        done = False
        sent = _StartTracker(send)

        async def timed_receive() -> Message:
            nonlocal done
            if done:
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), self.body_seconds)
            except asyncio.TimeoutError:
                raise _SlowBody from None
            done = message["type"] != "http.request" or not message.get("more_body", False)
            return message

        try:
            await self.app(scope, timed_receive, sent)
        except _SlowBody:
            if sent.started:
                raise
            await JSONResponse(status_code=408, headers={"Connection": "close"}, content={
                "detail": f"request body not received within {self.body_seconds:g} s"})(scope, receive, send)


class _StartTracker:
    """An ASGI ``send`` that remembers whether the response has started (after
    which a middleware can no longer answer in its place)."""

    def __init__(self, send: Send) -> None:
        self.send, self.started = send, False

    async def __call__(self, message: Message) -> None:
        self.started = self.started or message["type"] == "http.response.start"
        await self.send(message)


class _SlowBody(BaseException):
    """A body chunk did not arrive in time. A BaseException so that the
    framework's own body parsing (which turns any Exception into a 400) lets
    it through to ``Guards``."""


class InternalErrors:
    """Pure ASGI middleware: an exception nothing else handled becomes a JSON
    500 with an error id (logged with its traceback), and is not re-raised, so
    the client's keep-alive connection stays usable (issue 13: after a 500,
    uvicorn reset the connection and 9 of 20 follow-up requests failed).
    Every user mistake is a 4xx before it gets here; this is for our bugs."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        from starlette.responses import JSONResponse

        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        sent = _StartTracker(send)
        try:
            await self.app(scope, receive, sent)
        except Exception:
            error_id = secrets.token_hex(6)
            log.exception("internal error %s on %s %s", error_id, scope.get("method"), scope.get("path"))
            if sent.started:
                raise
            body = {"detail": f"internal error {error_id}: see the service log", "error": "InternalError"}
            await JSONResponse(status_code=500, content=body)(scope, receive, send)


def guard(app: FastAPI, max_body_bytes: int, large_slots: int = 2, body_seconds: float = 30.0) -> None:
    """Install ``Guards`` and ``InternalErrors`` and the error shape on ``app``."""
    app.add_middleware(Guards, max_bytes=max_body_bytes, large_slots=large_slots, body_seconds=body_seconds)
    app.add_middleware(InternalErrors)
    document_errors(app)
    answer_field_errors(app)


class _JsonFormatter(logging.Formatter):
    """One JSON object per line (SHOAL_LOG_JSON=1), for log collectors."""

    def format(self, record: logging.LogRecord) -> str:
        return json.dumps({"time": self.formatTime(record), "level": record.levelname, "logger": record.name,
                           "message": record.getMessage()})


def configure_logging(level: str = "info") -> None:
    """shoal's own loggers (round events, decode timings, batches) on stderr
    beside uvicorn's request lines; JSON lines when SHOAL_LOG_JSON=1."""
    handler = logging.StreamHandler()
    if os.environ.get("SHOAL_LOG_JSON") == "1":
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("shoal")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False


def serve(app: FastAPI, host: str, port: int, log_level: str = "info", header_seconds: float = 10.0) -> None:
    """Run ``app`` under uvicorn (httptools) with a header timeout, after
    raising the soft descriptor limit to the hard one."""
    import uvicorn
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    configure_logging(log_level)

    class HeaderTimeout(HttpToolsProtocol):
        """A connection that has not completed a request's line and headers
        within ``header_seconds`` of connecting (or of its request's first
        byte) is closed; uvicorn alone waits for ever."""

        _timer: asyncio.TimerHandle | None = None

        def _arm(self) -> None:
            self._disarm()
            self._timer = self.loop.call_later(header_seconds, self._expire)

        def _disarm(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

        def _expire(self) -> None:
            if not self.transport.is_closing():
                self.transport.close()

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._arm()

        def on_headers_complete(self) -> None:
            self._disarm()
            super().on_headers_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    # Everything made so far (modules, the app, its routes: ~139k objects in the
    # server) lives as long as the process: moved out of the collector's reach,
    # a full collection walks only what requests made since. Issue 42: a full
    # collection over them held the GIL 115-131 ms under the batch load, with
    # every request and commit waiting behind it.
    gc.freeze()
    uvicorn.run(app, host=host, port=port, log_level=log_level, http=HeaderTimeout)
