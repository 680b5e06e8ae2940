"""The notifier's Prometheus metrics through prometheus-client (``driftguard.metrics`` merges gunicorn's workers).

Every label value comes from a known set (``bounded``): channel names from the config, outcomes and
stages from the tuples below, so no request can grow ``/metrics``. The queue depth is read from the
outbox at scrape time: it is the one figure every process shares.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from driftguard.drift import CLASSES
from driftguard.metrics import MULTIPROC_ENV, bounded, exposition

__all__ = ["EXPANDED", "LATENCY_BUCKETS", "RECEIVED", "SENT", "STAGES", "NotifierMetrics"]

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
RECEIVED = ("accepted", "duplicate", "unauthorized", "invalid", "unavailable")
EXPANDED = (
    "alert",
    "resolve",
    "quiet",
    "notice",
    "reverted",
    "retry",
    "app-not-found",
    "unauthorized",
    "fallback",
    "error",
)
SENT = ("sent", "retry", "dead", "unconfirmed")
STAGES = ("expand", "render", "send")
IDENTITY_SOURCES = ("audit", "admission")
IDENTITY_OUTCOMES = ("accepted", "skipped", "invalid", "unauthorized", "unavailable", "dropped", "witnessed")


class _Depth(Collector):
    def __init__(self, depth: Callable[[], dict[str, int]]) -> None:
        self._depth = depth

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "driftguard_notifier_queue_depth", "Pending work in the outbox.", labels=["queue"]
        )
        for queue, value in sorted(self._depth().items()):
            family.add_metric([queue], value)
        yield family


class NotifierMetrics:
    """One process's counters; ``text()`` is the whole service's exposition."""

    def __init__(self, channels: Collection[str], depth: Callable[[], dict[str, int]]) -> None:
        self.channels = frozenset(channels)
        self.registry = CollectorRegistry()
        r = self.registry
        self._received = Counter(
            "driftguard_notifier_received",
            "Notifications received, by outcome (accepted, duplicate, unauthorized, invalid, unavailable).",
            ["outcome"],
            registry=r,
        )
        self._expanded = Counter(
            "driftguard_notifier_expanded",
            "Notifications expanded through Argo CD, by outcome.",
            ["outcome"],
            registry=r,
        )
        self._sent = Counter(
            "driftguard_notifier_sent",
            "Message delivery attempts, by channel and outcome (sent, retry, dead, unconfirmed).",
            ["channel", "outcome"],
            registry=r,
        )
        self._dead = Counter(
            "driftguard_notifier_dead_letters", "Messages given up on, by channel.", ["channel"], registry=r
        )
        self._dedup = Counter(
            "driftguard_notifier_deduplicated",
            "Alerts not sent again within the dedup window, by channel.",
            ["channel"],
            registry=r,
        )
        self._identity = Counter(
            "driftguard_notifier_identity_records",
            "Identity records received on /v1/audit and /v1/admission, by source and outcome.",
            ["source", "outcome"],
            registry=r,
        )
        self._failures = Counter(
            "driftguard_notifier_failures",
            "Failed attempts, by stage (expand: Argo CD or the drift engine; render: templates; send: a receiver).",
            ["stage"],
            registry=r,
        )
        self._changes = Counter(
            "driftguard_notifier_drift_changes",
            "Drifted fields and resources seen in expanded notifications, by class (human, controller, ...).",
            ["class"],
            registry=r,
        )
        self._latency = Histogram(
            "driftguard_notifier_delivery_seconds",
            "Seconds from webhook received to message delivered, by channel.",
            ["channel"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self._depth = CollectorRegistry()
        self._depth.register(_Depth(depth))
        # every series a rule reads with increase() exists at 0 from start-up: a series created by
        # its first event has no earlier sample, so increase() would miss that first dead letter
        for outcome in RECEIVED:
            self._received.labels(outcome)
        for stage in STAGES:
            self._failures.labels(stage)
        for channel in sorted(self.channels):
            self._dead.labels(channel)

    def _channel(self, name: str) -> str:
        return bounded(name, self.channels)

    def received(self, outcome: str) -> None:
        self._received.labels(bounded(outcome, RECEIVED)).inc()

    def expanded(self, outcome: str) -> None:
        self._expanded.labels(bounded(outcome, EXPANDED)).inc()

    def sent(self, channel: str, outcome: str) -> None:
        self._sent.labels(self._channel(channel), bounded(outcome, SENT)).inc()
        if outcome == "dead":
            self._dead.labels(self._channel(channel)).inc()

    def deduplicated(self, channel: str) -> None:
        self._dedup.labels(self._channel(channel)).inc()

    def identity(self, source: str, outcome: str, n: int = 1) -> None:
        self._identity.labels(bounded(source, IDENTITY_SOURCES), bounded(outcome, IDENTITY_OUTCOMES)).inc(n)

    def failure(self, stage: str) -> None:
        self._failures.labels(bounded(stage, STAGES)).inc()

    def changes(self, report: Any) -> None:
        """Count a report's changes by class: the alerting ones and the suppressed counts."""
        for c in report.alerting:
            self._changes.labels(bounded(c.cls, CLASSES)).inc()
        for cls, n in report.suppressed.items():
            self._changes.labels(bounded(cls, CLASSES)).inc(n)

    def delivered(self, channel: str, seconds: float) -> None:
        self._latency.labels(self._channel(channel)).observe(max(0.0, seconds))

    def text(self) -> tuple[bytes, str]:
        """Every worker's counters (multiprocess mode) or this process's, then the queue depth."""
        if os.environ.get(MULTIPROC_ENV):
            body, content_type = exposition()
        else:
            from prometheus_client import CONTENT_TYPE_LATEST

            body, content_type = generate_latest(self.registry), CONTENT_TYPE_LATEST
        return body + generate_latest(self._depth), content_type
