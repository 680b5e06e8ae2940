"""The durable outbox: SQLite in WAL mode, safe for several gunicorn workers and a kill -9.

Tables: ``notifications`` (stored before the 202), ``messages`` (one per channel, each delivered
and retried on its own; its id is derived from the notification and the channel, so a replayed
expansion cannot queue it twice), ``sent`` (fingerprints for the dedup window), ``incidents``
(apps with open drift: re-checked, resolved when back in sync) and ``episodes`` (apps last seen
OutOfSync and not Synced since: re-checked too, because Argo CD fires its trigger once per
episode). Metrics live in prometheus-client (notifier/metrics.py), not here. Work is claimed with a lease inside ``BEGIN
IMMEDIATE`` transactions: a crashed worker's lease runs out and another process takes the work.

Start-up: gunicorn's workers open the file at the same moment. Switching a fresh file to WAL is
not covered by SQLite's busy timeout (two connections that both read the header and then both
ask for the exclusive lock: one gets "database is locked" at once), which made a worker fail to
boot and gunicorn halt. So the schema and the journal mode are set once, under an exclusive
``flock`` on ``<outbox>.lock`` beside the file; WAL is a property of the file, so the per-thread
connections opened later never touch the journal mode again.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from driftguard.errors import ConfigError

__all__ = ["Claimed", "Outbox"]

# readiness writes a row about the size of a large notification: a full disk fails it as it fails them
_PROBE = b"\0" * 65536

SCHEMA = """
CREATE TABLE IF NOT EXISTS notifications (
    id TEXT PRIMARY KEY, received_at REAL NOT NULL, body TEXT NOT NULL, app TEXT NOT NULL, app_namespace TEXT NOT NULL,
    trigger TEXT NOT NULL, state TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, next_at REAL NOT NULL,
    lease_until REAL NOT NULL DEFAULT 0, last_error TEXT NOT NULL DEFAULT '', done_at REAL);
CREATE INDEX IF NOT EXISTS notifications_due ON notifications(state, next_at);
CREATE TABLE IF NOT EXISTS messages (
    id TEXT PRIMARY KEY, notification_id TEXT NOT NULL, channel TEXT NOT NULL, kind TEXT NOT NULL, app TEXT NOT NULL,
    fingerprint TEXT NOT NULL, payload TEXT NOT NULL, state TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
    next_at REAL NOT NULL, lease_until REAL NOT NULL DEFAULT 0, created_at REAL NOT NULL, received_at REAL NOT NULL,
    sent_at REAL, last_error TEXT NOT NULL DEFAULT '');
CREATE INDEX IF NOT EXISTS messages_due ON messages(state, next_at);
CREATE TABLE IF NOT EXISTS sent (app TEXT NOT NULL, channel TEXT NOT NULL, fingerprint TEXT NOT NULL, sent_at REAL NOT NULL,
    PRIMARY KEY (app, channel, fingerprint));
CREATE TABLE IF NOT EXISTS incidents (app TEXT PRIMARY KEY, app_name TEXT NOT NULL, app_namespace TEXT NOT NULL,
    fingerprint TEXT NOT NULL, opened_at REAL NOT NULL, checked_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS episodes (app TEXT PRIMARY KEY, app_name TEXT NOT NULL, app_namespace TEXT NOT NULL,
    opened_at REAL NOT NULL, checked_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS metrics (name TEXT NOT NULL, labels TEXT NOT NULL, value REAL NOT NULL, PRIMARY KEY (name, labels));
"""


@dataclass(frozen=True)
class Claimed:
    """A row this process holds a lease on."""

    id: str
    row: dict[str, Any]


class Outbox:
    """One SQLite file; a connection per thread."""

    def __init__(self, path: Path, *, lease: float = 60.0) -> None:
        self.path = Path(path)
        self.lease = lease
        self._local = threading.local()
        self.write_error = ""
        """This process's last failed write of accepted work ("" once one succeeds): /readyz reports it."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.with_name(self.path.name + ".lock").open("a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, even on error
                db = self._db()
                mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise ConfigError(
                        "DRIFTGUARD_NOTIFIER_OUTBOX",
                        f"{self.path}: SQLite would not use WAL (journal mode {mode!r}); put the outbox on a local volume",
                    )
                db.executescript(SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(
                "DRIFTGUARD_NOTIFIER_OUTBOX",
                f"{self.path} cannot be used as the outbox ({exc}); it needs a writable local volume",
            ) from exc

    def _db(self) -> sqlite3.Connection:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=True)
            db.row_factory = sqlite3.Row
            db.execute("PRAGMA busy_timeout=30000")
            db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable across process crashes
            self._local.db = db
        return db

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        db = self._db()
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def writable(self) -> bool:
        """Readiness: the file takes a write the size of a large notification (and so clears ``write_error``)."""
        try:
            with self._tx() as db:
                db.execute(
                    "INSERT OR REPLACE INTO metrics(name, labels, value) VALUES ('driftguard_notifier_ready_probe', ?, ?)",
                    (_PROBE, time.time()),
                )
            with self._tx() as db:
                db.execute("DELETE FROM metrics WHERE name='driftguard_notifier_ready_probe'")
        except sqlite3.Error as exc:
            self.write_error = _reason(exc)
            return False
        self.write_error = ""
        return True

    # --- notifications ------------------------------------------------------------------------------

    def add_notification(
        self, body: dict[str, Any], *, app: str, app_namespace: str, trigger: str, received_at: float
    ) -> str:
        """Store a notification (before answering 202); its id."""
        nid = uuid.uuid4().hex
        try:
            with self._tx() as db:
                db.execute(
                    "INSERT INTO notifications(id, received_at, body, app, app_namespace, trigger, state, next_at) VALUES (?,?,?,?,?,?,'pending',?)",
                    (nid, received_at, json.dumps(body), app, app_namespace, trigger, received_at),
                )
        except sqlite3.Error as exc:
            self.write_error = _reason(exc)
            raise
        self.write_error = ""
        return nid

    def claim_notification(self, now: float | None = None) -> Claimed | None:
        now = time.time() if now is None else now
        with self._tx() as db:
            row = db.execute(
                "SELECT * FROM notifications WHERE state='pending' AND next_at<=? AND lease_until<? ORDER BY received_at LIMIT 1",
                (now, now),
            ).fetchone()
            if row is None:
                return None
            db.execute(
                "UPDATE notifications SET lease_until=?, attempts=attempts+1 WHERE id=?",
                (now + self.lease, row["id"]),
            )
        return Claimed(row["id"], {**dict(row), "attempts": int(row["attempts"]) + 1})  # this one included

    def finish_notification(
        self, nid: str, messages: list[dict[str, Any]], *, error: str = "", state: str = "done"
    ) -> int:
        """Mark a notification expanded (``done``, or ``dead`` after a fallback alert) and queue its messages, atomically."""
        now = time.time()
        queued = 0
        with self._tx() as db:
            for m in messages:
                mid = hashlib.sha256(f"{nid}\0{m['channel']}\0{m['kind']}".encode()).hexdigest()[:32]
                cur = db.execute(
                    "INSERT OR IGNORE INTO messages(id, notification_id, channel, kind, app, fingerprint, payload, state, next_at, created_at, received_at)"
                    " VALUES (?,?,?,?,?,?,?,'pending',?,?,?)",
                    (
                        mid,
                        nid,
                        m["channel"],
                        m["kind"],
                        m["app"],
                        m["fingerprint"],
                        json.dumps(m["payload"]),
                        now,
                        now,
                        m["received_at"],
                    ),
                )
                queued += cur.rowcount
            db.execute(
                "UPDATE notifications SET state=?, done_at=?, last_error=?, lease_until=0 WHERE id=?",
                (state, now, error[:500], nid),
            )
        return queued

    def retry_notification(self, nid: str, *, delay: float, error: str) -> None:
        with self._tx() as db:
            db.execute(
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
        busy = json.dumps(sorted(exclude_channels))
        with self._tx() as db:
            row = db.execute(
                "SELECT * FROM messages WHERE state='pending' AND next_at<=? AND lease_until<?"
                " AND channel NOT IN (SELECT value FROM json_each(?)) ORDER BY next_at, created_at LIMIT 1",
                (now, now, busy),
            ).fetchone()
            if row is None:
                return None
            db.execute(
                "UPDATE messages SET lease_until=?, attempts=attempts+1 WHERE id=?",
                (now + self.lease, row["id"]),
            )
        return Claimed(row["id"], {**dict(row), "attempts": int(row["attempts"]) + 1})  # this one included

    def delivered(self, msg: Claimed, *, state: str = "sent", error: str = "") -> float:
        """Mark sent (or ``unconfirmed``: sent, no answer), remember the fingerprint; seconds since the webhook."""
        now = time.time()
        row = msg.row
        latency = now - float(row["received_at"])
        with self._tx() as db:
            db.execute(
                "UPDATE messages SET state=?, sent_at=?, lease_until=0, last_error=? WHERE id=?",
                (state, now, error[:500], msg.id),
            )
            if row["kind"] == "alert":
                db.execute(
                    "INSERT OR REPLACE INTO sent(app, channel, fingerprint, sent_at) VALUES (?,?,?,?)",
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
            db.execute(
                "UPDATE messages SET state=?, next_at=?, lease_until=0, last_error=? WHERE id=?",
                (state, now + wait, error[:500], msg.id),
            )
        return state, wait

    # --- dedup and incidents --------------------------------------------------------------------------

    def recently_sent(self, app: str, channel: str, fingerprint: str, window: float) -> bool:
        row = (
            self._db()
            .execute(
                "SELECT 1 FROM sent WHERE app=? AND channel=? AND fingerprint=? AND sent_at>? "
                "UNION SELECT 1 FROM messages WHERE app=? AND channel=? AND fingerprint=? AND kind='alert' AND state='pending'",
                (app, channel, fingerprint, time.time() - window, app, channel, fingerprint),
            )
            .fetchone()
        )
        return row is not None

    def open_incident(self, app: str, *, name: str, namespace: str, fingerprint: str) -> None:
        now = time.time()
        with self._tx() as db:
            db.execute(
                "INSERT INTO incidents(app, app_name, app_namespace, fingerprint, opened_at, checked_at) VALUES (?,?,?,?,?,?) "
                "ON CONFLICT(app) DO UPDATE SET fingerprint=excluded.fingerprint, checked_at=excluded.checked_at",
                (app, name, namespace, fingerprint, now, now),
            )

    def incident(self, app: str) -> dict[str, Any] | None:
        row = self._db().execute("SELECT * FROM incidents WHERE app=?", (app,)).fetchone()
        return dict(row) if row else None

    def close_incident(self, app: str) -> bool:
        """Forget an app's open drift (and its dedup memory, so new drift alerts at once)."""
        with self._tx() as db:
            cur = db.execute("DELETE FROM incidents WHERE app=?", (app,))
            db.execute("DELETE FROM sent WHERE app=?", (app,))
        return cur.rowcount > 0

    def open_episode(self, app: str, *, name: str, namespace: str) -> None:
        """The app was seen OutOfSync: re-check it until it is seen Synced (Argo CD will not fire again)."""
        now = time.time()
        with self._tx() as db:
            db.execute(
                "INSERT INTO episodes(app, app_name, app_namespace, opened_at, checked_at) VALUES (?,?,?,?,?) "
                "ON CONFLICT(app) DO NOTHING",
                (app, name, namespace, now, now),
            )

    def close_episode(self, app: str) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM episodes WHERE app=?", (app,))

    def due_rechecks(self, interval: float) -> list[dict[str, Any]]:
        """Open incidents and OutOfSync episodes not checked for ``interval`` seconds, each marked checked now."""
        now = time.time()
        due: dict[str, dict[str, Any]] = {}
        with self._tx() as db:
            for table in ("incidents", "episodes"):
                for r in db.execute(
                    f"SELECT app, app_name, app_namespace FROM {table} WHERE checked_at<=?",  # noqa: S608 - fixed names
                    (now - interval,),
                ).fetchall():
                    due.setdefault(r["app"], dict(r))
                db.execute(f"UPDATE {table} SET checked_at=? WHERE checked_at<=?", (now, now - interval))  # noqa: S608
        return list(due.values())

    def depth(self) -> dict[str, int]:
        db = self._db()
        return {
            "notifications": db.execute(
                "SELECT count(*) FROM notifications WHERE state='pending'"
            ).fetchone()[0],
            "messages": db.execute("SELECT count(*) FROM messages WHERE state='pending'").fetchone()[0],
            "dead": db.execute("SELECT count(*) FROM messages WHERE state='dead'").fetchone()[0],
        }

    def messages(self, state: str | None = None) -> list[dict[str, Any]]:
        """Messages (for operators and tests), oldest first."""
        if state:
            rows = self._db().execute("SELECT * FROM messages WHERE state=? ORDER BY created_at", (state,))
        else:
            rows = self._db().execute("SELECT * FROM messages ORDER BY created_at")
        return [dict(r) for r in rows]

    def close(self) -> None:
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None


def _reason(exc: BaseException) -> str:
    """What SQLite said, short (e.g. "database or disk is full"): no paths, no SQL."""
    return f"{type(exc).__name__}: {exc}"[:200]
