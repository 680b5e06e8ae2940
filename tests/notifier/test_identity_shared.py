"""The identity store and the drift journal as several replicas share them (issues 20 and 21).

Two notifier apps on one store stand for two replicas: an audit batch received by one is joined
into the alert the other sends, and an episode one opens the other heals, once. Each runs on
both stores; the races (two replicas opening or alerting one episode at once, the prune's
singleton lock) run on PostgreSQL, the store several replicas share.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from flask import Flask

from driftguard.identity import IdentityEvent
from driftguard.report import DriftReport
from notifier.app import create_app
from notifier.identity import OutboxIdentityStore
from notifier.journal import OutboxJournal
from notifier.outbox import SCHEMA_VERSION, SqliteOutbox
from notifier.outbox.base import MIGRATIONS
from notifier.outbox.postgres import PostgresOutbox, _key
from standins import argo_api, receivers
from standins.apiserver import admission_review, audit_event, event_list
from standins.drill import inference_live, serve_drill
from standins.postgres import PgServer

from .conftest import AUDIT_TOKEN, READ_TOKEN, make_config, make_settings, notification, post
from .test_identity import alerts_name, audit_post, retime_patch


@pytest.fixture
def two(
    tmp_path: Path, argo: argo_api.FakeArgo, rx: receivers.Receivers, outbox_url: str
) -> Iterator[tuple[Flask, Flask]]:
    """Two replicas on one store (the same SQLite file, or the same PostgreSQL database)."""
    apps = [
        create_app(
            make_settings(tmp_path, argo.url, outbox_url, audit_token=AUDIT_TOKEN, read_token=READ_TOKEN),
            config=make_config(rx),
        )
        for _ in range(2)
    ]
    yield apps[0], apps[1]
    for application in apps:
        state = application.extensions["driftguard"]
        state.worker.stop()
        state.worker.expander.close()
        state.outbox.close()


def _episodes(application: Flask) -> list[dict[str, Any]]:
    resp = application.test_client().get("/v1/incidents", headers={"Authorization": f"Bearer {READ_TOKEN}"})
    assert resp.status_code == 200, resp.get_json()
    return list(resp.get_json()["episodes"])


@pytest.mark.parametrize("source", ["audit", "admission"])
def test_identity_received_by_one_replica_names_the_person_in_the_alert_another_sends(
    two: tuple[Flask, Flask], argo: argo_api.FakeArgo, rx: receivers.Receivers, source: str
) -> None:
    a, b = two
    serve_drill(argo)
    if source == "audit":
        at = int(time.time()) - 2
        stamp = retime_patch(argo, at)
        assert audit_post(a.test_client(), event_list(audit_event(at=at + 0.3))).get_json()["stored"] == 1
    else:
        resp = a.test_client().post(
            "/v1/admission",
            data=json.dumps(admission_review(inference_live())),
            headers={"Authorization": f"Bearer {AUDIT_TOKEN}"},
        )
        assert resp.status_code == 200 and resp.get_json()["response"]["allowed"]
        a.extensions["driftguard"].recorder.flush()  # a's writer thread, behind the answer
        stamp = retime_patch(argo, time.time())  # the write lands in the second the review was answered
    assert b.extensions["driftguard"].identities.count() == 1  # one store

    assert post(b.test_client(), notification()).status_code == 202
    b.extensions["driftguard"].worker.drain()
    alerts_name(rx, f"alice@example.com via kubectl-patch, {stamp[11:19]}", source)
    [opened] = _episodes(a)  # written by b, read from a
    assert opened["user"] == "alice@example.com" and opened["open"]
    assert sorted(opened["alerted_at"]) == ["feishu", "pagerduty", "slack"]

    # self-heal: a sees the sync and closes the episode b opened; b closing it again is a no-op
    serve_drill(argo, patched=False, secret_changed=False, sync="Synced")
    argo.apps[("argocd", "deepseek-inference")]["status"]["operationState"]["operation"] = {
        "initiatedBy": {"automated": True}
    }
    assert post(a.test_client(), notification(trigger="on-sync-succeeded")).status_code == 202
    a.extensions["driftguard"].worker.drain()
    [healed] = _episodes(b)
    assert healed["id"] == opened["id"] and not healed["open"] and healed["healed_by"] == "self-heal"
    assert not b.extensions["driftguard"].journal.healed(
        "argocd/deepseek-inference", at=time.time(), by="sync"
    )
    assert _episodes(a)[0]["healed_at"] == healed["healed_at"]  # healed once: the first time stays


def _drill_report(argo: argo_api.FakeArgo, application: Flask) -> DriftReport:
    serve_drill(argo)
    _, report = application.extensions["driftguard"].worker.expander.report("deepseek-inference", "argocd")
    assert report.alerting
    return report


def test_an_episode_is_opened_once_when_replicas_see_the_drift_at_once(
    tmp_path: Path, argo: argo_api.FakeArgo, rx: receivers.Receivers, pg: PgServer
) -> None:
    url = pg.new_database()
    application = create_app(make_settings(tmp_path, argo.url, url), config=make_config(rx))
    try:
        report = _drill_report(argo, application)
        journals = [OutboxJournal(PostgresOutbox(url, lease=30)) for _ in range(6)]
        for round_ in range(5):
            gate = threading.Barrier(len(journals))
            ids: list[str] = []

            def opened(j: OutboxJournal, gate: threading.Barrier, ids: list[str]) -> None:
                gate.wait()
                ids.append(j.drift(report, notified_at=time.time()))

            threads = [threading.Thread(target=opened, args=(j, gate, ids)) for j in journals]
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)
            assert len(ids) == len(journals) and len(set(ids)) == 1, ids  # every replica added to one episode
            opens = [e for e in journals[0].episodes() if e["open"]]
            assert [e["id"] for e in opens] == [ids[0]]
            healed_at = time.time()
            assert journals[0].healed(report.app.key, at=healed_at, by="sync")
            assert len(journals[0].episodes()) == round_ + 1
        for j in journals:
            j.outbox.close()
    finally:
        application.extensions["driftguard"].worker.expander.close()
        application.extensions["driftguard"].outbox.close()


def test_channels_alerted_from_several_replicas_at_once_are_all_kept(
    tmp_path: Path, argo: argo_api.FakeArgo, rx: receivers.Receivers, pg: PgServer
) -> None:
    url = pg.new_database()
    application = create_app(make_settings(tmp_path, argo.url, url), config=make_config(rx))
    try:
        report = _drill_report(argo, application)
        journals = [OutboxJournal(PostgresOutbox(url, lease=30)) for _ in range(8)]
        journals[0].drift(report, notified_at=time.time())
        gate = threading.Barrier(len(journals))

        def alerted(i: int) -> None:
            gate.wait()
            journals[i].alerted(report.app.key, f"channel-{i}", at=time.time())

        threads = [threading.Thread(target=alerted, args=(i,)) for i in range(len(journals))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        [episode] = journals[0].episodes()
        assert sorted(episode["alerted_at"]) == sorted(f"channel-{i}" for i in range(len(journals)))
        for j in journals:
            j.outbox.close()
    finally:
        application.extensions["driftguard"].worker.expander.close()
        application.extensions["driftguard"].outbox.close()


def _event(i: int, at: float) -> IdentityEvent:
    return IdentityEvent(
        source="audit",
        event_id=f"e-{i}",
        at=at,
        user="alice@example.com",
        verb="patch",
        group="apps",
        resource="deployments",
        kind="Deployment",
        namespace="ai-serving",
        name=f"d-{i}",
        uid="",
        resource_version="",
        subresource="",
        field_manager="kubectl-patch",
        user_agent="kubectl",
        groups=("sre",),
        source_ips=("192.0.2.1",),
        impersonated="",
        stage="ResponseComplete",
        received_at=at,
    )


def test_the_identity_prune_runs_in_one_replica_at_a_time(pg: PgServer) -> None:
    url = pg.new_database()
    outbox = PostgresOutbox(url, lease=30)
    store = OutboxIdentityStore(outbox, max_rows=10, retention=60)
    now = time.time()
    with psycopg.connect(url, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s)", (_key("identity"),))  # another replica is pruning
        assert store.add([_event(i, now - 120 if i < 5 else now - 30 + i) for i in range(25)]) == 25
        assert store.count() == 25 and not store.prune()
        assert outbox.sweep(dead_after=3600, retention=86400, windows=600) is not None
        assert store.count() == 25  # the sweeper leaves the identity rows to the lock's holder too
        other.execute("SELECT pg_advisory_unlock(%s)", (_key("identity"),))
    outbox.sweep(dead_after=3600, retention=86400, windows=600)
    assert store.count() == 20  # the five past the retention
    assert store.prune() and store.count() == 10
    assert {e.name for e in store.candidates(namespace="ai-serving", name="d-24", uid="")} == {"d-24"}
    store.outbox.close()


def test_the_sweeper_deletes_identity_records_past_the_retention(tmp_path: Path, outbox_url: str) -> None:
    outbox = PostgresOutbox(outbox_url, lease=30) if outbox_url else SqliteOutbox(tmp_path / "o.sqlite3")
    store = OutboxIdentityStore(outbox, retention=60)
    now = time.time()
    assert store.add([_event(1, now), _event(2, now - 30)]) == 2
    # records that aged past the retention while nothing new arrived to prune them
    outbox.query("UPDATE identity_events SET at=? WHERE event_id='e-2'", (now - 120,))
    assert store.count() == 2
    assert outbox.sweep(dead_after=3600, retention=86400, windows=600) is not None
    assert [r["event_id"] for r in outbox.query("SELECT event_id FROM identity_events")] == ["e-1"]
    outbox.close()


def test_a_version_2_file_with_the_identity_and_journal_tables_migrates_keeping_them(tmp_path: Path) -> None:
    """Before version 3 the SQLite notifier created the two tables outside the versioned schema."""
    path = tmp_path / "outbox.sqlite3"
    old = sqlite3.connect(path)
    for statement in [*MIGRATIONS[0], *MIGRATIONS[1], *MIGRATIONS[2]]:
        old.execute(statement)  # version 3's DDL is what the identity and journal modules ran then
    old.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    old.executemany("INSERT INTO schema_version VALUES (?)", [(1,), (2,)])
    old.execute(
        "INSERT INTO drift_journal(id, app, app_name, app_namespace, classes, severity, who, who_user, who_manager,"
        " changes, changed_at, notified_at, updated_at) VALUES ('ep1', 'argocd/x', 'x', 'argocd', '[]', 'warning',"
        " 'bob', 'bob', 'kubectl-edit', '[]', 1, 2, 2)"
    )
    old.commit()
    old.close()
    outbox = SqliteOutbox(path)
    assert outbox.schema_version() == SCHEMA_VERSION == 4  # 4: the admission witness (issue 30)
    [episode] = OutboxJournal(outbox).episodes()
    assert (episode["id"], episode["who"], episode["open"]) == ("ep1", "bob", True)
    outbox.close()


def test_an_audit_batch_the_database_cannot_take_is_a_503_to_resend(
    two: tuple[Flask, Flask], outbox_url: str
) -> None:
    """The identity table unwritable (here: renamed away): 503, kube-apiserver sends the batch again."""
    a, _ = two
    table = "identity_events"
    state = a.extensions["driftguard"]
    state.outbox.query(f"ALTER TABLE {table} RENAME TO {table}_away")
    body = event_list(audit_event(at=time.time()))
    resp = audit_post(a.test_client(), body)
    assert resp.status_code == 503 and "send the batch again" in resp.get_json()["error"]
    state.outbox.query(f"ALTER TABLE {table}_away RENAME TO {table}")
    assert audit_post(a.test_client(), body).get_json()["stored"] == 1
