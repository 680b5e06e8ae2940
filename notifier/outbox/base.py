"""The outbox interface: every query the notifier runs, written once for SQLite and PostgreSQL.

Tables: ``notifications`` (stored before the 202), ``messages`` (one per channel, each delivered
and retried on its own; its id is derived from the notification and the channel, so a replayed
expansion cannot queue it twice), ``sent`` (fingerprints for the dedup window), ``incidents``
(apps with open drift: re-checked, resolved when back in sync), ``episodes`` (apps last seen
OutOfSync and not Synced since: re-checked too, because Argo CD fires its trigger once per
episode), ``intake`` (idempotency keys of received notifications), ``resolves`` (the last
resolve queued per app), and issue 21's ``identity_events`` (notifier/identity.py) and
``drift_journal`` (notifier/journal.py). All of it lives in the store, so every replica shares the
dedup memory, the open incidents, the identity records and the journal.

Work is claimed with a lease (``lease_until``, ``owner``): a crashed process's lease runs out and
another takes the work. A backend supplies the transaction, the row lock of a claim (PostgreSQL:
``FOR UPDATE SKIP LOCKED``; SQLite: ``BEGIN IMMEDIATE`` already serialises writers) and the
singleton lock for the re-check scheduler and the sweeper (PostgreSQL: a transaction-level
advisory lock). The schema is versioned, forward-only (``MIGRATIONS``), migrated at start-up under
a lock; a store whose version is newer than this code knows stops start-up.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

from driftguard.errors import ConfigError, StoreUnavailable

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "Claimed", "Outbox"]

MIGRATIONS: list[list[str]] = [
    # 1: the single-replica schema (files written before versioning have exactly this; IF NOT EXISTS adopts them)
    [
        "CREATE TABLE IF NOT EXISTS notifications (id TEXT PRIMARY KEY, received_at REAL NOT NULL, body TEXT NOT NULL,"
        " app TEXT NOT NULL, app_namespace TEXT NOT NULL, trigger TEXT NOT NULL, state TEXT NOT NULL,"
        " attempts INTEGER NOT NULL DEFAULT 0, next_at REAL NOT NULL, lease_until REAL NOT NULL DEFAULT 0,"
        " last_error TEXT NOT NULL DEFAULT '', done_at REAL)",
        "CREATE INDEX IF NOT EXISTS notifications_due ON notifications(state, next_at)",
        "CREATE TABLE IF NOT EXISTS messages (id TEXT PRIMARY KEY, notification_id TEXT NOT NULL, channel TEXT NOT NULL,"
        " kind TEXT NOT NULL, app TEXT NOT NULL, fingerprint TEXT NOT NULL, payload TEXT NOT NULL, state TEXT NOT NULL,"
        " attempts INTEGER NOT NULL DEFAULT 0, next_at REAL NOT NULL, lease_until REAL NOT NULL DEFAULT 0,"
        " created_at REAL NOT NULL, received_at REAL NOT NULL, sent_at REAL, last_error TEXT NOT NULL DEFAULT '')",
        "CREATE INDEX IF NOT EXISTS messages_due ON messages(state, next_at)",
        "CREATE TABLE IF NOT EXISTS sent (app TEXT NOT NULL, channel TEXT NOT NULL, fingerprint TEXT NOT NULL,"
        " sent_at REAL NOT NULL, PRIMARY KEY (app, channel, fingerprint))",
        "CREATE TABLE IF NOT EXISTS incidents (app TEXT PRIMARY KEY, app_name TEXT NOT NULL, app_namespace TEXT NOT NULL,"
        " fingerprint TEXT NOT NULL, opened_at REAL NOT NULL, checked_at REAL NOT NULL)",
        "CREATE TABLE IF NOT EXISTS episodes (app TEXT PRIMARY KEY, app_name TEXT NOT NULL, app_namespace TEXT NOT NULL,"
        " opened_at REAL NOT NULL, checked_at REAL NOT NULL)",
        "CREATE TABLE IF NOT EXISTS metrics (name TEXT NOT NULL, labels TEXT NOT NULL, value REAL NOT NULL,"
        " PRIMARY KEY (name, labels))",
    ],
    # 2: several replicas: who holds a lease, idempotent intake, resolve once
    [
        "ALTER TABLE notifications ADD COLUMN owner TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE messages ADD COLUMN owner TEXT NOT NULL DEFAULT ''",
        "CREATE TABLE intake (key TEXT PRIMARY KEY, notification_id TEXT NOT NULL, received_at REAL NOT NULL)",
        "CREATE TABLE resolves (app TEXT PRIMARY KEY, queued_at REAL NOT NULL)",
        "CREATE INDEX messages_done ON messages(state, created_at)",
    ],
    # 3: the identity store and the drift journal (issue 21) in every store, shared by the replicas.
    # IF NOT EXISTS adopts the tables a SQLite file at version 2 already holds (they were created
    # outside the versioned schema then); "user" and "groups" are quoted (PostgreSQL keywords).
    [
        "CREATE TABLE IF NOT EXISTS identity_events (source TEXT NOT NULL, event_id TEXT NOT NULL, at REAL NOT NULL,"
        ' "user" TEXT NOT NULL, verb TEXT NOT NULL, api_group TEXT NOT NULL, resource TEXT NOT NULL, kind TEXT NOT NULL,'
        " namespace TEXT NOT NULL, name TEXT NOT NULL, uid TEXT NOT NULL, resource_version TEXT NOT NULL,"
        ' subresource TEXT NOT NULL, field_manager TEXT NOT NULL, user_agent TEXT NOT NULL, "groups" TEXT NOT NULL,'
        " source_ips TEXT NOT NULL, impersonated TEXT NOT NULL, stage TEXT NOT NULL, received_at REAL,"
        " stored_at REAL NOT NULL, PRIMARY KEY (source, event_id))",
        "CREATE INDEX IF NOT EXISTS identity_by_name ON identity_events(namespace, name)",
        "CREATE INDEX IF NOT EXISTS identity_by_uid ON identity_events(uid)",
        "CREATE INDEX IF NOT EXISTS identity_by_at ON identity_events(at)",
        "CREATE TABLE IF NOT EXISTS drift_journal (id TEXT PRIMARY KEY, app TEXT NOT NULL, app_name TEXT NOT NULL,"
        " app_namespace TEXT NOT NULL, classes TEXT NOT NULL, severity TEXT NOT NULL, who TEXT NOT NULL,"
        " who_user TEXT NOT NULL, who_manager TEXT NOT NULL, changes TEXT NOT NULL, changed_at REAL NOT NULL,"
        " notified_at REAL NOT NULL, alerted TEXT NOT NULL DEFAULT '{}', healed_at REAL,"
        " healed_by TEXT NOT NULL DEFAULT '', updated_at REAL NOT NULL)",
        "CREATE INDEX IF NOT EXISTS drift_journal_app ON drift_journal(app, healed_at)",
        "CREATE INDEX IF NOT EXISTS drift_journal_changed ON drift_journal(changed_at)",
        # at most one open episode per app: two replicas opening one at once store it once
        "CREATE UNIQUE INDEX IF NOT EXISTS drift_journal_open ON drift_journal(app) WHERE healed_at IS NULL",
    ],
    # 4: the admission witness (issue 30): the masked field diff of a person's write to an object
    # Argo CD tracks, for the drift self-heal reverts before the notifier reads (notifier/witness.py)
    [
        "CREATE TABLE IF NOT EXISTS admission_changes (event_id TEXT PRIMARY KEY, at REAL NOT NULL,"
        " api_group TEXT NOT NULL, kind TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,"
        ' uid TEXT NOT NULL, "user" TEXT NOT NULL, field_manager TEXT NOT NULL, changes TEXT NOT NULL)',
        "CREATE INDEX IF NOT EXISTS admission_changes_by_name ON admission_changes(namespace, name, at)",
        "CREATE INDEX IF NOT EXISTS admission_changes_by_at ON admission_changes(at)",
    ],
]
SCHEMA_VERSION = len(MIGRATIONS)
"""The schema version this code writes; a store at a higher one was migrated by a newer notifier."""

LOCK_RECHECKS = "rechecks"
LOCK_SWEEP = "sweep"
LOCK_IDENTITY = "identity"


@dataclass(frozen=True)
class Claimed:
    """A row this process holds a lease on."""

    id: str
    row: dict[str, Any]


class Outbox(ABC):
    """The store of accepted work; the SQL is shared, a backend supplies connections and locks."""

    backend = ""
    setting = ""
    """The setting that selects and locates this store (named in start-up errors)."""
    errors: tuple[type[Exception], ...] = ()
    """The driver's errors: a write that raises one of these did not happen."""
    lock_clause = ""
    """Appended to a claim's SELECT (PostgreSQL: ``FOR UPDATE SKIP LOCKED``)."""
    row_lock = ""
    """Appended to a read-modify-write's SELECT (PostgreSQL: ``FOR UPDATE``; SQLite's writer lock covers it)."""

    def __init__(self, *, lease: float) -> None:
        self.lease = lease
        self.replica = f"{socket.gethostname()}:{os.getpid()}"
        """Written into ``owner`` with each lease: which replica holds the work (operators, the HA test)."""
        self.write_error = ""
        """This process's last failed write of accepted work ("" once one succeeds): /readyz reports it."""
        self.identity_retention = 0.0
        """Seconds identity records are kept (0: no limit); the sweeper deletes older ones."""

    # --- what a backend supplies ------------------------------------------------------------------------

    @abstractmethod
    def _tx(self) -> AbstractContextManager[Any]:
        """A write transaction; yields an object with ``execute(sql, params)`` returning a cursor."""

    @abstractmethod
    def _conn(self) -> Any:
        """A connection for a lone read."""

    @abstractmethod
    def _singleton(self, db: Any, name: str) -> bool:
        """Inside a transaction: True when this replica may run the once-at-a-time job ``name`` now."""

    @abstractmethod
    def _not_busy(self, channels: frozenset[str]) -> tuple[str, Any]:
        """A condition on ``channel`` excluding ``channels``, and its parameter."""

    @abstractmethod
    def _probe(self) -> None:
        """Readiness: a committed write (SQLite: the size of a large notification, so a full disk fails it)."""

    @abstractmethod
    def close(self) -> None:
        """Close this thread's connection (PostgreSQL: and those ``warm`` opened ahead and nobody took)."""

    def listen(self, wake: Callable[[], object]) -> None:  # noqa: B027 - optional; SQLite is one replica
        """Call ``wake`` whenever another process queues work, if the store can say so (PostgreSQL)."""

    def unlisten(self) -> None:  # noqa: B027 - optional, as ``listen``
        """Stop calling the ``listen`` callback."""

    def _queued(self) -> None:  # noqa: B027 - optional, as ``listen``
        """After a commit that queued work others may take: tell the listening processes."""

    def unit(self) -> AbstractContextManager[Any]:
        """One transaction for several of these methods' writes, committed once at the end (PostgreSQL).

        The worker wraps what one expansion writes (episode, incident, journal, the queued
        messages) in it: one commit and one WAL flush instead of four, and all of it or none (a
        crash or a failure before the commit leaves the notification pending, expanded again
        from its durable row). Inside, every method runs in that transaction. SQLite: each write
        keeps its own commit (no flush in WAL + ``synchronous=NORMAL``, and holding the file's one
        write lock over the rendering would only make the other workers' intake wait).
        """
        return nullcontext()

    def _claim(self, table: str, due: str, params: tuple[Any, ...], order: str) -> dict[str, Any] | None:
        """Lease the first due row of ``table`` (``due``: its FROM ... WHERE); the row, attempts counted.

        SQLite: a plain read first, so an idle poll takes no write lock; then the claim under
        ``BEGIN IMMEDIATE``. The lease's commit may skip the disk (``_lease_only``).
        """
        now = params[0]
        if self._x(self._conn(), f"SELECT 1 AS due {due} LIMIT 1", params).fetchone() is None:
            return None  # an idle poll: a plain read, no write lock taken (SQLite) and no transaction (both)
        with self._tx() as db:
            self._lease_only(db)
            row = self._x(db, f"SELECT * {due} ORDER BY {order} LIMIT 1{self.lock_clause}", params).fetchone()
            if row is None:
                return None
            self._x(
                db,
                f"UPDATE {table} SET lease_until=?, attempts=attempts+1, owner=? WHERE id=?",  # noqa: S608 - fixed names
                (now + self.lease, self.replica, row["id"]),
            )
        return {**dict(row), "attempts": int(row["attempts"]) + 1}  # this one included

    def warm(self, connections: int) -> None:  # noqa: B027 - optional; a SQLite connection is a file open
        """Open ``connections`` connections ahead, in the background, for threads that will need one."""

    def announce(self) -> None:
        """Tell the other processes that work was queued (PostgreSQL: NOTIFY); after the commit."""
        self._queued()

    def _lease_only(self, db: Any) -> None:  # noqa: B027 - an optional hook; SQLite has nothing to relax
        """Inside a transaction that writes only a lease: the backend may commit it without waiting for the disk.

        A lease lost in a database crash only makes the row claimable again (at-least-once holds).
        (PostgreSQL claims on a connection whose session skips the WAL flush instead: ``_claim``.)
        """

    def _sql(self, statement: str) -> str:
        return statement

    def _x(self, db: Any, statement: str, params: tuple[Any, ...] | list[Any] = ()) -> Any:
        return db.execute(self._sql(statement), params)

    def _many(self, db: Any, statement: str, rows: list[tuple[Any, ...]]) -> int:
        """One statement over many parameter rows (in the caller's transaction); rows changed in all."""
        if not rows:
            return 0
        cur = db.cursor()
        cur.executemany(self._sql(statement), rows)
        return int(cur.rowcount)

    # --- schema ---------------------------------------------------------------------------------------

    def _migrate(self, db: Any) -> int:
        """Bring the schema to ``SCHEMA_VERSION`` (the caller holds the start-up lock); the version found."""
        self._x(db, "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        row = self._x(db, "SELECT max(version) AS v FROM schema_version").fetchone()
        found = int(row["v"] or 0)
        if found > SCHEMA_VERSION:
            raise ConfigError(
                self.setting,
                f"the outbox schema is at version {found} but this notifier knows only up to {SCHEMA_VERSION}: "
                "a newer notifier migrated it; this replica refuses to start rather than write a schema it does "
                "not know (roll the Deployment forward; migrations are forward-only)",
            )
        for version in range(found + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[version - 1]:
                self._x(db, statement)
            self._x(db, "INSERT INTO schema_version(version) VALUES (?)", (version,))
        return found

    def schema_version(self) -> int:
        row = self._x(self._conn(), "SELECT max(version) AS v FROM schema_version").fetchone()
        return int(row["v"] or 0)

    # --- readiness ----------------------------------------------------------------------------------------

    def writable(self) -> bool:
        """Readiness: the store takes a write (and so clears ``write_error``)."""
        try:
            self._probe()
        except self.errors as exc:
            self.write_error = _reason(exc)
            return False
        self.write_error = ""
        return True

    # --- notifications ------------------------------------------------------------------------------

    def add_notification(
        self,
        body: dict[str, Any],
        *,
        app: str,
        app_namespace: str,
        trigger: str,
        received_at: float,
        key: str = "",
        window: float = 0.0,
        announce: bool = True,
    ) -> tuple[str, bool]:
        """Store a notification (before answering 202): its id, and True when ``key`` was seen within ``window``.

        The idempotency key is taken with an upsert that only replaces a key older than the window,
        in the same transaction as the row, so two replicas receiving the same retry store it once.
        Raises ``StoreUnavailable`` when nothing was stored. ``announce=False``: the caller wakes a
        worker of its own that takes it at once, so the other processes are not woken for it (they
        still find it at their next poll if that worker does not).
        """
        nid = uuid.uuid4().hex
        insert = (
            "INSERT INTO notifications(id, received_at, body, app, app_namespace, trigger, state, next_at)"
            " VALUES (?,?,?,?,?,?,'pending',?)"
        )
        row = (nid, received_at, json.dumps(body), app, app_namespace, trigger, received_at)
        try:
            if not key:
                # one statement in autocommit mode: its own transaction, committed (and on
                # PostgreSQL flushed) before it returns; one round trip where BEGIN/COMMIT were three
                self._x(self._conn(), insert, row)
            else:
                with self._tx() as db:
                    won = self._x(
                        db,
                        "INSERT INTO intake(key, notification_id, received_at) VALUES (?,?,?) ON CONFLICT(key) DO UPDATE"
                        " SET notification_id=excluded.notification_id, received_at=excluded.received_at"
                        " WHERE intake.received_at < ? RETURNING notification_id",
                        (key, nid, received_at, received_at - window),
                    ).fetchone()
                    if won is None:
                        seen = self._x(
                            db, "SELECT notification_id FROM intake WHERE key=?", (key,)
                        ).fetchone()
                        self.write_error = ""
                        return str(seen["notification_id"]), True
                    self._x(db, insert, row)
        except self.errors as exc:
            self.write_error = _reason(exc)
            raise StoreUnavailable(self.write_error) from exc
        self.write_error = ""
        if announce:
            self._queued()
        return nid, False

    def claim_notification(self, now: float | None = None) -> Claimed | None:
        now = time.time() if now is None else now
        row = self._claim(
            "notifications",
            "FROM notifications WHERE state='pending' AND next_at<=? AND lease_until<?",
            (now, now),
            "received_at",
        )
        return None if row is None else Claimed(row["id"], row)

    def finish_notification(
        self, nid: str, messages: list[dict[str, Any]], *, error: str = "", state: str = "done"
    ) -> int:
        """Mark a notification expanded (``done``, or ``dead`` after a fallback alert) and queue its messages, atomically."""
        return self.finish_and_claim(nid, messages, error=error, state=state, claim=frozenset())[0]

    def finish_and_claim(
        self,
        nid: str,
        messages: list[dict[str, Any]],
        *,
        claim: frozenset[str] | None = None,
        error: str = "",
        state: str = "done",
    ) -> tuple[int, list[Claimed]]:
        """``finish_notification``, and the new messages of the channels in ``claim`` queued already leased to us.

        The expanding replica sends them at once: the lease is written in the transaction that
        queues them (a crash before the send leaves a lease that runs out, as after any claim), so
        there is no second transaction per message between expansion and send. ``claim=None``:
        every channel. A message that already existed (a replayed expansion) is never leased here.
        """
        now = time.time()
        rows: list[dict[str, Any]] = []
        taken: set[str] = set()
        for m in messages:
            take = (claim is None or m["channel"] in claim) and m["channel"] not in taken
            if take:
                taken.add(m["channel"])
            rows.append(
                {
                    "id": hashlib.sha256(f"{nid}\0{m['channel']}\0{m['kind']}".encode()).hexdigest()[:32],
                    "notification_id": nid,
                    "channel": m["channel"],
                    "kind": m["kind"],
                    "app": m["app"],
                    "fingerprint": m["fingerprint"],
                    "payload": json.dumps(m["payload"]),
                    "state": "pending",
                    "attempts": 1 if take else 0,
                    "next_at": now,
                    "lease_until": now + self.lease if take else 0.0,
                    "owner": self.replica if take else "",
                    "created_at": now,
                    "received_at": m["received_at"],
                    "sent_at": None,
                    "last_error": "",
                }
            )
        columns = (
            "id, notification_id, channel, kind, app, fingerprint, payload, next_at, created_at, received_at,"
            " attempts, lease_until, owner"
        )
        with self._tx() as db:
            new: set[str] = set()
            if rows:
                # every message in one statement (one round trip); RETURNING names those that were new
                values = ",".join(["(?,?,?,?,?,?,?,?,?,?,?,?,?,'pending')"] * len(rows))
                params = [r[c.strip()] for r in rows for c in columns.split(",")]
                new = {
                    str(r["id"])
                    for r in self._x(
                        db,
                        f"INSERT INTO messages({columns}, state) VALUES {values}"  # noqa: S608 - placeholders only
                        " ON CONFLICT(id) DO NOTHING RETURNING id",
                        params,
                    ).fetchall()
                }
            self._x(
                db,
                "UPDATE notifications SET state=?, done_at=?, last_error=?, lease_until=0 WHERE id=?",
                (state, now, error[:500], nid),
            )
        queued = sum(1 for r in rows if r["id"] in new)
        leased = [Claimed(r["id"], r) for r in rows if r["id"] in new and r["owner"]]
        if queued > len(leased):
            self._queued()  # messages of channels busy here: another process may send them now
        return queued, leased

    def retry_notification(self, nid: str, *, delay: float, error: str) -> None:
        with self._tx() as db:
            self._x(
                db,
                "UPDATE notifications SET next_at=?, lease_until=0, last_error=? WHERE id=?",
                (time.time() + delay, error[:500], nid),
            )

    # --- messages -----------------------------------------------------------------------------------

    def claim_message(
        self, now: float | None = None, *, exclude_channels: frozenset[str] = frozenset()
    ) -> Claimed | None:
        """The oldest due message of a channel not in ``exclude_channels`` (those busy in this process).

        The exclusion is in the query, so a channel with a long backlog of due messages never hides
        the other channels' messages behind it.
        """
        now = time.time() if now is None else now
        cond, param = self._not_busy(exclude_channels)
        row = self._claim(
            "messages",
            f"FROM messages WHERE state='pending' AND next_at<=? AND lease_until<? AND {cond}",
            (now, now, param),
            "next_at, created_at",
        )
        return None if row is None else Claimed(row["id"], row)

    def delivered(self, msg: Claimed, *, state: str = "sent", error: str = "") -> float:
        """Mark sent (or ``unconfirmed``: sent, no answer), remember the fingerprint; seconds since the webhook."""
        now = time.time()
        row = msg.row
        latency = now - float(row["received_at"])
        with self._tx() as db:
            self._x(
                db,
                "UPDATE messages SET state=?, sent_at=?, lease_until=0, last_error=? WHERE id=?",
                (state, now, error[:500], msg.id),
            )
            if row["kind"] == "alert":
                self._x(
                    db,
                    "INSERT INTO sent(app, channel, fingerprint, sent_at) VALUES (?,?,?,?)"
                    " ON CONFLICT(app, channel, fingerprint) DO UPDATE SET sent_at=excluded.sent_at",
                    (row["app"], row["channel"], row["fingerprint"], now),
                )
        return latency

    def failed(
        self, msg: Claimed, *, error: str, delay: float | None, dead_after: float
    ) -> tuple[str, float]:
        """A failed attempt: retry after ``delay``, or dead-letter (permanent, or too old).

        The retry is never scheduled past the dead-letter window: the last try happens at its end.
        Returns the new state and the delay actually used.
        """
        now = time.time()
        row = msg.row
        deadline = float(row["created_at"]) + dead_after
        dead = delay is None or now >= deadline
        wait = 0.0 if dead or delay is None else min(delay, deadline - now)
        state = "dead" if dead else "pending"
        with self._tx() as db:
            self._x(
                db,
                "UPDATE messages SET state=?, next_at=?, lease_until=0, last_error=? WHERE id=?",
                (state, now + wait, error[:500], msg.id),
            )
        return state, wait

    # --- dedup and incidents (shared by every replica) --------------------------------------------------

    def recently_sent(self, app: str, channel: str, fingerprint: str, window: float) -> bool:
        row = self._x(
            self._conn(),
            "SELECT 1 AS hit FROM sent WHERE app=? AND channel=? AND fingerprint=? AND sent_at>? "
            "UNION SELECT 1 AS hit FROM messages WHERE app=? AND channel=? AND fingerprint=? AND kind='alert'"
            " AND state='pending'",
            (app, channel, fingerprint, time.time() - window, app, channel, fingerprint),
        ).fetchone()
        return row is not None

    def sent_recently(self, app: str, channels: list[str], fingerprint: str, window: float) -> set[str]:
        """``recently_sent`` for several channels in one query: those of ``channels`` that would repeat."""
        if not channels:
            return set()
        marks = ",".join("?" * len(channels))
        rows = self._x(
            self._conn(),
            f"SELECT channel FROM sent WHERE app=? AND fingerprint=? AND sent_at>? AND channel IN ({marks}) "  # noqa: S608 - placeholders only
            "UNION SELECT channel FROM messages WHERE app=? AND fingerprint=? AND kind='alert' AND state='pending'"
            f" AND channel IN ({marks})",
            (app, fingerprint, time.time() - window, *channels, app, fingerprint, *channels),
        ).fetchall()
        return {str(r["channel"]) for r in rows}

    def sent_in_episode(self, app: str, channels: list[str], fingerprint: str) -> set[str]:
        """Those of ``channels`` already told (or about to be told) of this drift in the app's open episode.

        No time limit: a standing drift is alerted once per episode (its ``sent`` rows live until
        ``close_incident``), a different fingerprint is new drift and alerts, and once the episode
        closed the same drift is a new one.
        """
        if not channels:
            return set()
        marks = ",".join("?" * len(channels))
        rows = self._x(
            self._conn(),
            f"SELECT channel FROM sent WHERE app=? AND fingerprint=? AND channel IN ({marks}) "  # noqa: S608 - placeholders only
            "UNION SELECT channel FROM messages WHERE app=? AND fingerprint=? AND kind='alert' AND state='pending'"
            f" AND channel IN ({marks})",
            (app, fingerprint, *channels, app, fingerprint, *channels),
        ).fetchall()
        return {str(r["channel"]) for r in rows}

    def open_incident(self, app: str, *, name: str, namespace: str, fingerprint: str) -> None:
        now = time.time()
        with self._tx() as db:
            self._x(
                db,
                "INSERT INTO incidents(app, app_name, app_namespace, fingerprint, opened_at, checked_at) VALUES (?,?,?,?,?,?) "
                "ON CONFLICT(app) DO UPDATE SET fingerprint=excluded.fingerprint, checked_at=excluded.checked_at",
                (app, name, namespace, fingerprint, now, now),
            )
            self._x(db, "DELETE FROM resolves WHERE app=?", (app,))  # the next resolve is a new one

    def incident(self, app: str) -> dict[str, Any] | None:
        row = self._x(self._conn(), "SELECT * FROM incidents WHERE app=?", (app,)).fetchone()
        return dict(row) if row else None

    def open_incidents(self, apps: list[str]) -> set[str]:
        """Which of ``apps`` (incident keys) are open, in one read."""
        if not apps:
            return set()
        marks = ",".join("?" * len(apps))
        rows = self._x(
            self._conn(),
            f"SELECT app FROM incidents WHERE app IN ({marks})",  # noqa: S608 - placeholders only
            tuple(apps),
        ).fetchall()
        return {str(r["app"]) for r in rows}

    def close_incident(self, app: str) -> bool:
        """Forget an app's open drift (and its dedup memory); True for the one caller that closed it.

        Two replicas resolving the same app race on this DELETE: exactly one sees a row deleted.
        """
        with self._tx() as db:
            cur = self._x(db, "DELETE FROM incidents WHERE app=?", (app,))
            self._x(db, "DELETE FROM sent WHERE app=?", (app,))
        return bool(cur.rowcount > 0)

    def claim_resolve(self, app: str, window: float) -> bool:
        """True once per app within ``window`` (until drift opens again): the replica that queues the resolve."""
        now = time.time()
        with self._tx() as db:
            cur = self._x(
                db,
                "INSERT INTO resolves(app, queued_at) VALUES (?,?) ON CONFLICT(app) DO UPDATE"
                " SET queued_at=excluded.queued_at WHERE resolves.queued_at < ?",
                (app, now, now - window),
            )
        return bool(cur.rowcount > 0)

    def open_episode(self, app: str, *, name: str, namespace: str) -> None:
        """The app was seen OutOfSync: re-check it until it is seen Synced (Argo CD will not fire again)."""
        now = time.time()
        with self._tx() as db:
            self._x(
                db,
                "INSERT INTO episodes(app, app_name, app_namespace, opened_at, checked_at) VALUES (?,?,?,?,?) "
                "ON CONFLICT(app) DO NOTHING",
                (app, name, namespace, now, now),
            )

    def close_episode(self, app: str) -> None:
        with self._tx() as db:
            self._x(db, "DELETE FROM episodes WHERE app=?", (app,))

    # --- singleton work ---------------------------------------------------------------------------------

    def due_rechecks(self, interval: float) -> list[dict[str, Any]]:
        """Open incidents and OutOfSync episodes not checked for ``interval`` seconds, each marked checked now.

        Runs in one replica at a time (the singleton lock); another asking meanwhile gets nothing.
        """
        now = time.time()
        due: dict[str, dict[str, Any]] = {}
        with self._tx() as db:
            if not self._singleton(db, LOCK_RECHECKS):
                return []
            # episodes before incidents, the order an expansion's transaction writes them in
            # (``unit``): the two never wait on each other's rows in a cycle
            for table in ("episodes", "incidents"):
                for r in self._x(
                    db,
                    f"SELECT app, app_name, app_namespace FROM {table} WHERE checked_at<=?",  # noqa: S608 - fixed names
                    (now - interval,),
                ).fetchall():
                    due.setdefault(r["app"], dict(r))
                self._x(db, f"UPDATE {table} SET checked_at=? WHERE checked_at<=?", (now, now - interval))  # noqa: S608
        return list(due.values())

    def sweep(self, *, dead_after: float, retention: float, windows: float) -> dict[str, int] | None:
        """The dead-letter sweeper and retention clean-up, in one replica at a time (None: another holds it).

        Dead-letters pending messages older than ``dead_after`` that nobody holds (a channel removed
        from the config, say); deletes finished work older than ``retention`` and idempotency keys,
        dedup memory and resolve records older than ``windows``, and identity records older than
        ``identity_retention`` (so the retention holds while no new record arrives to prune it).
        """
        now = time.time()
        with self._tx() as db:
            if not self._singleton(db, LOCK_SWEEP):
                return None
            dead = self._x(
                db,
                "UPDATE messages SET state='dead', last_error='not delivered within the dead-letter window', lease_until=0"
                " WHERE state='pending' AND created_at<? AND lease_until<?",
                (now - dead_after, now),
            ).rowcount
            old = now - retention
            removed = self._x(
                db,
                "DELETE FROM messages WHERE state IN ('sent','unconfirmed','dead') AND created_at<?",
                (old,),
            ).rowcount
            removed += self._x(
                db, "DELETE FROM notifications WHERE state IN ('done','dead') AND received_at<?", (old,)
            ).rowcount
            self._x(db, "DELETE FROM intake WHERE received_at<?", (now - windows,))
            # an open episode's dedup memory stays as long as the episode (close_incident drops it)
            self._x(
                db,
                "DELETE FROM sent WHERE sent_at<? AND app NOT IN (SELECT app FROM incidents)",
                (now - windows,),
            )
            self._x(db, "DELETE FROM resolves WHERE queued_at<?", (now - windows,))
            # the identity prune's own lock too: never two replicas deleting the same rows at once
            if self.identity_retention > 0 and self._singleton(db, LOCK_IDENTITY):
                self._x(db, "DELETE FROM identity_events WHERE at<?", (now - self.identity_retention,))
                self._x(db, "DELETE FROM admission_changes WHERE at<?", (now - self.identity_retention,))
        return {"dead": int(dead), "removed": int(removed)}

    # --- for operators and tests ---------------------------------------------------------------------

    def depth(self) -> dict[str, int]:
        db = self._conn()
        count = "SELECT count(*) AS n FROM "
        return {
            "notifications": int(self._x(db, count + "notifications WHERE state='pending'").fetchone()["n"]),
            "messages": int(self._x(db, count + "messages WHERE state='pending'").fetchone()["n"]),
            "dead": int(self._x(db, count + "messages WHERE state='dead'").fetchone()["n"]),
        }

    def messages(self, state: str | None = None) -> list[dict[str, Any]]:
        """Messages, oldest first."""
        if state:
            return self.query("SELECT * FROM messages WHERE state=? ORDER BY created_at", (state,))
        return self.query("SELECT * FROM messages ORDER BY created_at")

    def query(self, statement: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        """Run one statement (``?`` placeholders) in a transaction; its rows, if any (operators, tests).

        A SELECT is a plain read: on SQLite a write transaction would hold the file's write lock
        and make the notifier's own writers wait (a watcher polling the outbox slowed what it watched).
        """
        if statement.lstrip()[:6].upper() == "SELECT":
            cur = self._x(self._conn(), statement, params)
            return [dict(r) for r in cur.fetchall()]
        with self._tx() as db:
            cur = self._x(db, statement, params)
            return [dict(r) for r in cur.fetchall()] if cur.description else []


def _reason(exc: BaseException) -> str:
    """What the driver said, short (e.g. "database or disk is full"): no paths, no SQL, no DSN."""
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
