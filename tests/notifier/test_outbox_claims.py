"""How work moves from expansion to send: queued already leased, idle polls that lock nothing.

Both stores; the SQLite ones check that a poll finding nothing due never asks for the file's write
lock (with the busy timeout at 0, asking while another connection writes fails at once).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

from notifier.outbox import Outbox, SqliteOutbox
from notifier.outbox.postgres import PostgresOutbox
from standins.postgres import PgServer


def store(tmp_path: Path, outbox_url: str) -> Outbox:
    if outbox_url:
        return PostgresOutbox(outbox_url, lease=30)
    return SqliteOutbox(tmp_path / "outbox.sqlite3", lease=30)


def message(channel: str) -> dict[str, object]:
    return {
        "channel": channel,
        "kind": "alert",
        "app": "argocd/a",
        "fingerprint": "f",
        "payload": {"text": channel},
        "received_at": 1.0,
    }


def test_messages_queued_by_the_expanding_replica_are_leased_to_it_in_the_same_transaction(
    tmp_path: Path, outbox_url: str
) -> None:
    a, b = store(tmp_path, outbox_url), store(tmp_path, outbox_url)
    b.replica = "other-replica:1"
    nid, _ = a.add_notification({}, app="a", app_namespace="argocd", trigger="t", received_at=1.0)
    before = time.time()
    queued, leased = a.finish_and_claim(
        nid,
        [message("slack"), message("feishu"), message("pagerduty")],
        claim=frozenset({"slack", "pagerduty"}),
    )
    assert queued == 3
    assert sorted(m.row["channel"] for m in leased) == ["pagerduty", "slack"]
    for m in leased:
        assert m.row["attempts"] == 1 and m.row["owner"] == a.replica
        assert m.row["lease_until"] >= before + 30
        assert m.row["payload"] == f'{{"text": "{m.row["channel"]}"}}'
    rows = {r["channel"]: r for r in a.query("SELECT * FROM messages")}
    assert rows["slack"]["owner"] == a.replica and rows["slack"]["attempts"] == 1
    assert rows["feishu"]["owner"] == "" and rows["feishu"]["lease_until"] == 0
    # another replica never gets what the expanding one holds: only the channel it left unclaimed
    got = b.claim_message()
    assert got is not None and got.row["channel"] == "feishu"
    assert a.query("SELECT owner FROM messages WHERE channel='feishu'") == [{"owner": b.replica}]
    assert b.claim_message() is None
    # what was leased is delivered by its holder as any claimed message is
    for m in leased:
        a.delivered(m)
    assert {r["channel"] for r in a.messages("sent")} == {"slack", "pagerduty"}
    a.close()
    b.close()


def test_a_replayed_expansion_queues_nothing_twice_and_leases_nothing(
    tmp_path: Path, outbox_url: str
) -> None:
    a = store(tmp_path, outbox_url)
    nid, _ = a.add_notification({}, app="a", app_namespace="argocd", trigger="t", received_at=1.0)
    queued, leased = a.finish_and_claim(nid, [message("slack")], claim=frozenset())
    assert (queued, leased) == (1, [])
    # the same expansion again (its lease ran out mid-way): the existing row may be another's, mid-send
    assert a.finish_and_claim(nid, [message("slack")]) == (0, [])
    [row] = a.messages()
    assert row["attempts"] == 0 and row["owner"] == ""
    a.close()


def test_one_notification_leases_one_message_per_channel(tmp_path: Path, outbox_url: str) -> None:
    a = store(tmp_path, outbox_url)
    nid, _ = a.add_notification({}, app="a", app_namespace="argocd", trigger="t", received_at=1.0)
    resolve = {**message("slack"), "kind": "resolve"}
    queued, leased = a.finish_and_claim(nid, [message("slack"), resolve])
    assert queued == 2 and len(leased) == 1  # a channel sends one message at a time per process
    a.close()


def test_an_idle_poll_takes_no_write_lock_on_the_sqlite_file(tmp_path: Path) -> None:
    outbox = SqliteOutbox(tmp_path / "outbox.sqlite3", lease=30)
    outbox._conn().execute("PRAGMA busy_timeout=0")  # asking for the write lock now fails at once
    writer = sqlite3.connect(tmp_path / "outbox.sqlite3", isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # another worker in the middle of a write
    try:
        assert outbox.claim_notification() is None
        assert outbox.claim_message() is None
        assert outbox.query("SELECT count(*) AS n FROM messages") == [{"n": 0}]  # a watcher's read
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    outbox.close()


def test_work_stored_by_one_replica_wakes_the_others_at_once(pg: PgServer) -> None:
    url = pg.new_database()
    a, b = PostgresOutbox(url, lease=30), PostgresOutbox(url, lease=30)
    woken = threading.Event()
    a.listen(woken.set)
    try:
        assert woken.wait(10)  # on connecting: a look for what was queued while nobody listened
        woken.clear()
        b.add_notification({}, app="a", app_namespace="argocd", trigger="t", received_at=time.time())
        assert woken.wait(10)  # NOTIFY, not a poll: nothing here polls
        woken.clear()
        nid, _ = b.add_notification({}, app="b", app_namespace="argocd", trigger="t", received_at=time.time())
        woken.wait(10)
        woken.clear()
        b.finish_and_claim(nid, [message("slack")], claim=frozenset())  # queued for anyone: wakes
        assert woken.wait(10)
        woken.clear()
        b.finish_and_claim(nid + "x", [message("slack")])  # leased to b itself: nobody else to tell
        assert not woken.wait(0.5)
    finally:
        a.unlisten()
        a.close()
        b.close()
