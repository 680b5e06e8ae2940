"""Analysis provider fixtures: Argo CD and Prometheus as local servers, a fixed clock."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from flask import Flask

from analysis_provider.app import create_app
from analysis_provider.settings import AnalysisSettings
from driftguard.argocd import ArgoCDSettings
from standins import argo_api, prometheus

TOKEN = "analysis-test-token-0123456789"
NOW = datetime(2026, 11, 29, 15, 0, tzinfo=UTC)  # 23:00 in Asia/Shanghai


@pytest.fixture
def argo() -> Iterator[argo_api.FakeArgo]:
    with argo_api.serve() as fake:
        yield fake


@pytest.fixture
def prom() -> Iterator[prometheus.FakePrometheus]:
    with prometheus.serve() as fake:
        yield fake


def make_app(argo: argo_api.FakeArgo, prom: prometheus.FakePrometheus | None = None, **extra: Any) -> Flask:
    settings = AnalysisSettings(
        token=TOKEN,
        redact_key=b"redact-key-for-tests-0123456789abcdef",
        prometheus_url=prom.url if prom else "",
        timeout=extra.pop("timeout", 1.0),
        cache_ttl=extra.pop("cache_ttl", 0.0),
        argocd=ArgoCDSettings(url=argo.url, token=argo.token),
        **extra,
    )
    return create_app(settings, now=lambda: NOW)


@pytest.fixture
def app(argo: argo_api.FakeArgo, prom: prometheus.FakePrometheus) -> Flask:
    return make_app(argo, prom)


def get(app: Flask, path: str, *, token: str = TOKEN) -> Any:
    return app.test_client().get(path, headers={"Authorization": f"Bearer {token}"} if token else {})


def sample(app: Flask, name: str, **labels: str) -> float:
    """One sample's value in /metrics (0 when absent); the registry is the process's, so compare deltas."""
    from prometheus_client.parser import text_string_to_metric_families

    text = get(app, "/metrics").get_data(as_text=True)
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and s.labels == labels:
                return float(s.value)
    return 0.0
