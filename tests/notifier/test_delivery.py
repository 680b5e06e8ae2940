"""Delivery that loses nothing: per-channel retries, Retry-After, dead letters, Argo CD down, restarts."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from flask import Flask

from notifier.app import create_app
from standins.argo_api import FakeArgo
from standins.receivers import Receivers
from tests.helpers import wait_until

from .conftest import TOKEN, drill_app, make_config, make_settings, notification, post


def worker(app: Flask):  # type: ignore[no-untyped-def]
    return app.extensions["driftguard"].worker


def outbox(app: Flask):  # type: ignore[no-untyped-def]
    return app.extensions["driftguard"].outbox


def test_a_receiver_that_is_down_delays_only_its_own_messages(
    app: Flask, argo: FakeArgo, rx: Receivers
) -> None:
    drill_app(argo)
    rx.script("/slack", (503, "down"), (503, "down"))
    post(app.test_client(), notification())
    worker(app).run_once(wait=True)
    assert len(rx.on("/feishu")) == 1 and len(rx.on("/pagerduty")) == 1 and rx.on("/slack") == []
    [pending] = outbox(app).messages("pending")
    # one attempt, or two when the (test-short) backoff ran out within the same pass: both were 503s
    assert (
        pending["channel"] == "slack"
        and pending["attempts"] in (1, 2)
        and "HTTP 503" in pending["last_error"]
    )
    worker(app).drain()
    assert len(rx.on("/slack")) == 1 and outbox(app).messages("pending") == []


def test_a_slow_receiver_does_not_hold_the_others(app: Flask, argo: FakeArgo, rx: Receivers) -> None:
    drill_app(argo)
    release = threading.Event()
    rx.held["/slack"] = release  # Slack takes the message and answers only when the test says so
    post(app.test_client(), notification())
    drain = threading.Thread(target=worker(app).drain, daemon=True)
    drain.start()
    try:
        wait_until(
            lambda: rx.on("/feishu") and rx.on("/pagerduty"),
            "Feishu's and PagerDuty's messages while Slack's is held",
        )
        assert not [path for path, _ in rx.answered if path == "/slack"]  # Slack is still holding it
    finally:
        release.set()
        drain.join(60)
    assert not drain.is_alive() and rx.on("/slack")


def test_retry_after_is_honoured(app: Flask, argo: FakeArgo, rx: Receivers) -> None:
    drill_app(argo)
    rx.script("/slack", (429, "rate_limited", {"Retry-After": "30"}))
    before = time.time()
    post(app.test_client(), notification())
    worker(app).run_once(wait=True)
    [pending] = outbox(app).messages("pending")
    assert pending["next_at"] - before > 25  # scheduled from the answer, which came after `before`


def test_permanent_failure_and_old_messages_are_dead_lettered(
    app: Flask, argo: FakeArgo, rx: Receivers
) -> None:
    drill_app(argo)
    rx.script("/pagerduty", (400, {"status": "invalid event"}))
    post(app.test_client(), notification())
    worker(app).drain()
    [dead] = outbox(app).messages("dead")
    assert dead["channel"] == "pagerduty" and "HTTP 400" in dead["last_error"]
    w = worker(app)
    w.dead_letter_after = 0.0  # anything still failing is now too old
    drill_app(argo, secret_changed=False)
    rx.script("/slack", (503, "down"))
    post(app.test_client(), notification())
    w.drain()
    assert {m["channel"] for m in outbox(app).messages("dead")} == {"pagerduty", "slack"}
    metrics = (
        app.test_client().get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).get_data(as_text=True)
    )
    assert 'driftguard_notifier_dead_letters_total{channel="slack"} 1' in metrics


def test_argo_cd_down_keeps_the_notification_and_retries(app: Flask, argo: FakeArgo, rx: Receivers) -> None:
    drill_app(argo)
    argo.fail_with = 503
    before = time.time()
    post(app.test_client(), notification())
    worker(app).retry_base = 60.0  # a backoff longer than the pass: exactly one attempt in it
    worker(app).run_once()
    [row] = outbox(app).query("SELECT state, attempts, last_error, next_at FROM notifications")
    assert row["state"] == "pending" and row["attempts"] == 1 and "unreachable" in row["last_error"]
    assert row["next_at"] > before + 20  # retried later, with backoff
    assert rx.captured == []
    argo.fail_with = None
    outbox(app).query("UPDATE notifications SET next_at=0")  # the backoff has passed
    worker(app).drain()
    assert len(rx.on("/feishu")) == 1


def test_a_new_process_sends_what_the_old_one_left(
    tmp_path: Path, argo: FakeArgo, rx: Receivers, outbox_url: str
) -> None:
    drill_app(argo)
    first = create_app(make_settings(tmp_path, argo.url, outbox_url), config=make_config(rx))
    assert post(first.test_client(), notification()).status_code == 202
    claimed = first.extensions["driftguard"].outbox.claim_notification()  # it took the work, then "died"
    assert claimed is not None
    second = create_app(make_settings(tmp_path, argo.url, outbox_url), config=make_config(rx))
    w = second.extensions["driftguard"].worker
    w.drain(timeout=0.5)
    assert rx.captured == []  # the lease of the dead process still holds
    # the old lease runs out (60 s by default); shorten it the way the clock would
    second.extensions["driftguard"].outbox.query("UPDATE notifications SET lease_until=0")
    w.drain()
    assert len(rx.on("/feishu")) == 1 and len(rx.on("/pagerduty")) == 1
    w.stop()


def test_open_drift_is_rechecked_and_new_drift_alerts(app: Flask, argo: FakeArgo, rx: Receivers) -> None:
    drill_app(argo, secret_changed=False)
    post(app.test_client(), notification())
    w = worker(app)
    w.drain()
    assert len(rx.on("/feishu")) == 1
    drill_app(argo)  # someone also edits the Secret; Argo CD does not fire OutOfSync again
    w.recheck_interval = 0.0
    w._last_recheck = 0.0
    w.run_once()  # due: the open incident is re-checked
    w.recheck_interval = 3600.0
    w.drain()
    assert len(rx.on("/feishu")) == 2
    assert "Secret" in rx.on("/feishu")[-1].body.decode()


def test_a_standing_drift_is_alerted_once_per_episode_however_long_it_stands(
    app: Flask, argo: FakeArgo, rx: Receivers
) -> None:
    """Issue 30: dedup was a time window, so a standing drift was re-sent at every re-check once
    the window had passed. Now: once per episode and fingerprint; after the app matched Git again
    the same drift is a new episode and alerts."""
    drill_app(argo, secret_changed=False)
    post(app.test_client(), notification())
    w = worker(app)
    w.drain()
    assert [len(rx.on(p)) for p in ("/feishu", "/slack", "/pagerduty")] == [1, 1, 1]
    # the dedup window long gone: the sent marks look a day old
    outbox(app).query("UPDATE sent SET sent_at = sent_at - 86400")
    outbox(app).sweep(dead_after=86400.0 * 2, retention=86400.0 * 7, windows=600.0)
    for _ in range(3):
        w.recheck_interval = 0.0
        w._last_recheck = 0.0
        w.run_once()
        w.recheck_interval = 3600.0
        w.drain()
    assert [len(rx.on(p)) for p in ("/feishu", "/slack", "/pagerduty")] == [1, 1, 1]
    drill_app(argo, patched=False, secret_changed=False, sync="Synced")  # self-heal put it back
    post(app.test_client(), notification(trigger="on-drift-resolved"))
    w.drain()
    drill_app(argo, secret_changed=False)  # the same kubectl patch again: a new episode
    post(app.test_client(), notification())
    w.drain()
    alerts = [r for r in rx.on("/feishu") if "resolved" not in r.body.decode().lower()]
    assert len(alerts) >= 2 and len(rx.on("/pagerduty")) == 3  # trigger, resolve, trigger


def test_metrics_and_health(app: Flask, argo: FakeArgo, rx: Receivers) -> None:
    drill_app(argo)
    client = app.test_client()
    post(client, notification())
    post(client, notification(), token="")
    worker(app).drain()
    text = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).get_data(as_text=True)
    for line in (
        'driftguard_notifier_received_total{outcome="accepted"} 1',
        'driftguard_notifier_received_total{outcome="unauthorized"} 1',
        'driftguard_notifier_expanded_total{outcome="alert"} 1',
        'driftguard_notifier_sent_total{channel="feishu",outcome="sent"} 1',
        'driftguard_notifier_delivery_seconds_count{channel="pagerduty"} 1',
        'driftguard_notifier_queue_depth{queue="messages"} 0',
        "# TYPE driftguard_notifier_delivery_seconds histogram",
    ):
        assert line in text, line
    assert 'le="+Inf"' in text
    assert client.get("/healthz").get_json() == {"status": "ok"}
    assert client.get("/readyz").get_json() == {"status": "ready"}  # a word, no channel names
    # the spec is behind the read token (issue 31); this app has none configured
    assert client.get("/openapi.json").status_code == 401


def test_retry_after_is_capped_and_never_past_the_dead_letter_window(
    app: Flask, argo: FakeArgo, rx: Receivers
) -> None:
    drill_app(argo)
    w = worker(app)
    rx.script("/slack", (429, "rate_limited", {"Retry-After": "100000"}))
    before = time.time()
    post(app.test_client(), notification())
    w.run_once(wait=True)
    after = time.time()
    [pending] = outbox(app).messages("pending")
    # DRIFTGUARD_NOTIFIER_MAX_RETRY_AFTER's default (300 s) from the answer, between before and after
    assert before + 250 < pending["next_at"] <= after + 300
    w.dead_letter_after = 60.0
    drill_app(argo, secret_changed=False)  # new drift, a new message to the same receiver
    rx.script("/feishu", (429, "rate_limited", {"Retry-After": "100000"}))
    post(app.test_client(), notification())
    w.run_once(wait=True)
    [later] = [m for m in outbox(app).messages("pending") if m["channel"] == "feishu"]
    assert later["next_at"] <= later["created_at"] + 60.0  # the last try is at the window's end
