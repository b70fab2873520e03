"""Access lines that do not grow with the number of devices (issue 39, Build 4).

uvicorn writes one access line per request: a demo of 5,000 devices wrote
14,901 lines of its server's 15,440. ``access_summary`` keeps uvicorn's line
for the operator's requests (create, close, cluster, the dashboard) and, for
the routes every device calls (``Route``: reports, configs, sealed messages,
health checks), counts the requests and logs one line per route and status
every ``every`` seconds, on the ``shoal.access`` logger::

    shoal.access: last 10.0 s: POST /rounds/{id}/reports 202 x 4980, 409 x 3; GET /rounds/{id}/config 200 x 4983

At ``--log-level debug`` every request keeps its own line as well. Only the
services import this (a logging filter on ``uvicorn.access``, which uvicorn's
own logging set-up leaves in place: ``dictConfig`` replaces a logger's
handlers, not its filters).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fastapi import FastAPI
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("shoal.access")


@dataclass(frozen=True)
class Route:
    """Requests counted instead of logged one by one: ``method`` and a path
    ``pattern`` (a regular expression matched against the whole path, query
    string excluded), shown in the summary as ``template``."""

    method: str
    pattern: str
    template: str

    def matches(self, method: str, path: str) -> bool:
        return method == self.method and re.fullmatch(self.pattern, path) is not None


ID = r"[^/]+"  # one path segment: a round id


class AccessSummary(logging.Filter):
    """A filter for the ``uvicorn.access`` logger: a request to one of
    ``routes`` is counted (and dropped unless DEBUG is on); ``flush`` logs the
    counts since the last flush as one line and resets them."""

    def __init__(self, routes: Sequence[Route]) -> None:
        super().__init__("uvicorn.access")
        self.routes = tuple(routes)
        self.counts: Counter[tuple[str, int]] = Counter()
        self.lock = threading.Lock()
        self.since = time.monotonic()

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        # uvicorn's access line: (client, method, path with query, http version, status)
        if not isinstance(args, tuple) or len(args) != 5:
            return True
        method, path, status = str(args[1]), str(args[2]).split("?", 1)[0], str(args[4])
        for route in self.routes:
            if route.matches(method, path):
                with self.lock:
                    self.counts[(f"{route.method} {route.template}", int(status))] += 1
                if logging.getLogger("uvicorn.access").isEnabledFor(logging.DEBUG):
                    record.levelno, record.levelname = logging.DEBUG, "DEBUG"
                    return True
                return False
        return True

    def flush(self) -> None:
        """One line for the requests counted since the last flush (none: nothing)."""
        now = time.monotonic()
        with self.lock:
            counts, self.counts = self.counts, Counter()
            seconds, self.since = now - self.since, now
        if not counts:
            return
        by_route: dict[str, list[str]] = {}
        for (route, status), n in sorted(counts.items(), key=lambda item: (item[0][0], -item[1], item[0][1])):
            by_route.setdefault(route, []).append(f"{status} x {n}")
        log.info("last %.1f s: %s", seconds,
                 "; ".join(f"{route} {', '.join(parts)}" for route, parts in by_route.items()))

    def flush_at_shutdown(self, app: FastAPI) -> None:
        """Flush when ``app`` shuts down, after its last request: on SIGTERM
        uvicorn re-raises the signal once it has stopped, so code after
        ``serve`` never runs."""
        app.add_middleware(_FlushAtShutdown, summary=self)


class _FlushAtShutdown:
    """Pure ASGI middleware: ``summary.flush()`` as the lifespan shutdown completes."""

    def __init__(self, app: ASGIApp, summary: AccessSummary) -> None:
        self.app, self.summary = app, summary

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return

        async def flushing_send(message: Message) -> None:
            if message["type"] == "lifespan.shutdown.complete":
                self.summary.flush()
            await send(message)

        await self.app(scope, receive, flushing_send)


@contextmanager
def access_summary(routes: Sequence[Route], every: float = 10.0) -> Iterator[AccessSummary]:
    """Install ``AccessSummary`` on ``uvicorn.access`` for the duration (a
    service's life), flushing every ``every`` seconds from a daemon thread and
    once more at the end (and at the app's shutdown: ``flush_at_shutdown``),
    so the last requests are never left uncounted."""
    if every <= 0:
        raise ValueError(f"the access summary interval must be positive, got {every!r} s")
    summary = AccessSummary(routes)
    access = logging.getLogger("uvicorn.access")
    access.addFilter(summary)
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(every):
            summary.flush()

    thread = threading.Thread(target=loop, name="shoal-access-summary", daemon=True)
    thread.start()
    try:
        yield summary
    finally:
        stop.set()
        thread.join(timeout=5)
        summary.flush()
        access.removeFilter(summary)
