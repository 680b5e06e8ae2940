"""The outbox as several replicas share it: claims, singletons, idempotent intake, resolve once, schema.

Each test runs on both stores where the behaviour is the interface's; the ones about row locks and
advisory locks run on PostgreSQL, the store several replicas share.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from driftguard.errors import ConfigError
from notifier.outbox import SCHEMA_VERSION, Outbox, SqliteOutbox
from notifier.outbox.postgres import PostgresOutbox, _key
from notifier.settings import NotifierSettings
from standins.postgres import PgServer


def replicas(tmp_path: Path, outbox_url: str, n: int = 2) -> list[Outbox]:
    """``n`` outboxes on one store, as ``n`` replicas (processes) would open it."""
    if outbox_url:
        return [PostgresOutbox(outbox_url, lease=30) for _ in range(n)]
    return [SqliteOutbox(tmp_path / "outbox.sqlite3", lease=30) for _ in range(n)]


def queue(outbox: Outbox, count: int, channel: str = "slack") -> None:
    for i in range(count):
        nid, _ = outbox.add_notification(
            {"n": i}, app=f"a{i}", app_namespace="argocd", trigger="t", received_at=time.time()
        )
        outbox.finish_notification(
            nid,
            [
                {
                    "channel": channel,
                    "kind": "alert",
                    "app": f"argocd/a{i}",
                    "fingerprint": "f",
                    "payload": {},
                    "received_at": 0.0,
                }
            ],
        )


def test_replicas_claiming_at_once_never_take_the_same_message(tmp_path: Path, outbox_url: str) -> None:
    stores = replicas(tmp_path, outbox_url, 4)
    queue(stores[0], 120)
    taken: list[list[str]] = [[] for _ in stores]

    def drain(i: int) -> None:
        while (m := stores[i].claim_message()) is not None:
            taken[i].append(m.id)

    threads = [threading.Thread(target=drain, args=(i,)) for i in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    every = [mid for ids in taken for mid in ids]
    assert len(every) == 120 and len(set(every)) == 120
    owners = {r["owner"] for r in stores[0].query("SELECT owner FROM messages")}
    assert owners == {stores[0].replica}  # one process here: all four "replicas" share its pid and host
    for s in stores:
        s.close()


def test_a_row_another_replica_holds_locked_is_skipped_not_waited_for(pg: PgServer) -> None:
    url = pg.new_database()
    a, b = PostgresOutbox(url, lease=30), PostgresOutbox(url, lease=30)
    queue(a, 2)
    with psycopg.connect(url, autocommit=True) as holder, holder.transaction():
        [locked] = holder.execute(
            "SELECT id FROM messages ORDER BY created_at LIMIT 1 FOR UPDATE"
        ).fetchall()  # a replica in the middle of its claim transaction
        got = b.claim_message()  # waiting for the lock would block here until the holder ends
        assert got is not None and got.id != locked[0]  # SKIP LOCKED: the other row, at once
        assert b.claim_message() is None
    a.close()
    b.close()


def test_rechecks_and_the_sweeper_run_in_one_replica_at_a_time(pg: PgServer) -> None:
    url = pg.new_database()
    a, b = PostgresOutbox(url, lease=30), PostgresOutbox(url, lease=30)
    a.open_incident("argocd/x", name="x", namespace="argocd", fingerprint="f")
    a.query("UPDATE incidents SET checked_at=0")
    with psycopg.connect(url, autocommit=True) as holder, holder.transaction():
        holder.execute("SELECT pg_advisory_xact_lock(%s)", (_key("rechecks"),))
        holder.execute("SELECT pg_advisory_xact_lock(%s)", (_key("sweep"),))
        assert b.due_rechecks(60) == []  # another replica is running it: skip this round
        assert b.sweep(dead_after=1, retention=1, windows=1) is None
    [due] = b.due_rechecks(60)
    assert due["app"] == "argocd/x"
    assert a.due_rechecks(60) == []  # marked checked by b: not due again within the interval
    assert a.sweep(dead_after=86400, retention=86400, windows=600) == {"dead": 0, "removed": 0}
    a.close()
    b.close()


def test_the_sweeper_dead_letters_what_nobody_can_deliver_and_retention_deletes_old_work(
    tmp_path: Path, outbox_url: str
) -> None:
    [store] = replicas(tmp_path, outbox_url, 1)
    queue(store, 3)
    old = time.time() - 10_000
    store.query("UPDATE messages SET created_at=? WHERE app='argocd/a0'", (old,))
    swept = store.sweep(dead_after=3600, retention=86400, windows=600)
    assert swept == {"dead": 1, "removed": 0}
    [dead] = store.messages("dead")
    assert dead["app"] == "argocd/a0" and "dead-letter window" in dead["last_error"]
    store.query("UPDATE messages SET created_at=0 WHERE state='dead'")
    store.query("UPDATE notifications SET received_at=0 WHERE app='a0'")
    assert store.sweep(dead_after=3600, retention=86400, windows=600) == {"dead": 0, "removed": 2}
    assert len(store.messages()) == 2 and store.depth()["messages"] == 2
    store.close()


def test_the_same_notification_received_by_two_replicas_is_stored_once(
    tmp_path: Path, outbox_url: str
) -> None:
    a, b = replicas(tmp_path, outbox_url)
    now = time.time()
    kw: dict[str, Any] = {
        "app": "x",
        "app_namespace": "argocd",
        "trigger": "on-drift-detected",
        "key": "k1",
        "window": 300,
    }
    first, dup1 = a.add_notification({"b": 1}, received_at=now, **kw)
    second, dup2 = b.add_notification({"b": 1}, received_at=now + 1, **kw)
    assert (dup1, dup2) == (False, True) and first == second
    assert len(a.query("SELECT id FROM notifications")) == 1
    later, dup3 = b.add_notification({"b": 1}, received_at=now + 301, **kw)  # past the window: a new one
    assert not dup3 and later != first
    assert len(a.query("SELECT id FROM notifications")) == 2
    a.close()
    b.close()


def test_concurrent_intake_of_one_key_stores_it_once(pg: PgServer) -> None:
    url = pg.new_database()
    stores = [PostgresOutbox(url, lease=30) for _ in range(6)]
    results: list[tuple[str, bool]] = []
    barrier = threading.Barrier(len(stores))

    def take(s: Outbox) -> None:
        barrier.wait()
        results.append(
            s.add_notification(
                {},
                app="x",
                app_namespace="argocd",
                trigger="t",
                received_at=time.time(),
                key="same",
                window=300,
            )
        )

    threads = [threading.Thread(target=take, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(d for _, d in results) == [False] + [True] * 5
    assert len({nid for nid, _ in results}) == 1
    assert len(stores[0].query("SELECT id FROM notifications")) == 1
    for s in stores:
        s.close()


def test_an_incident_is_closed_by_exactly_one_replica_and_resolved_once(
    tmp_path: Path, outbox_url: str
) -> None:
    a, b = replicas(tmp_path, outbox_url)
    a.open_incident("argocd/x", name="x", namespace="argocd", fingerprint="f")
    assert [a.close_incident("argocd/x"), b.close_incident("argocd/x")] == [True, False]
    assert [a.claim_resolve("argocd/x", 600), b.claim_resolve("argocd/x", 600)] == [True, False]
    b.open_incident(
        "argocd/x", name="x", namespace="argocd", fingerprint="g"
    )  # new drift: the next resolve is new
    assert b.claim_resolve("argocd/x", 600) and not a.claim_resolve("argocd/x", 600)
    a.close()
    b.close()


def test_a_store_migrated_by_a_newer_notifier_stops_start_up_with_a_clear_message(
    tmp_path: Path, outbox_url: str
) -> None:
    [store] = replicas(tmp_path, outbox_url, 1)
    assert store.schema_version() == SCHEMA_VERSION
    store.query("INSERT INTO schema_version(version) VALUES (?)", (SCHEMA_VERSION + 1,))
    store.close()
    with pytest.raises(ConfigError) as info:
        replicas(tmp_path, outbox_url, 1)
    message = str(info.value)
    assert info.value.setting == (
        "DRIFTGUARD_NOTIFIER_DATABASE_URL" if outbox_url else "DRIFTGUARD_NOTIFIER_OUTBOX"
    )
    assert f"version {SCHEMA_VERSION + 1}" in message and f"up to {SCHEMA_VERSION}" in message
    assert "refuses to start" in message


def test_a_file_from_before_versioning_is_migrated_forward_keeping_its_work(tmp_path: Path) -> None:
    import sqlite3

    from notifier.outbox.base import MIGRATIONS

    path = tmp_path / "outbox.sqlite3"
    old = sqlite3.connect(path)
    for statement in MIGRATIONS[0]:  # what the single-replica notifier wrote, no version table
        old.execute(statement)
    old.execute(
        "INSERT INTO notifications(id, received_at, body, app, app_namespace, trigger, state, next_at)"
        " VALUES ('n1', 1, '{}', 'x', 'argocd', 't', 'pending', 1)"
    )
    old.commit()
    old.close()
    store = SqliteOutbox(path)
    assert store.schema_version() == SCHEMA_VERSION
    claimed = store.claim_notification()
    assert claimed is not None and claimed.id == "n1" and claimed.row["owner"] == ""  # the row as it was
    assert store.query("SELECT owner FROM notifications")[0]["owner"] == store.replica


def test_the_database_url_is_validated_and_its_password_never_echoed(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="must be a postgresql:// URL"):
        NotifierSettings(
            token="t" * 20,
            redact_key=b"redact-key-for-tests-0123456789abcdef",
            database_url="mysql://u:pw@h/db",
        )
    settings = NotifierSettings(
        token="t" * 20,
        redact_key=b"redact-key-for-tests-0123456789abcdef",
        database_url="postgresql://u:hunter2-secret@h/db",
    )
    assert "hunter2" not in repr(settings)
    with pytest.raises(ConfigError) as info:
        PostgresOutbox("postgresql://u:hunter2-secret@h:notaport/db", connect_wait=0)
    assert "hunter2" not in str(info.value)
    with pytest.raises(ConfigError) as info:
        PostgresOutbox("postgresql://u:hunter2-secret@127.0.0.1:1/db", connect_wait=0)
    assert "cannot reach the outbox database 127.0.0.1:1/db" in str(info.value)
    assert "hunter2" not in str(info.value)
