"""The admission listener as the manifests run it: the CLI's gunicorn over TLS, the API server's only way in."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import requests
import trustme

from standins.apiserver import admission_review
from standins.argo_api import FakeArgo
from standins.drill import inference_live
from standins.processes import free_port, start_cli, stop
from tests.helpers import wait_until

from .conftest import service_env

CLI = str(Path(sys.executable).parent / "driftguard-notifier")


def test_admission_over_tls_allows_and_records_plain_http_is_refused(tmp_path: Path, argo: FakeArgo) -> None:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "driftguard-notifier.argocd.svc")
    cert.private_key_pem.write_to_path(str(tmp_path / "tls.key"))
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "tls.crt"))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.crt"))
    env = service_env(
        tmp_path,
        argo,
        {"slack": {"type": "slack", "url": "https://hooks.example.com/x"}},
        DRIFTGUARD_NOTIFIER_ADMISSION_AUTH="none",
        DRIFTGUARD_NOTIFIER_WORKER="false",
        DRIFTGUARD_NOTIFIER_TLS_CERT=str(tmp_path / "tls.crt"),
        DRIFTGUARD_NOTIFIER_TLS_KEY=str(tmp_path / "tls.key"),
    )
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    proc = start_cli(
        "driftguard-notifier", port, env, tmp_path / "gunicorn.log", workers=1, ca=str(tmp_path / "ca.crt")
    )
    try:
        review = admission_review(inference_live())
        resp = requests.post(f"{url}/v1/admission", json=review, verify=str(tmp_path / "ca.crt"), timeout=5)
        assert resp.status_code == 200
        assert resp.json()["response"] == {"uid": review["request"]["uid"], "allowed": True}
        with pytest.raises(requests.ConnectionError):
            requests.post(f"http://127.0.0.1:{port}/v1/admission", data=json.dumps(review), timeout=5)

        def recorded() -> list[tuple[str, ...]]:
            with sqlite3.connect(tmp_path / "outbox.sqlite3") as db:
                return db.execute("SELECT user, field_manager, uid, source FROM identity_events").fetchall()

        rows = wait_until(recorded, "the record (written off the request path)")
    finally:
        stop(proc)
    assert rows == [
        ("alice@example.com", "kubectl-patch", "8a1f0c8e-1111-4d7e-9e55-0a0b0c0d0e0f", "admission")
    ]


def test_a_certificate_without_its_key_stops_start_up(tmp_path: Path, argo: FakeArgo) -> None:
    env = service_env(tmp_path, argo, {"slack": {"type": "slack", "url": "https://hooks.example.com/x"}})
    proc = subprocess.run(
        [CLI, "--certfile", str(tmp_path / "tls.crt")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2 and "--keyfile" in proc.stderr
