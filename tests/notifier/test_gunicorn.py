"""The real thing: gunicorn with two workers, killed with SIGKILL mid-flight, restarted: nothing lost, nothing twice."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import requests

from standins.argo_api import FakeArgo
from standins.processes import free_port, start_gunicorn, stop
from standins.receivers import Receivers
from tests.helpers import outbox_idle, wait_until

from .conftest import PD_KEY, TOKEN, drill_app, notification, service_env

pytestmark = pytest.mark.slow  # gunicorn workers killed and restarted


def start(
    tmp_path: Path, port: int, argo: FakeArgo, rx: Receivers, outbox_url: str
) -> subprocess.Popen[bytes]:
    env = service_env(
        tmp_path,
        argo,
        rx.channels(feishu_secret="x", routing_key=PD_KEY),
        DRIFTGUARD_ARGOCD_RETRIES="0",
        DRIFTGUARD_ARGOCD_TIMEOUT="1",
        DRIFTGUARD_NOTIFIER_LEASE="3",  # how long a killed process's claim blocks the work
        DRIFTGUARD_NOTIFIER_DATABASE_URL=outbox_url,
    )
    return start_gunicorn("notifier.app:create_app()", port, env, tmp_path / "gunicorn.log")


def test_kill_9_loses_nothing_and_sends_nothing_twice(
    tmp_path: Path, argo: FakeArgo, rx: Receivers, outbox_url: str
) -> None:
    drill_app(argo)
    argo.fail_with = 503  # Argo CD is down: the notification must wait in the outbox
    port = free_port()
    proc = start(tmp_path, port, argo, rx, outbox_url)
    try:
        resp = requests.post(
            f"http://127.0.0.1:{port}/v1/notifications",
            data=json.dumps(notification()),
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=5,
        )
        assert resp.status_code == 202
    finally:
        stop(proc, kill=True)
    assert rx.captured == []
    argo.fail_with = None
    proc = start(tmp_path, port, argo, rx, outbox_url)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: len(rx.captured) >= 3, "three messages")
        # would a second worker send it again? Not once nothing is pending
        wait_until(lambda: outbox_idle(url, TOKEN), "the outbox idle")
        assert sorted(c.path for c in rx.captured) == ["/feishu", "/pagerduty", "/slack"]
    finally:
        stop(proc)
