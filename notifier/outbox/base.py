"""The outbox interface: the alert path's queries, written once for SQLite and PostgreSQL.

Tables: ``notifications`` (stored before the 202), ``messages`` (one per channel, each delivered
and retried on its own; its id is derived from the notification and the channel, so a replayed
expansion cannot queue it twice), ``sent`` (fingerprints for the dedup window), ``incidents``
(apps with open drift: re-checked, resolved when back in sync), ``episodes`` (apps last seen
OutOfSync and not Synced since: re-checked too, because Argo CD fires its trigger once per
episode), ``intake`` (idempotency keys of received notifications), ``resolves`` (the last
resolve queued per app). The same store holds issue 21's ``identity_events`` (notifier/identity.py)
and ``drift_journal`` (notifier/journal/store.py), written through the public API of
``store.py``. All of it lives in the store, so every replica shares the dedup memory, the open
incidents, the identity records and the journal.

Work is claimed with a lease (``lease_until``, ``owner``): a crashed process's lease runs out and
another takes the work. A backend supplies the transaction, the row lock of a claim (PostgreSQL:
``FOR UPDATE SKIP LOCKED``; SQLite: ``BEGIN IMMEDIATE`` already serialises writers) and the
singleton lock for the re-check scheduler and the sweeper (PostgreSQL: a transaction-level
advisory lock). The schema of every table is in ``store.py`` (``MIGRATIONS``).
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from abc import abstractmethod
from dataclasses import dataclass
from typing import Any

from driftguard.errors import StoreUnavailable
from notifier.outbox.store import (
    LOCK_IDENTITY,
    LOCK_RECHECKS,
    LOCK_SWEEP,
    MIGRATIONS,
    SCHEMA_VERSION,
    Store,
    driver_reason,
)

__all__ = ["LOCK_IDENTITY", "MIGRATIONS", "SCHEMA_VERSION", "Claimed", "Outbox"]


@dataclass(frozen=True)
class Claimed:
    """A row this process holds a lease on."""

    id: str
    row: dict[str, Any]


class Outbox(Store):
    """The store of accepted work; the SQL is shared, a backend supplies connections and locks."""

    lock_clause = ""
    """Appended to a claim's SELECT (PostgreSQL: ``FOR UPDATE SKIP LOCKED``)."""

    @abstractmethod
    def _not_busy(self, channels: frozenset[str]) -> tuple[str, Any]:
        """A condition on ``channel`` excluding ``channels``, and its parameter."""

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
            self.write_error = driver_reason(exc)
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
