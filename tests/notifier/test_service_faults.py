"""The real service under gunicorn: honest JSON errors, an outbox that cannot be written, new drift during an episode."""

from __future__ import annotations

import json
import resource
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from standins.argo_api import FakeArgo
from standins.drill import serve_drill
from standins.processes import free_port, start_gunicorn, stop
from standins.receivers import Receivers

from .conftest import PD_KEY, TOKEN, notification, service_env


@pytest.fixture
def service(tmp_path: Path, argo: FakeArgo, rx: Receivers) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    env = service_env(
        tmp_path,
        argo,
        rx.channels(feishu_secret="x", routing_key=PD_KEY),
        DRIFTGUARD_ARGOCD_RETRIES="0",
        DRIFTGUARD_NOTIFIER_RECHECK_INTERVAL="1",
        DRIFTGUARD_NOTIFIER_MAX_BODY_BYTES=str(4 * 1024 * 1024),
    )
    port = free_port()
    proc = start_gunicorn("notifier.app:create_app()", port, env, tmp_path / "gunicorn.log")
    try:
        yield f"http://127.0.0.1:{port}", proc
    finally:
        stop(proc)
    assert "Traceback" not in (tmp_path / "gunicorn.log").read_text()


def _post(url: str, data: bytes | str, token: str = TOKEN) -> requests.Response:
    return requests.post(
        f"{url}/v1/notifications", data=data, headers={"Authorization": f"Bearer {token}"}, timeout=10
    )


def _wait(cond: object, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return False


def test_every_error_is_json_and_deep_json_is_a_400(service: tuple[str, subprocess.Popen[bytes]]) -> None:
    url, _ = service
    deep = "[" * 100_000 + "]" * 100_000
    answers = {
        "deep": _post(url, deep),
        "deep-object": _post(url, '{"a":' * 50_000 + "1" + "}" * 50_000),
        "malformed": _post(url, '{"app": '),
        "not-utf8": _post(url, b"\xff\xfe{"),
        "wrong-token": _post(url, json.dumps(notification()), token="nope"),
        "too-large": _post(url, b" " * (5 * 1024 * 1024)),
        "get": requests.get(f"{url}/v1/notifications", timeout=5),
        "unknown": requests.get(f"{url}/nowhere", timeout=5),
    }
    expected = {"deep": 400, "deep-object": 400, "malformed": 400, "not-utf8": 400, "wrong-token": 401}
    expected |= {"too-large": 413, "get": 405, "unknown": 404}
    for name, resp in answers.items():
        assert resp.status_code == expected[name], (name, resp.status_code, resp.text[:200])
        assert resp.headers["Content-Type"].startswith("application/json"), name
        assert set(resp.json()) == {"error"} and "Traceback" not in resp.text, name


def _workers(master: int) -> list[int]:
    return [int(p) for p in Path(f"/proc/{master}/task/{master}/children").read_text().split()]


def test_an_outbox_that_cannot_be_written_answers_503_and_turns_not_ready_until_a_write_succeeds(
    service: tuple[str, subprocess.Popen[bytes]], argo: FakeArgo, rx: Receivers
) -> None:
    url, proc = service
    serve_drill(argo)
    workers = _workers(proc.pid)
    hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
    for pid in workers:  # a full disk, as the kernel tells a writer past its file-size limit (EFBIG)
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (1, hard))
    try:
        for _ in range(4):  # both workers answer some of these
            resp = _post(url, json.dumps(notification()))
            assert resp.status_code == 503, resp.text
            assert "outbox cannot be written" in resp.json()["error"]
            ready = requests.get(f"{url}/readyz", timeout=5)
            assert ready.status_code == 503 and ready.json()["status"] == "not ready"
    finally:
        for pid in workers:
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (hard, hard))
    assert _wait(lambda: all(requests.get(f"{url}/readyz", timeout=5).status_code == 200 for _ in range(4)))
    assert rx.captured == []  # nothing was accepted, so nothing is owed
    assert _post(url, json.dumps(notification())).status_code == 202
    assert _wait(lambda: sorted(c.path for c in rx.captured) == ["/feishu", "/pagerduty", "/slack"])


def test_new_drift_while_the_app_stays_out_of_sync_alerts(
    service: tuple[str, subprocess.Popen[bytes]], argo: FakeArgo, rx: Receivers
) -> None:
    """HPA replicas only (nothing alerts), then a kubectl patch of the GPU limit: Argo CD does not fire again."""
    url, _ = service
    serve_drill(argo, patched=False, secret_changed=False, sync="OutOfSync")
    assert _post(url, json.dumps(notification())).status_code == 202
    assert _wait(lambda: any(r[0].endswith("/managed-resources") for r in argo.requests))
    time.sleep(1.5)
    assert rx.captured == []  # the HPA's write is not drift to alert
    serve_drill(argo, patched=True, secret_changed=False, sync="OutOfSync")  # still OutOfSync: no webhook
    assert _wait(lambda: len(rx.captured) == 3)
    for path in ("/feishu", "/slack", "/pagerduty"):
        [msg] = rx.on(path)
        assert "nvidia.com" in msg.body.decode()
    time.sleep(2.5)  # more re-checks of the same drift: the dedup window holds
    assert len(rx.captured) == 3
