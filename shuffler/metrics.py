"""The shuffler's /metrics (issue 16, item 7: it had none): what it forwarded,
refused and dropped, and what it holds per round, read at scrape time."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector


class ShufflerCollector(Collector):
    def __init__(self, forwarder: Any, buffer: Any) -> None:
        self.forwarder = forwarder
        self.buffer = buffer

    def collect(self) -> Iterator[Metric]:
        f = self.forwarder
        yield CounterMetricFamily("shoal_shuffler_forwarded_messages", "Sealed messages forwarded to the server in "
                                  "shuffled batches.", value=f.forwarded)
        refused = CounterMetricFamily("shoal_shuffler_refused_messages", "Forwarded messages the server refused, by "
                                      "its reason (never re-sent).", labels=["reason"])
        for reason, n in sorted(f.refused.items()):
            refused.add_metric([reason], n)
        yield refused
        dropped = CounterMetricFamily("shoal_shuffler_dropped_messages", "Messages of batches the server refused "
                                      "for good (round gone, closed or decoding), by its status.", labels=["status"])
        for status, n in sorted(f.dropped.items()):
            dropped.add_metric([status], n)
        yield dropped
        yield CounterMetricFamily("shoal_shuffler_expired_messages", "Buffered messages dropped at their round's age "
                                  "limit (--max-round-age-hours).", value=f.expired)
        orphaned = GaugeMetricFamily("shoal_shuffler_orphaned_messages", "Messages kept for rounds the server answered "
                                     "404 for: not forwarded, dropped at the round's age limit.", labels=["round"])
        for rid, n in sorted(self.buffer.orphaned().items()):
            orphaned.add_metric([rid], n)
        yield orphaned
        pending = GaugeMetricFamily("shoal_shuffler_pending_messages", "Messages buffered per round, waiting for a "
                                    "batch of at least the round's threshold.", labels=["round"])
        for rid in sorted(self.buffer.rounds()):
            pending.add_metric([rid], self.buffer.count(rid))
        yield pending


def registry_for(forwarder: Any, buffer: Any) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=True)
    registry.register(ShufflerCollector(forwarder, buffer))
    return registry
