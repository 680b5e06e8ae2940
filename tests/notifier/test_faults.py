"""The fault table: the real service under gunicorn (two workers), the Argo CD stand-in and receivers
that fail, hang, rate limit and reset. Every fault ends in one alert per app on every channel (a
PagerDuty resend carries the same dedup_key), nothing lost; a faulty channel does not hold the others.

The table prints with ``.venv/bin/python -m pytest tests/notifier/test_faults.py -s -q``.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from standins.argo_api import FakeArgo
from standins.drill import serve_drill
from standins.processes import free_port, start_gunicorn, stop
from standins.receivers import Receivers
from tests.helpers import outbox_idle, wait_until

from .conftest import PD_KEY, TOKEN, service_env

pytestmark = pytest.mark.slow  # the fault table: every fault, each a minute at most

PATHS = ("/feishu", "/slack", "/pagerduty")
APPS = 4


@dataclass
class Fault:
    name: str
    inject: Callable[[FakeArgo, Receivers], None]
    channel: str = ""  # the faulty receiver, if it is one


def _hang(path: str) -> Callable[[FakeArgo, Receivers], None]:
    """The receiver answers 4 s late (after our 2 s read timeout) for the next 3 s."""

    def inject(argo: FakeArgo, rx: Receivers) -> None:
        rx.hang[path] = 4.0
        threading.Timer(3.0, lambda: rx.hang.pop(path, None)).start()

    return inject


def _wrong_app(argo: FakeArgo, rx: Receivers) -> None:
    argo.app_answer = {"metadata": {"name": "x"}}
    threading.Timer(3.0, lambda: setattr(argo, "app_answer", None)).start()


FAULTS = [
    Fault("none", lambda argo, rx: None),
    Fault("argocd 503 for 3 s", lambda argo, rx: argo.fail_for(503, 3.0)),
    Fault("argocd 403 for 3 s", lambda argo, rx: argo.fail_for(403, 3.0)),
    Fault("argocd wrong app for 3 s", _wrong_app),
    Fault("slack 500 x3", lambda argo, rx: rx.script("/slack", *[(500, "internal_error")] * 3), "/slack"),
    Fault(
        "slack 429 Retry-After 100000",
        lambda argo, rx: rx.script("/slack", (429, "rate_limited", {"Retry-After": "100000"})),
        "/slack",
    ),
    Fault("slack answers after 4 s (read timeout 2 s), for 3 s", _hang("/slack"), "/slack"),
    Fault("feishu resets x2", lambda argo, rx: rx.resets.update({"/feishu": 2}), "/feishu"),
    Fault("pagerduty answers after 4 s (read timeout 2 s), for 3 s", _hang("/pagerduty"), "/pagerduty"),
]


def test_fault_table(tmp_path: Path, argo: FakeArgo, rx: Receivers, outbox_url: str) -> None:
    env = service_env(
        tmp_path,
        argo,
        rx.channels(feishu_secret="x", routing_key=PD_KEY),
        DRIFTGUARD_ARGOCD_RETRIES="0",
        DRIFTGUARD_ARGOCD_TIMEOUT="1",
        DRIFTGUARD_NOTIFIER_LEASE="5",  # sends time out after 2 s
        DRIFTGUARD_NOTIFIER_MAX_RETRY_AFTER="3",
        DRIFTGUARD_NOTIFIER_DATABASE_URL=outbox_url,
    )
    port = free_port()
    proc = start_gunicorn("notifier.app:create_app()", port, env, tmp_path / "gunicorn.log")
    rows = []
    try:
        for n, fault in enumerate(FAULTS):
            apps = [f"f{n}-app{i}" for i in range(APPS)]
            for name in apps:
                serve_drill(argo, name=name)
            fault.inject(argo, rx)
            posted: dict[str, float] = {}
            for name in apps:
                posted[name] = time.time()
                body = {
                    "trigger": "on-drift-detected",
                    "app": {"metadata": {"name": name, "namespace": "argocd"}},
                }
                resp = requests.post(
                    f"http://127.0.0.1:{port}/v1/notifications",
                    data=json.dumps(body),
                    headers={"Authorization": f"Bearer {TOKEN}"},
                    timeout=5,
                )
                assert resp.status_code == 202, resp.text

            def delivered_and_idle(apps: list[str] = apps) -> bool:
                got = {p: {a for a in apps for c in rx.on(p) if _about(c.body.decode(), a)} for p in PATHS}
                return all(len(v) == APPS for v in got.values()) and outbox_idle(
                    f"http://127.0.0.1:{port}", TOKEN
                )

            # once nothing is pending, nothing more is sent: the counts below are final (duplicates too)
            wait_until(delivered_and_idle, f"{fault.name}: every message delivered", interval=0.2)
            delivered, duplicated, latency = {}, {}, {}
            for p in PATHS:
                per_app = {a: [c for c in rx.on(p) if _about(c.body.decode(), a)] for a in apps}
                delivered[p] = sum(1 for v in per_app.values() if v)
                duplicated[p] = sum(len(v) - 1 for v in per_app.values() if v)
                latency[p] = max(
                    (min(c.at for c in v) - posted[a] for a, v in per_app.items() if v), default=float("nan")
                )
            healthy = [p for p in PATHS if p != fault.channel]
            rows.append(
                (
                    fault.name,
                    APPS,
                    "/".join(str(delivered[p]) for p in PATHS),
                    "/".join(str(duplicated[p]) for p in PATHS),
                    max(latency[p] for p in healthy),
                    latency[fault.channel] if fault.channel else float("nan"),
                )
            )
            assert all(delivered[p] == APPS for p in PATHS), (fault.name, delivered)
            for p in ("/feishu", "/slack"):
                assert duplicated[p] == 0, (fault.name, p, duplicated)
            if fault.channel == "/pagerduty":  # resent after its read timeout: the same incident
                keys = {
                    c.json()["dedup_key"]
                    for c in rx.on("/pagerduty")
                    if any(_about(c.body.decode(), a) for a in apps)
                }
                assert len(keys) == APPS
            else:
                assert duplicated["/pagerduty"] == 0, (fault.name, duplicated)
            if fault.name.startswith("slack answers after"):
                # every other channel's message was in before the hanging receiver gave its first answer
                first_answer = min(t for p, t in rx.answered if p == "/slack" and t >= min(posted.values()))
                others = [
                    c.at for p in healthy for c in rx.on(p) if any(_about(c.body.decode(), a) for a in apps)
                ]
                assert max(others) < first_answer
    finally:
        stop(proc)
    log = (tmp_path / "gunicorn.log").read_text()
    assert "Traceback" not in log
    header = (
        "fault",
        "notifications",
        "delivered feishu/slack/pd",
        "duplicated feishu/slack/pd",
        "max latency other channels s",
        "max latency faulty channel s",
    )
    lines = [" | ".join(header), " | ".join("---" for _ in header)]
    lines += [f"{r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]:.2f} | {r[5]:.2f}" for r in rows]
    print("\n" + "\n".join(lines))
    (tmp_path / "fault_table.md").write_text("\n".join(lines) + "\n")


def _about(body: str, app: str) -> bool:
    """A message about this app (names are never prefixes of each other here)."""
    return re.search(rf"(?<![\w-]){re.escape(app)}(?![\w-])", body) is not None
