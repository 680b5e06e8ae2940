"""The identity store: audit and admission records of who wrote what, kept for a retention window.

Its own table, ``identity_events``, in the outbox's store: the SQLite file or the PostgreSQL
database the replicas share (schema version 3 of notifier/outbox/store.py ``MIGRATIONS``). The SQL
is written once, as the outbox's is; the outbox backend supplies the transaction, the ``?``
placeholders' translation and the singleton lock. So an audit batch received by one replica is
joined into an alert another replica sends. :class:`~driftguard.identity.IdentityStore` is the
interface; the join itself (``attribute``) lives in driftguard/identity.py, so the drift gate can
use it too.

Bounded under an event storm: every string is capped when parsed (driftguard/identity.py), so a
row is at most a few KB, and the table holds at most ``max_rows`` rows *per source* (the oldest of
that source go first: a flood of admission reviews can never evict the audit records, nor the
reverse; issue 31) and none older than ``retention`` (pruned here after writes, and by the outbox's sweeper while none
arrive). The prune runs in one replica at a time (the outbox's singleton lock: a PostgreSQL
advisory lock), so replicas under the same storm never delete the same rows at once. A resent
audit batch is stored once (unique on source and event id).
"""

from __future__ import annotations

import contextlib
import json
import queue
import threading
import time
from collections.abc import Iterable
from typing import Any

from driftguard.errors import StoreUnavailable
from driftguard.identity import IdentityEvent, IdentityStore, attribute
from notifier.outbox.store import LOCK_IDENTITY, Store

__all__ = ["SOURCES", "IdentityStore", "OutboxIdentityStore", "Recorder", "attribute"]

SOURCES = ("audit", "admission")
"""Every ``source`` a record may have (driftguard/identity.py): each is bounded on its own."""

_COLUMNS = (
    'source, event_id, at, "user", verb, api_group, resource, kind, namespace, name, uid, resource_version,'
    ' subresource, field_manager, user_agent, "groups", source_ips, impersonated, stage, received_at, stored_at'
)


class OutboxIdentityStore:
    """:class:`IdentityStore` in the outbox's store (SQLite or PostgreSQL)."""

    def __init__(self, outbox: Store, *, retention: float = 86400.0, max_rows: int = 100_000) -> None:
        self.outbox = outbox
        self.retention = retention
        self.max_rows = max_rows
        self._pruned_at = 0.0
        self._since_prune = 0
        outbox.identity_retention = retention  # the sweeper's time bound

    def add(self, events: Iterable[IdentityEvent]) -> int:
        """Store records (a resent one is ignored) and prune to the bounds; how many were new.

        Raises ``StoreUnavailable`` when the store cannot be written (nothing of the batch stored).
        """
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
        ox = self.outbox
        try:
            with ox.transaction() as tx:
                added = tx.execute_many(
                    f"INSERT INTO identity_events({_COLUMNS}) VALUES ({','.join('?' * 21)})"  # noqa: S608 - fixed text
                    " ON CONFLICT(source, event_id) DO NOTHING",
                    rows,
                )
        except ox.errors as exc:
            raise StoreUnavailable(f"the identity store cannot be written ({type(exc).__name__})") from exc
        self._since_prune += added
        # counting a 100,000-row table on every write would cost the admission answer milliseconds:
        # prune once a second, or at once when a batch could take the table far past its bound
        if now - self._pruned_at >= 1.0 or self._since_prune >= max(1, self.max_rows // 10):
            with contextlib.suppress(
                *ox.errors
            ):  # the batch is stored; the next write (or the sweeper) prunes
                self.prune(now)
        return added

    def prune(self, now: float | None = None) -> bool:
        """Delete records past the retention, then the oldest beyond ``max_rows``; False when another replica is at it."""
        now = time.time() if now is None else now
        ox = self.outbox
        self._pruned_at, self._since_prune = now, 0
        with ox.transaction() as tx:
            if not tx.singleton(LOCK_IDENTITY):
                return False
            tx.execute("DELETE FROM identity_events WHERE at<?", (now - self.retention,))
            for source in SOURCES:  # each source within its own bound: one cannot evict the other
                count = tx.execute(
                    "SELECT count(*) AS n FROM identity_events WHERE source=?", (source,)
                ).fetchone()["n"]
                excess = int(count) - self.max_rows
                if excess > 0:
                    tx.execute(
                        "DELETE FROM identity_events WHERE source=? AND event_id IN"
                        " (SELECT event_id FROM identity_events WHERE source=? ORDER BY at LIMIT ?)",
                        (source, source, excess),
                    )
        return True

    def candidates(self, *, namespace: str, name: str, uid: str) -> list[IdentityEvent]:
        cutoff = time.time() - self.retention
        rows = self.outbox.read(
            f"SELECT {_COLUMNS} FROM identity_events WHERE ((namespace=? AND name=?) OR (uid<>'' AND uid=?))"  # noqa: S608
            " AND at>=? ORDER BY at DESC LIMIT 500",
            (namespace, name, uid, cutoff),
        )
        return [_event(r) for r in rows]

    def count(self) -> int:
        row = self.outbox.read_one("SELECT count(*) AS n FROM identity_events")
        return int(row["n"]) if row else 0


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
            except StoreUnavailable:
                outcome = "unavailable"
            if self.on_result is not None:
                self.on_result(outcome, len(batch))
            for _ in batch:
                self._queue.task_done()


def _event(d: dict[str, Any]) -> IdentityEvent:
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
