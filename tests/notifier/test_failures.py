"""Nothing retried forever, nothing dropped silently: Argo CD refusals, wrong answers, broken templates."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from notifier.app import create_app
from standins.argo_api import FakeArgo
from standins.receivers import Receivers

from .conftest import TOKEN, drill_app, make_config, make_settings, notification, post


def _app(tmp_path: Path, argo: FakeArgo, rx: Receivers, **settings: Any) -> Flask:
    application = create_app(make_settings(tmp_path, argo.url, **settings), config=make_config(rx))
    application.extensions["driftguard"].worker.retry_base = 0.01
    return application


@pytest.fixture
def app2(tmp_path: Path, argo: FakeArgo, rx: Receivers, outbox_url: str) -> Iterator[Flask]:
    """The app with DRIFTGUARD_NOTIFIER_MAX_ATTEMPTS=2."""
    application = _app(tmp_path, argo, rx, database_url=outbox_url, max_attempts=2)
    yield application
    application.extensions["driftguard"].worker.stop()


def metrics(app: Flask) -> str:
    return str(
        app.test_client().get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).get_data(as_text=True)
    )


def texts(rx: Receivers, path: str) -> list[str]:
    return [json.dumps(c.json(), ensure_ascii=False) for c in rx.on(path)]


def test_403_is_not_not_found_it_is_retried_then_ends_in_the_fallback_alert(
    app2: Flask, argo: FakeArgo, rx: Receivers, caplog: pytest.LogCaptureFixture
) -> None:
    drill_app(argo)
    argo.fail_with = 403  # a token without `applications, get`
    post(app2.test_client(), notification())
    worker = app2.extensions["driftguard"].worker
    worker.drain(timeout=10)
    for path in ("/feishu", "/slack", "/pagerduty"):
        [sent] = texts(rx, path)
        assert "deepseek-inference" in sent and "applications, get" in sent
        assert "could not build the detailed alert" in sent or "无法生成" in sent
    assert "https://argocd.example.com/applications/argocd/deepseek-inference" in texts(rx, "/slack")[0]
    text = metrics(app2)
    assert 'driftguard_notifier_expanded_total{outcome="unauthorized"} 2.0' in text
    assert 'driftguard_notifier_expanded_total{outcome="fallback"} 1.0' in text
    assert 'driftguard_notifier_failures_total{stage="expand"} 2.0' in text
    assert 'outcome="app-not-found"' not in text
    [row] = app2.extensions["driftguard"].outbox.query("SELECT state FROM notifications")
    assert row["state"] == "dead"


def test_a_403_window_then_the_real_alert(
    tmp_path: Path, argo: FakeArgo, rx: Receivers, outbox_url: str
) -> None:
    app = _app(tmp_path, argo, rx, database_url=outbox_url)
    try:
        drill_app(argo)
        argo.fail_with = 403
        post(app.test_client(), notification())
        worker = app.extensions["driftguard"].worker
        worker.run_once(wait=True)
        assert rx.captured == []
        argo.fail_with = None  # the RBAC fix lands
        worker.drain(timeout=10)
        assert sorted(c.path for c in rx.captured) == ["/feishu", "/pagerduty", "/slack"]
        assert all("nvidia.com~1gpu" in t for t in texts(rx, "/pagerduty"))
    finally:
        app.extensions["driftguard"].worker.stop()


@pytest.mark.parametrize(
    "answer",
    [
        {"metadata": {"name": "x"}},  # no spec, another name
        {"metadata": {"name": "other-app", "namespace": "argocd"}, "spec": {}},  # another app
        {"metadata": {"name": "deepseek-inference", "namespace": "team-b"}, "spec": {}},  # another namespace
        {"spec": {}},
        ["not", "an", "object"],
    ],
    ids=["garbage", "other-name", "other-namespace", "no-metadata", "a-list"],
)
def test_a_wrong_application_answer_is_never_alerted_under_another_name(
    app2: Flask, argo: FakeArgo, rx: Receivers, answer: Any
) -> None:
    drill_app(argo)
    argo.app_answer = answer
    post(app2.test_client(), notification())
    app2.extensions["driftguard"].worker.drain(timeout=10)
    for path in ("/feishu", "/slack", "/pagerduty"):
        [captured] = rx.on(path)  # the fallback, about the app that was asked for
        sent = json.dumps(captured.json(), ensure_ascii=False)
        assert "could not build the detailed alert for deepseek-inference" in sent or (
            "无法生成 deepseek-inference 的详细告警" in sent
        )
        if path == "/pagerduty":
            assert captured.json()["dedup_key"] == "driftguard/argocd/deepseek-inference/drift"
    assert 'driftguard_notifier_failures_total{stage="expand"} 2.0' in metrics(app2)


def test_a_template_that_breaks_at_run_time_is_retried_counted_and_ends_in_the_fallback(
    tmp_path: Path, argo: FakeArgo, rx: Receivers, caplog: pytest.LogCaptureFixture, outbox_url: str
) -> None:
    stock = (Path(__file__).parents[2] / "notifier" / "templates" / "slack.en.j2").read_text()
    overrides = tmp_path / "templates"
    overrides.mkdir()
    # passes the start-up matrix (its apps are `sample-app`), breaks on a real one
    broken = stock.replace(
        "{% macro title(d) %}",
        '{% macro title(d) %}{% if d.app.name != "sample-app" %}{{ d.no_such }}{% endif %}',
    )
    (overrides / "slack.en.j2").write_text(broken)
    app = _app(tmp_path, argo, rx, database_url=outbox_url, max_attempts=3, templates_dir=str(overrides))
    try:
        drill_app(argo)
        post(app.test_client(), notification())
        with caplog.at_level(logging.WARNING, logger="driftguard.notifier"):
            app.extensions["driftguard"].worker.drain(timeout=10)
        failed = [r for r in caplog.records if r.getMessage() == "render_failed"]
        assert len(failed) == 3  # logged once per attempt, with the app and the reason
        assert all(r.__dict__["fields"]["app"] == "argocd/deepseek-inference" for r in failed)
        assert all("no_such" in r.__dict__["fields"]["reason"] for r in failed)
        assert len(rx.on("/feishu")) == len(rx.on("/slack")) == len(rx.on("/pagerduty")) == 1
        assert "could not build the detailed alert" in texts(rx, "/slack")[0]
        assert 'driftguard_notifier_failures_total{stage="render"} 3.0' in metrics(app)
    finally:
        app.extensions["driftguard"].worker.stop()


def test_send_failures_are_counted(app: Flask, argo: FakeArgo, rx: Receivers) -> None:
    drill_app(argo)
    rx.script("/slack", (503, "down"), (500, "down"))
    post(app.test_client(), notification())
    app.extensions["driftguard"].worker.drain(timeout=10)
    text = metrics(app)
    assert 'driftguard_notifier_failures_total{stage="send"} 2.0' in text
    assert 'driftguard_notifier_sent_total{channel="slack",outcome="retry"} 2.0' in text
    assert len(rx.on("/slack")) == 1


def test_404_is_the_only_not_found(app: Flask, argo: FakeArgo, rx: Receivers) -> None:
    post(app.test_client(), notification("no-such-app"))
    app.extensions["driftguard"].worker.drain(timeout=10)
    assert rx.captured == []
    assert 'driftguard_notifier_expanded_total{outcome="app-not-found"} 1.0' in metrics(app)
