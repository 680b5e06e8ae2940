"""The store's public API: what every module that keeps a table in the notifier's store uses.

One SQLite file or one PostgreSQL database holds the outbox's tables (notifier/outbox/base.py),
the identity records (notifier/identity/store.py), the admission witness (notifier/identity/witness.py)
and the drift journal (notifier/journal/store.py). Their SQL is written once with ``?``
placeholders; a backend (sqlite.py, postgres.py) supplies connections, the transaction, the
placeholders' translation and the once-at-a-time lock. Those modules use only the public part:

- ``transaction()``: a write transaction, a :class:`Tx` (``execute``, ``execute_many``,
  ``singleton``); inside ``unit()`` it joins that one transaction (PostgreSQL);
- ``read()`` / ``read_one()``: a lone read on this thread's connection, rows as dicts;
- ``row_lock`` (appended to a read-modify-write's SELECT) and ``errors`` (the driver's errors).

The schema of every table is here (``MIGRATIONS``): versioned, forward-only, migrated at start-up
under a lock; a store whose version is newer than this code knows stops start-up.
"""

from __future__ import annotations

import os
import socket
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from driftguard.errors import ConfigError

__all__ = ["LOCK_IDENTITY", "LOCK_RECHECKS", "LOCK_SWEEP", "MIGRATIONS", "SCHEMA_VERSION", "Store", "Tx"]


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


class Tx:
    """One write transaction of the store, as the modules keeping a table in it write through it."""

    __slots__ = ("_db", "_store")

    def __init__(self, store: Store, db: Any) -> None:
        self._store = store
        self._db = db

    @property
    def row_lock(self) -> str:
        """Append to a read-modify-write's SELECT (PostgreSQL: ``FOR UPDATE``)."""
        return self._store.row_lock

    def execute(self, statement: str, params: tuple[Any, ...] | list[Any] = ()) -> Any:
        """One statement (``?`` placeholders); the driver's cursor (``fetchone``, ``fetchall``, ``rowcount``)."""
        return self._store._x(self._db, statement, params)

    def execute_many(self, statement: str, rows: list[tuple[Any, ...]]) -> int:
        """One statement over many parameter rows; rows changed in all."""
        return self._store._many(self._db, statement, rows)

    def singleton(self, name: str) -> bool:
        """True when this replica may run the once-at-a-time job ``name`` now (until the commit)."""
        return self._store._singleton(self._db, name)


class Store(ABC):
    """A SQL store: a backend supplies connections and locks, the public methods are what others use."""

    backend = ""
    setting = ""
    """The setting that selects and locates this store (named in start-up errors)."""
    errors: tuple[type[Exception], ...] = ()
    """The driver's errors: a write that raises one of these did not happen."""
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

    # --- the public API -------------------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[Tx]:
        """A write transaction (inside ``unit()``: that one), committed when the block ends without an error."""
        with self._tx() as db:
            yield Tx(self, db)

    def read(self, statement: str, params: tuple[Any, ...] | list[Any] = ()) -> list[dict[str, Any]]:
        """A lone read on this thread's connection: every row, as dicts."""
        return [dict(r) for r in self._x(self._conn(), statement, params).fetchall()]

    def read_one(self, statement: str, params: tuple[Any, ...] | list[Any] = ()) -> dict[str, Any] | None:
        """A lone read: the first row, or None."""
        row = self._x(self._conn(), statement, params).fetchone()
        return dict(row) if row is not None else None

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
            self.write_error = driver_reason(exc)
            return False
        self.write_error = ""
        return True

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


def driver_reason(exc: BaseException) -> str:
    """What the driver said, short (e.g. "database or disk is full"): no paths, no SQL, no DSN."""
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
