"""``create_app(parts=...)``: the admission listener serves only ``/v1/admission`` and holds only its secrets.

The control in each test is the whole notifier on the same environment: it reads the channels'
config (and the secrets its ``${VAR}`` name) and Argo CD's token, so what the admission app does
not read is shown by what the whole app fails on.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
import requests
import trustme
from flask import Flask

from driftguard.errors import ConfigError
from notifier.app import create_app
from notifier.settings import PARTS, NotifierSettings
from standins.apiserver import admission_review
from standins.drill import inference_live
from standins.processes import free_port, start_cli, stop, wait_until

from .conftest import AUDIT_TOKEN

CLI = str(Path(sys.executable).parent / "driftguard-notifier")
REDACT_KEY = "redact-key-for-tests-0123456789abcdef"
CHANNEL_SECRETS = ("FEISHU_WEBHOOK", "FEISHU_SECRET", "PD_ROUTING_KEY")
OTHER_ROUTES = ("/v1/notifications", "/v1/audit", "/v1/incidents", "/incidents", "/v1/identities/match")


class Recording(Mapping[str, str]):
    """An environment that remembers every name asked for."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values = values
        self.asked: set[str] = set()

    def __getitem__(self, key: str) -> str:
        self.asked.add(key)
        return self.values[key]

    def __iter__(self) -> Iterator[str]:
        raise AssertionError("the settings must ask for names, not list the environment")

    def __len__(self) -> int:
        return len(self.values)

    def __contains__(self, key: object) -> bool:
        self.asked.add(str(key))
        return key in self.values

    def get(self, key: str, default: str | None = None) -> str | None:  # type: ignore[override]
        self.asked.add(key)
        return self.values.get(key, default)


def admission_env(tmp_path: Path) -> dict[str, str]:
    """The admission container's environment, plus what the whole notifier's Secret holds."""
    config = tmp_path / "notifier.yaml"
    config.write_text(
        json.dumps(
            {
                "channels": {
                    "feishu": {"type": "feishu", "url": "${FEISHU_WEBHOOK}", "secret": "${FEISHU_SECRET}"},
                    "oncall": {"type": "pagerduty", "routing_key": "${PD_ROUTING_KEY}"},
                }
            }
        )
    )
    return {
        "DRIFTGUARD_NOTIFIER_AUDIT_TOKEN": AUDIT_TOKEN,
        "DRIFTGUARD_REDACT_KEY": REDACT_KEY,
        "DRIFTGUARD_NOTIFIER_OUTBOX": str(tmp_path / "outbox.sqlite3"),
        "DRIFTGUARD_NOTIFIER_WORKER": "false",
        "DRIFTGUARD_NOTIFIER_CONFIG": str(config),
        "DRIFTGUARD_ARGOCD_URL": "https://argocd.example.com",
        "DRIFTGUARD_ARGOCD_TOKEN_FILE": str(tmp_path / "no-such-token"),
    }


@pytest.fixture
def admission_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Flask]:
    for name in CHANNEL_SECRETS:
        monkeypatch.delenv(name, raising=False)
    settings = NotifierSettings.from_env(admission_env(tmp_path), parts=("admission",))
    app = create_app(settings, parts=("admission",))
    yield app
    app.extensions["driftguard"].outbox.close()


def test_the_admission_app_registers_admission_and_the_probes_only(admission_app: Flask) -> None:
    rules = {r.rule for r in admission_app.url_map.iter_rules() if not r.rule.startswith("/static")}
    assert rules == {"/v1/admission", "/healthz", "/readyz", "/metrics", "/openapi.json"}
    state = admission_app.extensions["driftguard"]
    assert (state.channels, state.config, state.worker) == ({}, None, None)
    client = admission_app.test_client()
    for route in OTHER_ROUTES:
        assert client.post(route, json={}).status_code in (404, 405), route
        assert client.get(route).status_code in (404, 405), route


def test_the_admission_app_records_a_review(admission_app: Flask) -> None:
    review = admission_review(inference_live())
    resp = admission_app.test_client().post(
        "/v1/admission", json=review, headers={"Authorization": f"Bearer {AUDIT_TOKEN}"}
    )
    assert resp.status_code == 200 and resp.get_json()["response"]["allowed"] is True
    state = admission_app.extensions["driftguard"]
    state.recorder.flush()
    assert state.identities.count() == 1


def test_the_admission_settings_read_no_channel_secret_nor_argocd_token(tmp_path: Path) -> None:
    env = Recording(admission_env(tmp_path))
    settings = NotifierSettings.from_env(env, parts=("admission",))
    assert settings.argocd is None and settings.token == ""
    assert not {n for n in env.asked if n.startswith("DRIFTGUARD_ARGOCD_TOKEN")}
    assert not env.asked & set(CHANNEL_SECRETS)
    # the control: the whole notifier reads Argo CD's token file (and fails, it does not exist)
    with pytest.raises(ConfigError, match="DRIFTGUARD_ARGOCD_TOKEN_FILE"):
        NotifierSettings.from_env(Recording(admission_env(tmp_path)))


def test_the_whole_app_on_the_same_environment_reads_the_channel_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control for the fixture: the config is there, and the whole app stops on its unset secret."""
    for name in CHANNEL_SECRETS:
        monkeypatch.delenv(name, raising=False)
    env = admission_env(tmp_path)
    env["DRIFTGUARD_NOTIFIER_TOKEN"] = "notifier-test-token-0123456789"
    env["DRIFTGUARD_ARGOCD_TOKEN"] = "argocd-token-0123456789"
    del env["DRIFTGUARD_ARGOCD_TOKEN_FILE"]
    settings = NotifierSettings.from_env(env)
    assert settings.parts == PARTS
    with pytest.raises(ConfigError, match="FEISHU_WEBHOOK"):
        create_app(settings)


def test_an_unknown_part_stops_start_up(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--part"):
        NotifierSettings.from_env(admission_env(tmp_path), parts=("channels",))
    proc = subprocess.run(
        [CLI, "--part", "channels", "--check-config"], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 2 and "--part" in proc.stderr


def test_the_cli_checks_the_admission_part_without_the_webhook_token_config_or_argocd(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", **admission_env(tmp_path)}
    ok = subprocess.run(
        [CLI, "--part", "admission", "--check-config"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (ok.returncode, ok.stdout.strip()) == (0, "driftguard-notifier: config ok: parts admission"), (
        ok.stderr
    )
    whole = subprocess.run(
        [CLI, "--check-config"], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert whole.returncode == 2 and "DRIFTGUARD_ARGOCD_TOKEN_FILE" in whole.stderr  # the whole one reads it


@pytest.mark.slow  # gunicorn over TLS; the parts themselves are tested in-process above
def test_the_admission_listener_under_gunicorn_over_tls(tmp_path: Path) -> None:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    cert.private_key_pem.write_to_path(str(tmp_path / "tls.key"))
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "tls.crt"))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.crt"))
    env = {
        "PATH": "/usr/bin:/bin",
        **admission_env(tmp_path),
        "DRIFTGUARD_NOTIFIER_TLS_CERT": str(tmp_path / "tls.crt"),
        "DRIFTGUARD_NOTIFIER_TLS_KEY": str(tmp_path / "tls.key"),
    }
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    verify = str(tmp_path / "ca.crt")
    proc = start_cli(
        "driftguard-notifier",
        port,
        env,
        tmp_path / "gunicorn.log",
        workers=1,
        ca=verify,
        args=("--part", "admission"),
    )
    try:
        review = admission_review(inference_live())
        auth = {"Authorization": f"Bearer {AUDIT_TOKEN}"}
        resp = requests.post(f"{url}/v1/admission", json=review, headers=auth, verify=verify, timeout=5)
        assert resp.status_code == 200 and resp.json()["response"]["allowed"] is True
        assert requests.post(f"{url}/v1/notifications", json={}, verify=verify, timeout=5).status_code == 404
        assert (
            requests.post(f"{url}/v1/audit", json={}, headers=auth, verify=verify, timeout=5).status_code
            == 404
        )

        def recorded() -> list[tuple[str, ...]]:  # the record is written off the request path
            with sqlite3.connect(tmp_path / "outbox.sqlite3") as db:
                return db.execute("SELECT user, source FROM identity_events").fetchall()

        rows = wait_until(recorded, "the admission record")
    finally:
        stop(proc)
    assert rows == [("alice@example.com", "admission")]
