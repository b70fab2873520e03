"""/metrics for Prometheus, through prometheus_client (issue 16, item 7: six
hand-written series had no HELP lines and no latency).

One registry per app (tests run several apps in one process). The service's
counters and the store's round states are read at scrape time by a custom
collector, so the ingestion path keeps its plain ``Counter`` increments; a
pure-ASGI middleware (no per-request task, unlike ``BaseHTTPMiddleware``)
times every request into a histogram by route template, never by raw path
(round ids would explode the label set).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Histogram, disable_created_metrics
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.registry import Collector

from shoal.server.rounds.service import RoundService

# Seconds: a single report takes ~1 ms, a batch tens of ms, a decode seconds.
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 120.0)


class ServiceCollector(Collector):
    """The round service's counters and the store's rounds, read per scrape."""

    def __init__(self, service: RoundService) -> None:
        self.service = service

    def collect(self) -> Iterator[Metric]:
        m = self.service.metrics
        yield CounterMetricFamily("shoal_reports_accepted", "Reports stored (each message id counted once).",
                                  value=m["accepted"])
        yield CounterMetricFamily("shoal_reports_duplicate", "Reports whose message id was already stored (not "
                                  "counted again).", value=m["duplicates"])
        rejected = CounterMetricFamily("shoal_reports_rejected", "Reports refused, by reason: invalid (failed "
                                       "validation), sealed (a shuffled item that did not open or fit its round).",
                                       labels=["reason"])
        for reason in ("invalid", "sealed"):
            rejected.add_metric([reason], m["rejected_" + reason])
        yield rejected
        d = list(self.service.decode_seconds)
        yield SummaryMetricFamily("shoal_decode_seconds", "Time to decode a round (load, accumulate, decode).",
                                  count_value=len(d), sum_value=sum(d))
        rounds = self.service.store.list_rounds()
        states = GaugeMetricFamily("shoal_rounds", "Rounds in the store, by state.", labels=["state"])
        for state, count in sorted(Counter(r.state for r in rounds).items()):
            states.add_metric([state], count)
        yield states
        live = GaugeMetricFamily("shoal_round_reports", "Reports stored per round that is not done yet.",
                                 labels=["round"])
        for r in rounds:
            if r.state in ("open", "closed", "decoding"):
                live.add_metric([r.id], r.reports)
        yield live


class LatencyMiddleware:
    """Times every HTTP request into ``shoal_http_request_seconds`` by method,
    route template and status."""

    def __init__(self, app: Any, histogram: Histogram) -> None:
        self.app = app
        self.histogram = histogram

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = [500]

        async def send_status(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            route = scope.get("route")
            path = getattr(route, "path", "unmatched")
            self.histogram.labels(scope["method"], path, str(status[0])).observe(time.perf_counter() - start)


def install(app: Any, service: RoundService) -> CollectorRegistry:
    """The app's registry, with the service's collector and the latency middleware."""
    disable_created_metrics()  # no *_created series: they double every histogram's lines for nothing here
    registry = CollectorRegistry(auto_describe=True)
    registry.register(ServiceCollector(service))
    histogram = Histogram("shoal_http_request_seconds", "HTTP request latency by method, route template and status.",
                          ["method", "route", "status"], registry=registry, buckets=BUCKETS)
    app.add_middleware(LatencyMiddleware, histogram=histogram)
    return registry
