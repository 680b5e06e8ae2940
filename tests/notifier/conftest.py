"""Notifier fixtures: Argo CD and the three receivers as local servers, an app on a temp outbox."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from driftguard.argocd import ArgoCDSettings
from notifier.app import create_app
from notifier.config import NotifierConfig, parse_config
from notifier.settings import NotifierSettings
from standins import argo_api, receivers
from standins.drill import serve_drill
from standins.postgres import PgServer

TOKEN = "notifier-test-token-0123456789"
PD_KEY = "0123456789abcdef0123456789abcdef"
AUDIT_TOKEN = "audit-token-0123456789abcdef"
READ_TOKEN = "read-token-0123456789abcdef"


@pytest.fixture(scope="session")
def pg() -> Iterator[PgServer]:
    """One real PostgreSQL for the session (each test gets its own database)."""
    server = PgServer(fsync=False)  # a test never crashes the server itself; a restart is a clean stop
    server.start()
    yield server
    server.close()


# the PostgreSQL half of the matrix is slow (a database per test): `make test-all`; the fast lane keeps
# the PostgreSQL-only tests (test_outbox_shared.py, test_outbox_claims.py...) for that store
@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.slow)])
def outbox_url(request: pytest.FixtureRequest) -> str:
    """The store under test: "" for the embedded SQLite file, else a fresh PostgreSQL database's URL."""
    if request.param == "sqlite":
        return ""
    server: PgServer = request.getfixturevalue("pg")
    return server.new_database()


@pytest.fixture
def argo() -> Iterator[argo_api.FakeArgo]:
    with argo_api.serve() as fake:
        yield fake


@pytest.fixture
def rx() -> Iterator[receivers.Receivers]:
    with receivers.serve() as r:
        yield r


def drill_app(
    fake: argo_api.FakeArgo, *, patched: bool = True, secret_changed: bool = True, sync: str = "OutOfSync"
) -> None:
    """The reference drill: GPU 2 -> 4 by kubectl-patch, replicas by the HPA, defaults, a Secret edited."""
    serve_drill(fake, patched=patched, secret_changed=secret_changed, sync=sync)


def make_config(rx: receivers.Receivers, **extra: Any) -> NotifierConfig:
    raw = {
        "locale": "zh-CN",
        "argocdUrl": "https://argocd.example.com",
        "channels": rx.channels(feishu_secret="feishu-signing-secret", routing_key=PD_KEY, slack_locale="en"),
        **extra,
    }
    return parse_config(raw)


def make_settings(tmp_path: Path, argo_url: str, database_url: str = "", **extra: Any) -> NotifierSettings:
    argocd = ArgoCDSettings(url=argo_url, token=argo_api.FakeArgo().token, timeout=2.0, retries=0)
    return NotifierSettings(
        token=TOKEN,
        redact_key=b"redact-key-for-tests-0123456789abcdef",
        outbox=tmp_path / "outbox.sqlite3",
        database_url=database_url,
        worker=False,
        argocd=argocd,
        **extra,
    )


@pytest.fixture
def app(tmp_path: Path, argo: argo_api.FakeArgo, rx: receivers.Receivers, outbox_url: str) -> Iterator[Flask]:
    application = create_app(make_settings(tmp_path, argo.url, outbox_url), config=make_config(rx))
    application.extensions["driftguard"].worker.retry_base = 0.01
    yield application
    state = application.extensions["driftguard"]
    state.worker.stop()
    state.worker.expander.close()
    state.outbox.close()


def post(
    client: Any, body: Any, *, token: str = TOKEN, raw: bytes | None = None, content_type: str | None = None
) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if content_type:
        headers["Content-Type"] = content_type
    import json

    return client.post(
        "/v1/notifications", data=raw if raw is not None else json.dumps(body), headers=headers
    )


def notification(
    name: str = "deepseek-inference", trigger: str = "on-drift-detected", **app: Any
) -> dict[str, Any]:
    return {"trigger": trigger, "app": {"metadata": {"name": name, "namespace": "argocd"}, **app}}


def service_env(
    tmp_path: Path, argo: argo_api.FakeArgo, channels: dict[str, Any], **extra: str
) -> dict[str, str]:
    """The environment the notifier's Deployment gives it (config written to tmp_path); empty values are dropped."""
    import json
    import os

    config = tmp_path / "notifier.yaml"
    config.write_text(json.dumps({"channels": channels}))
    env = {
        "PATH": os.environ["PATH"],
        "DRIFTGUARD_NOTIFIER_TOKEN": TOKEN,
        "DRIFTGUARD_REDACT_KEY": "redact-key-for-tests-0123456789abcdef",
        "DRIFTGUARD_NOTIFIER_CONFIG": str(config),
        "DRIFTGUARD_NOTIFIER_OUTBOX": str(tmp_path / "outbox.sqlite3"),
        "DRIFTGUARD_ARGOCD_URL": argo.url,
        "DRIFTGUARD_ARGOCD_TOKEN": argo.token,
        **extra,
    }
    return {k: v for k, v in env.items() if v}


@pytest.fixture
def idapp(
    tmp_path: Path, argo: argo_api.FakeArgo, rx: receivers.Receivers, outbox_url: str
) -> Iterator[Flask]:
    """The notifier with the identity webhooks and the journal on, on each store (``outbox_url``)."""
    settings = make_settings(tmp_path, argo.url, outbox_url, audit_token=AUDIT_TOKEN, read_token=READ_TOKEN)
    application = create_app(settings, config=make_config(rx))
    yield application
    state = application.extensions["driftguard"]
    state.worker.stop()
    state.worker.expander.close()
    state.outbox.close()
