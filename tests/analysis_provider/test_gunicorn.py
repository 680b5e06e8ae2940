"""driftguard-analysis as the Deployment runs it (the CLI, gunicorn, two workers): metrics of every worker
merged, labels that request input cannot grow, and the deadline held by a real server."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from standins.argo_api import FakeArgo
from standins.faults import Fault
from standins.processes import free_port, start_cli, stop
from standins.prometheus import FakePrometheus
from tests.notifier.conftest import drill_app

from .conftest import TOKEN

pytestmark = pytest.mark.slow  # multi-worker gunicorn

TIMEOUT = 1.5


@pytest.fixture
def service(tmp_path: Path, argo: FakeArgo, prom: FakePrometheus) -> Iterator[str]:
    drill_app(argo, patched=False, secret_changed=False, sync="Synced")
    port = free_port()
    env = {
        "PATH": os.environ["PATH"],
        "TMPDIR": str(tmp_path),  # the multiprocess metrics folder goes here
        "DRIFTGUARD_ANALYSIS_TOKEN": TOKEN,
        "DRIFTGUARD_REDACT_KEY": "redact-key-for-tests-0123456789abcdef",
        "DRIFTGUARD_ARGOCD_URL": argo.url,
        "DRIFTGUARD_ARGOCD_TOKEN": argo.token,
        "DRIFTGUARD_PROMETHEUS_URL": prom.url,
        "DRIFTGUARD_ANALYSIS_TIMEOUT": str(TIMEOUT),
        "DRIFTGUARD_ANALYSIS_CACHE_TTL": "0",
    }
    proc = start_cli("driftguard-analysis", port, env, tmp_path / "gunicorn.log", workers=2, threads=4)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)


def counts(url: str) -> dict[tuple[str, str], float]:
    text = requests.get(f"{url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=5).text
    assert "driftguard_fake_metric" not in text
    return {
        (s.labels["gate"], s.labels["outcome"]): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "driftguard_analysis_requests_total"
    }


def test_metrics_merge_workers_and_stay_bounded(service: str, argo: FakeArgo) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    for _ in range(12):  # a new connection each: gunicorn spreads them over both workers
        assert requests.get(f"{service}/v1/gates/sync?app=deepseek-inference", headers=auth, timeout=5).ok
    for i in range(30):
        requests.get(f"{service}/v1/gates/junk-{i}", headers=auth, timeout=5)
    requests.get(f'{service}/v1/gates/x"}} 1%0Adriftguard_fake_metric{{a="b', timeout=5)
    argo.faults["*"] = Fault("trickle", delay=1.0)
    # the body trickles for minutes: a 504 is the deadline (a read bound of 60 s only stops a hang)
    resp = requests.get(f"{service}/v1/gates/drift?app=deepseek-inference", headers=auth, timeout=60)
    assert resp.status_code == 504, (resp.status_code, resp.text)
    seen = counts(service)
    assert (
        seen[("sync", "pass")] == 12 and seen[("unknown", "404")] == 30 and seen[("unknown", "401")] == 1
    ), seen
    assert seen[("drift", "504")] == 1, seen
    assert {gate for gate, _ in seen} <= {"drift", "sync", "success-rate", "freeze", "all", "unknown"}
