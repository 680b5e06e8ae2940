"""/incidents in a real browser: Debian's chromium headless, driven by chromedriver's W3C WebDriver API.

The drill runs in-process on a temp outbox, SQLite or PostgreSQL (audit Event, kubectl patch,
alerts, self-heal); then the CLI's gunicorn serves that outbox and chromium opens the page, signs in with the read token through
the page's own form, and finds the episode, its person and its timeline. Nothing downloads a
browser: ``make setup`` installs ``chromium`` and ``chromium-driver`` from Debian when run as root.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from flask import Flask

from standins import argo_api, receivers
from standins.apiserver import audit_event, event_list
from standins.drill import serve_drill
from standins.processes import free_port, start_cli, stop
from tests.helpers import wait_until

from .conftest import READ_TOKEN, notification, service_env
from .test_identity import audit_post, deliver, retime_patch

pytestmark = pytest.mark.slow  # a real browser

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
ROOT = Path(__file__).resolve().parents[2]


def _need_browser() -> None:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).is_file()]
    if missing:
        pytest.fail(
            f"the browser test needs Debian's chromium and chromium-driver ({', '.join(missing)} not found): "
            "run `make setup` as root, or `apt-get install chromium chromium-driver`"
        )


class Browser:
    """The few WebDriver commands the test needs, over chromedriver's HTTP API."""

    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"
        self.http = requests.Session()
        self.http.trust_env = False
        caps = {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"],
            },
        }
        answer = self._call("POST", "/session", {"capabilities": {"alwaysMatch": caps}})
        self.sid = answer["sessionId"]

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        resp = self.http.request(method, self.base + path, json=body, timeout=60)
        value = resp.json()["value"]
        assert resp.status_code == 200, value
        return value

    def cmd(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        return self._call(method, f"/session/{self.sid}{path}", body)

    def go(self, url: str) -> None:
        self.cmd("POST", "/url", {"url": url})

    def js(self, script: str) -> Any:
        return self.cmd("POST", "/execute/sync", {"script": script, "args": []})

    def screenshot(self, path: Path) -> None:
        path.write_bytes(base64.b64decode(self.cmd("GET", "/screenshot")))

    def quit(self) -> None:
        self.cmd("DELETE", "")


@pytest.fixture
def browser() -> Iterator[Browser]:
    _need_browser()
    port = free_port()
    proc = subprocess.Popen(
        [CHROMEDRIVER, f"--port={port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:

        def answers() -> bool:
            try:
                requests.get(f"http://127.0.0.1:{port}/status", timeout=2)
            except (requests.ConnectionError, requests.Timeout):  # still starting on a loaded machine
                return False
            return True

        wait_until(answers, "chromedriver to answer", interval=0.1)
        b = Browser(port)
        yield b
        b.quit()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)


def drill_journal(idapp: Flask, argo: argo_api.FakeArgo) -> None:
    """The drill's episode: patched 2 s ago by alice (audit), alerted on three channels, healed by self-heal."""
    serve_drill(argo)
    at = int(time.time()) - 2
    retime_patch(argo, at)
    assert audit_post(idapp.test_client(), event_list(audit_event(at=at + 0.3))).status_code == 200
    deliver(idapp, notification())
    serve_drill(argo, patched=False, secret_changed=False, sync="Synced")
    argo.apps[("argocd", "deepseek-inference")]["status"]["operationState"]["operation"] = {
        "initiatedBy": {"automated": True}
    }
    deliver(idapp, notification(trigger="on-sync-succeeded"))


def test_the_page_shows_the_drills_episode_its_person_and_its_timeline(
    idapp: Flask, argo: argo_api.FakeArgo, rx: receivers.Receivers, browser: Browser, tmp_path: Path
) -> None:
    drill_journal(idapp, argo)
    env = service_env(
        tmp_path,
        argo,
        {"slack": {"type": "slack", "url": "https://hooks.example.com/x"}},
        DRIFTGUARD_NOTIFIER_WORKER="false",
        DRIFTGUARD_NOTIFIER_READ_TOKEN=READ_TOKEN,
        DRIFTGUARD_NOTIFIER_DATABASE_URL=idapp.extensions["driftguard"].settings.database_url,  # "" on SQLite
    )
    port = free_port()
    server = start_cli("driftguard-notifier", port, env, tmp_path / "gunicorn.log", workers=1)
    url = f"http://127.0.0.1:{port}"
    try:
        browser.go(f"{url}/incidents")
        assert browser.js("return document.querySelectorAll('tr.episode').length") == 0  # not signed in
        browser.js(
            f"document.querySelector('input[name=token]').value = {json.dumps(READ_TOKEN)};"
            "document.querySelector('form').submit();"
        )
        wait_until(
            lambda: browser.js("return document.querySelectorAll('tr.episode').length") == 1,
            "the signed-in page's one episode",
            interval=0.1,
        )
        row = browser.js(
            "const r = document.querySelector('tr.episode');"
            "const bar = r.querySelector('.timeline');"
            "const w = s => r.querySelector(s).getBoundingClientRect().width;"
            "return {text: r.innerText, who: r.querySelector('.who').innerText, bar: w('.timeline'),"
            " alert: w('.to-alert'), heal: w('.to-heal'), toAlert: bar.dataset.toAlertMs, toHeal: bar.dataset.toHealMs,"
            " people: document.querySelector('#top-people').innerText,"
            " external: [...document.querySelectorAll('link,script,img')].length}"
        )
        assert row["who"].startswith("alice@example.com via kubectl-patch, "), row
        assert "argocd/deepseek-inference" in row["text"] and "nvidia.com~1gpu" in row["text"]
        assert "self-heal" in row["text"] and "rotated-PLANTED-secret" not in row["text"]
        # the bar is drawn: changed -> alerted and alerted -> healed segments fill it, in proportion
        assert row["bar"] > 200 and row["alert"] > 0 and row["heal"] > 0, (
            row["toAlert"],
            row["toHeal"],
            row["text"][-300:],
        )
        assert abs(row["alert"] + row["heal"] - row["bar"]) < 2
        assert abs(row["alert"] / row["bar"] - int(row["toAlert"]) / int(row["toHeal"])) < 0.02
        assert "alice@example.com: 1" in row["people"] and row["external"] == 0
        shot = tmp_path / "incidents.png"
        browser.screenshot(shot)
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        if os.environ.get("DRIFTGUARD_SCREENSHOT_DIR"):  # refresh docs/incidents-page.png
            shutil.copy(shot, Path(os.environ["DRIFTGUARD_SCREENSHOT_DIR"]) / "incidents-page.png")

        browser.go(f"{url}/incidents?who=nobody@example.com")
        assert "No drift episode matches" in browser.js("return document.body.innerText")
        browser.go(f"{url}/incidents?app=deepseek-inference&who=alice@example.com")
        assert browser.js("return document.querySelectorAll('tr.episode').length") == 1
    finally:
        stop(server)
