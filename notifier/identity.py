"""The identity store: audit and admission records of who wrote what, kept for a retention window.

Its own table, ``identity_events``, in the outbox's SQLite file (the outbox's per-thread
connection and ``BEGIN IMMEDIATE`` helper are reused, so one file and one backup hold everything).
:class:`~driftguard.identity.IdentityStore` is the interface another database (PostgreSQL) implements;
the join itself (``attribute``) lives in driftguard/identity.py, so the drift gate can use it too.

Bounded under an event storm: every string is capped when parsed (driftguard/identity.py), a row
is at most a few KB, and the table holds at most ``max_rows`` rows (the oldest go first) and none
older than ``retention``. A resent audit batch is stored once (unique on source and event id).
"""

from __future__ import annotations

import json
import queue
import sqlite3
import threading
import time
from collections.abc import Iterable
from typing import Any

from driftguard.identity import IdentityEvent, IdentityStore, attribute
from notifier.outbox import SqliteOutbox as Outbox

__all__ = ["IdentityStore", "Recorder", "SQLiteIdentityStore", "attribute", "create_tables"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS identity_events (
    source TEXT NOT NULL, event_id TEXT NOT NULL, at REAL NOT NULL, user TEXT NOT NULL, verb TEXT NOT NULL,
    api_group TEXT NOT NULL, resource TEXT NOT NULL, kind TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
    uid TEXT NOT NULL, resource_version TEXT NOT NULL, subresource TEXT NOT NULL, field_manager TEXT NOT NULL,
    user_agent TEXT NOT NULL, groups TEXT NOT NULL, source_ips TEXT NOT NULL, impersonated TEXT NOT NULL,
    stage TEXT NOT NULL, received_at REAL, stored_at REAL NOT NULL, PRIMARY KEY (source, event_id));
CREATE INDEX IF NOT EXISTS identity_by_name ON identity_events(namespace, name);
CREATE INDEX IF NOT EXISTS identity_by_uid ON identity_events(uid);
CREATE INDEX IF NOT EXISTS identity_by_at ON identity_events(at);
"""

_COLUMNS = (
    "source, event_id, at, user, verb, api_group, resource, kind, namespace, name, uid, resource_version,"
    " subresource, field_manager, user_agent, groups, source_ips, impersonated, stage, received_at, stored_at"
)


def create_tables(outbox: Outbox, schema: str) -> None:
    """Our own tables in the outbox's file, in one of its ``BEGIN IMMEDIATE`` transactions (SQLite allows DDL there)."""
    with outbox._tx() as db:
        for statement in schema.split(";"):
            if statement.strip():
                db.execute(statement)


class SQLiteIdentityStore:
    """:class:`IdentityStore` in the outbox's SQLite file."""

    def __init__(self, outbox: Outbox, *, retention: float = 86400.0, max_rows: int = 100_000) -> None:
        self.outbox = outbox
        self.retention = retention
        self.max_rows = max_rows
        self._pruned_at = 0.0
        self._since_prune = 0
        create_tables(outbox, SCHEMA)

    def add(self, events: Iterable[IdentityEvent]) -> int:
        now = time.time()
        rows = [
            (
                e.source,
                e.event_id,
                e.at,
                e.user,
                e.verb,
                e.group,
                e.resource,
                e.kind,
                e.namespace,
                e.name,
                e.uid,
                e.resource_version,
                e.subresource,
                e.field_manager,
                e.user_agent,
                json.dumps(list(e.groups)),
                json.dumps(list(e.source_ips)),
                e.impersonated,
                e.stage,
                e.received_at,
                now,
            )
            for e in events
        ]
        with self.outbox._tx() as db:
            before = db.total_changes
            db.executemany(
                f"INSERT OR IGNORE INTO identity_events({_COLUMNS}) VALUES ({','.join('?' * 21)})",  # noqa: S608
                rows,
            )
            added = db.total_changes - before
            self._since_prune += added
            # counting a 100,000-row table on every write would cost the admission answer milliseconds:
            # prune once a second, or at once when a batch could take the table far past its bound
            if now - self._pruned_at >= 1.0 or self._since_prune >= max(1, self.max_rows // 10):
                self._prune(db, now)
        return int(added)

    def _prune(self, db: sqlite3.Connection, now: float) -> None:
        self._pruned_at, self._since_prune = now, 0
        db.execute("DELETE FROM identity_events WHERE at<?", (now - self.retention,))
        excess = db.execute("SELECT count(*) FROM identity_events").fetchone()[0] - self.max_rows
        if excess > 0:
            db.execute(
                "DELETE FROM identity_events WHERE rowid IN (SELECT rowid FROM identity_events ORDER BY at LIMIT ?)",
                (excess,),
            )

    def candidates(self, *, namespace: str, name: str, uid: str) -> list[IdentityEvent]:
        cutoff = time.time() - self.retention
        rows = (
            self.outbox._db()
            .execute(
                f"SELECT {_COLUMNS} FROM identity_events WHERE ((namespace=? AND name=?) OR (uid!='' AND uid=?))"  # noqa: S608
                " AND at>=? ORDER BY at DESC LIMIT 500",
                (namespace, name, uid, cutoff),
            )
            .fetchall()
        )
        return [_event(r) for r in rows]

    def count(self) -> int:
        return int(self.outbox._db().execute("SELECT count(*) FROM identity_events").fetchone()[0])


class Recorder:
    """Admission records written off the request path: the answer never waits for the database.

    A bounded queue and one writer thread per process, batching what arrived within ``linger``. A
    full queue (the database stuck for seconds under a storm) drops the newest record and counts
    it, so the webhook still answers at once; a process killed mid-batch loses at most that batch.
    """

    def __init__(
        self, store: IdentityStore, *, on_result: Any = None, maxsize: int = 10_000, linger: float = 0.05
    ) -> None:
        self.store = store
        self.linger = linger
        """Seconds the writer waits for more records after the first: one write per burst, not per review
        (a write per review woke the writer between two reviews, and its GIL time landed on the next answer)."""
        self.on_result = on_result
        self._queue: queue.Queue[IdentityEvent] = queue.Queue(maxsize=maxsize)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def record(self, ev: IdentityEvent) -> bool:
        """Queue a record; False when the queue is full (dropped)."""
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="driftguard-identity", daemon=True)
                    self._thread.start()
        try:
            self._queue.put_nowait(ev)
        except queue.Full:
            return False
        return True

    def flush(self, timeout: float = 5.0) -> None:
        """Wait until everything queued is written (tests, shutdown)."""
        deadline = time.monotonic() + timeout
        while self._queue.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.005)

    def _run(self) -> None:
        while True:
            batch = [self._queue.get()]
            time.sleep(self.linger)
            while len(batch) < 500:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            try:
                self.store.add(batch)
                outcome = "accepted"
            except sqlite3.Error:
                outcome = "unavailable"
            if self.on_result is not None:
                self.on_result(outcome, len(batch))
            for _ in batch:
                self._queue.task_done()


def _event(r: sqlite3.Row) -> IdentityEvent:
    d: dict[str, Any] = dict(r)
    return IdentityEvent(
        source=d["source"],
        event_id=d["event_id"],
        at=float(d["at"]),
        user=d["user"],
        verb=d["verb"],
        group=d["api_group"],
        resource=d["resource"],
        kind=d["kind"],
        namespace=d["namespace"],
        name=d["name"],
        uid=d["uid"],
        resource_version=d["resource_version"],
        subresource=d["subresource"],
        field_manager=d["field_manager"],
        user_agent=d["user_agent"],
        groups=tuple(json.loads(d["groups"])),
        source_ips=tuple(json.loads(d["source_ips"])),
        impersonated=d["impersonated"],
        stage=d["stage"],
        received_at=d["received_at"],
    )
