"""The shared outbox: PostgreSQL, for several active-active replicas (``DRIFTGUARD_NOTIFIER_DATABASE_URL``).

Every replica accepts webhooks and delivers. A claim is ``SELECT ... FOR UPDATE SKIP LOCKED``
then a lease in the same transaction: two replicas never take the same row, and a crashed
replica's rows are taken by another once its lease has run out. The re-check scheduler and the
sweeper (dead letters, retention) take a transaction-level advisory lock
(``pg_try_advisory_xact_lock``): one replica at a time runs them, the others skip that round, and
a crashed holder's lock goes with its connection. The schema is migrated at start-up inside one
transaction under ``pg_advisory_xact_lock``, so replicas starting together migrate it once.

The URL is handed to libpq as it is: ``sslmode``, ``sslrootcert``, ``sslcert`` and the other TLS
options pass through, and so do libpq's ``PG*`` variables (``PGPASSWORD`` from a Secret). We only
add defaults it lacks: a 3 s connect timeout and TCP keepalives, so a database that went away
fails fast (webhooks answer 503, /readyz turns not ready) instead of hanging a worker. Each thread
keeps one connection and opens a new one after the old one broke, so delivery resumes by itself
when the database is back.

Commits and round trips (the latency path, docs/architecture.md): the intake of a notification
without an idempotency key is one autocommit INSERT (one round trip, flushed before the 202);
a claim is one autocommit ``UPDATE ... WHERE id=(SELECT ... FOR UPDATE SKIP LOCKED) RETURNING *``
on a second connection per thread whose session has ``synchronous_commit=off`` (only leases are
written there: a lease lost in a database crash makes the row claimable again, never loses it);
everything one expansion writes is one transaction (``unit``), one synchronous commit; a
thread's first connection is taken from those ``warm`` opened ahead when there is one.

Wake-ups: a webhook wakes its own process's delivery loop; only when that loop is busy expanding
(a burst) does it send ``NOTIFY driftguard_notifier_work``, and so does a replica that queued
messages it cannot send at once. Every replica's delivery loop LISTENs on a connection of its own
and looks at once, instead of at its next poll (0.2 s). (Notifying for every webhook woke all the
loops of all replicas to race for one row, which on a small node slowed the one that won.) The
poll stays as the safety net: a lost notification or a listener reconnecting delays work by one
poll, never loses it.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import dict_row

from driftguard.errors import ConfigError
from notifier.outbox.base import Outbox

__all__ = ["PostgresOutbox", "describe"]

SETTING = "DRIFTGUARD_NOTIFIER_DATABASE_URL"
CHANNEL = "driftguard_notifier_work"
"""The LISTEN/NOTIFY channel: a replica that stored work wakes the others' delivery loops at once."""
_DEFAULTS = {
    "connect_timeout": "3",
    "application_name": "driftguard-notifier",
    "keepalives": "1",
    "keepalives_idle": "10",
    "keepalives_interval": "5",
    "keepalives_count": "3",
}


def _key(name: str) -> int:
    """A stable signed 64-bit advisory-lock key for a job name."""
    return int.from_bytes(
        hashlib.sha256(f"driftguard-notifier:{name}".encode()).digest()[:8], "big", signed=True
    )


def describe(url: str) -> str:
    """host:port/dbname of a URL, for logs and errors (never the user or password)."""
    try:
        p = conninfo_to_dict(url)
    except psycopg.Error:
        return "(unparsable URL)"
    return f"{p.get('host', 'localhost')}:{p.get('port', '5432')}/{p.get('dbname', '')}"


class PostgresOutbox(Outbox):
    """A PostgreSQL database shared by every replica; a connection per thread."""

    backend = "postgresql"
    setting = SETTING
    errors = (psycopg.Error,)
    lock_clause = " FOR UPDATE SKIP LOCKED"
    row_lock = " FOR UPDATE"

    def __init__(self, url: str, *, lease: float = 60.0, connect_wait: float = 10.0) -> None:
        super().__init__(lease=lease)
        try:
            params = conninfo_to_dict(url)
        except psycopg.Error:
            # the driver's message may quote the URL, password included: say only what to fix
            raise ConfigError(
                SETTING, "is not a valid PostgreSQL URL (postgresql://user@host:5432/db?sslmode=...)"
            ) from None
        for k, v in _DEFAULTS.items():
            params.setdefault(k, v)
        self._conninfo = make_conninfo("", **params)
        # the claims' connection: the caller's own ``options`` kept, ours appended (libpq takes the last)
        options = f"{params.get('options', '')} -c synchronous_commit=off".strip()
        self._lease_conninfo = make_conninfo("", **{**params, "options": options})
        self.where = describe(url)
        self._local = threading.local()
        self._spares: list[psycopg.Connection[Any]] | None = []
        """Connections opened ahead by ``warm`` for threads that have none yet (None once closed)."""
        self._spares_lock = threading.Lock()
        self._listener: threading.Thread | None = None
        self._unlisten = threading.Event()
        deadline = time.monotonic() + connect_wait
        while True:
            try:
                with self._tx() as db:
                    db.execute("SELECT pg_advisory_xact_lock(%s)", (_key("schema"),))
                    self._migrate(db)
                break
            except psycopg.OperationalError as exc:
                if time.monotonic() >= deadline:
                    raise ConfigError(
                        SETTING, f"cannot reach the outbox database {self.where} ({_short(exc)})"
                    ) from None
                time.sleep(0.5)
            except psycopg.Error as exc:
                raise ConfigError(
                    SETTING, f"the outbox database {self.where} cannot be used ({_short(exc)})"
                ) from None

    def _sql(self, statement: str) -> str:
        return _translate(statement)

    def _conn(self) -> psycopg.Connection[Any]:
        conn: psycopg.Connection[Any] | None = getattr(self._local, "db", None)
        if conn is None or conn.closed or conn.broken:
            if conn is not None:
                conn.close()
                self._drop_spares()  # the server may have gone away, and the spares' sessions with it
            self._local.db = None
            conn = self._spare() or psycopg.connect(self._conninfo, autocommit=True, row_factory=dict_row)
            self._local.db = conn
        return conn

    def warm(self, connections: int) -> None:
        # A connection costs a server process fork and a start-up exchange, milliseconds on a busy
        # node: opened here, in the background, a thread's first statement (the first webhook on a
        # gunicorn thread, a channel's first sent mark) takes one instead of connecting on its path.
        if connections > 0:
            threading.Thread(
                target=self._open_spares, args=(connections,), name="driftguard-pg-warm", daemon=True
            ).start()

    def _open_spares(self, connections: int) -> None:
        for _ in range(connections):
            try:
                conn = psycopg.connect(self._conninfo, autocommit=True, row_factory=dict_row)
            except psycopg.Error:
                return  # the database is away: threads connect when they need to
            with self._spares_lock:
                if self._spares is None:  # closed meanwhile
                    conn.close()
                    return
                self._spares.append(conn)

    def _spare(self) -> psycopg.Connection[Any] | None:
        with self._spares_lock:
            while self._spares:
                conn = self._spares.pop()
                if not conn.closed and not conn.broken:
                    return conn
                conn.close()
        return None

    def _drop_spares(self, *, closing: bool = False) -> None:
        with self._spares_lock:
            spares, self._spares = self._spares or [], None if closing else []
        for conn in spares:
            conn.close()

    @contextmanager
    def _tx(self) -> Iterator[psycopg.Connection[Any]]:
        unit: contextlib.ExitStack | None = getattr(self._local, "unit", None)
        if unit is not None:
            # inside ``unit()``: its transaction, begun by its first write, committed once at its end
            if self._local.unit_conn is None:
                conn = self._conn()
                unit.enter_context(conn.transaction())
                self._local.unit_conn = conn
            yield self._local.unit_conn
            return
        conn = self._conn()
        with conn.transaction():
            yield conn

    @contextmanager
    def unit(self) -> Iterator[None]:
        if getattr(self._local, "unit", None) is not None:
            yield
            return
        self._local.announce = False
        self._local.unit_conn = None
        try:
            with contextlib.ExitStack() as stack:  # its exit commits (or rolls back) what was begun
                self._local.unit = stack
                try:
                    yield
                finally:
                    self._local.unit = None
            if self._local.announce:
                self._queued()  # after the commit, as everywhere (see ``_queued``)
        finally:
            self._local.announce = False
            self._local.unit_conn = None

    def _lease_conn(self) -> psycopg.Connection[Any]:
        """This thread's second connection, for claims: ``synchronous_commit=off`` for its whole session."""
        conn: psycopg.Connection[Any] | None = getattr(self._local, "lease_db", None)
        if conn is None or conn.closed or conn.broken:
            if conn is not None:
                conn.close()
            self._local.lease_db = None
            conn = psycopg.connect(self._lease_conninfo, autocommit=True, row_factory=dict_row)
            self._local.lease_db = conn
        return conn

    def _claim(self, table: str, due: str, params: tuple[Any, ...], order: str) -> dict[str, Any] | None:
        # One autocommit statement on the lease connection: one round trip whether there is work or
        # not (an idle poll's UPDATE changes nothing: no transaction id, no WAL). SKIP LOCKED in the
        # subquery: two replicas never take the same row and never wait on each other's. The
        # connection's commits skip the WAL flush: lost in a database crash, a lease only makes
        # the row claimable again (at-least-once holds); nothing accepted or queued is written
        # there. RETURNING gives the row as leased.
        row = (
            self._lease_conn()
            .execute(
                self._sql(
                    f"UPDATE {table} SET lease_until=?, attempts=attempts+1, owner=? WHERE id=("  # noqa: S608 - fixed names
                    f"SELECT id {due} ORDER BY {order} LIMIT 1{self.lock_clause}) RETURNING *"
                ),
                (params[0] + self.lease, self.replica, *params),
            )
            .fetchone()
        )
        return dict(row) if row is not None else None

    def _queued(self) -> None:
        # after the commit, in a statement of its own: NOTIFY inside the intake transaction would
        # hold PostgreSQL's global notify lock through that commit's WAL flush, one intake at a time
        if getattr(self._local, "unit_conn", None) is not None:
            self._local.announce = True  # inside ``unit()``'s transaction: sent once it has committed
            return
        with contextlib.suppress(psycopg.Error):  # the work is stored; the others find it by polling
            self._conn().execute("SELECT pg_notify(%s, '')", (CHANNEL,))

    def listen(self, wake: Callable[[], object]) -> None:
        if self._listener is None or not self._listener.is_alive():
            self._unlisten.clear()
            self._listener = threading.Thread(
                target=self._listen, args=(wake,), name="driftguard-listen", daemon=True
            )
            self._listener.start()

    def unlisten(self) -> None:
        self._unlisten.set()
        if self._listener is not None:
            self._listener.join(5.0)
            self._listener = None

    def _listen(self, wake: Callable[[], object]) -> None:
        """One connection of its own that LISTENs; reconnects after the database went away."""
        while not self._unlisten.is_set():
            try:
                with psycopg.connect(self._conninfo, autocommit=True) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    wake()  # whatever was queued while nobody here listened
                    while not self._unlisten.is_set():
                        for _ in conn.notifies(timeout=1.0):
                            wake()
            except psycopg.Error:
                self._unlisten.wait(1.0)  # down: polling goes on meanwhile, and so does this, each second

    def _singleton(self, db: Any, name: str) -> bool:
        row = db.execute("SELECT pg_try_advisory_xact_lock(%s) AS ok", (_key(name),)).fetchone()
        return bool(row["ok"])

    def _not_busy(self, channels: frozenset[str]) -> tuple[str, Any]:
        return "NOT (channel = ANY(?::text[]))", sorted(channels)

    def _probe(self) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT INTO metrics(name, labels, value) VALUES ('driftguard_notifier_ready_probe', %s, %s)"
                " ON CONFLICT (name, labels) DO UPDATE SET value=excluded.value",
                (self.replica, time.time()),
            )
            db.execute(
                "DELETE FROM metrics WHERE name='driftguard_notifier_ready_probe' AND labels=%s",
                (self.replica,),
            )

    def close(self) -> None:
        self._drop_spares(closing=True)
        for name in ("db", "lease_db"):
            conn = getattr(self._local, name, None)
            if conn is not None:
                conn.close()
                setattr(self._local, name, None)


@functools.lru_cache(maxsize=512)
def _translate(statement: str) -> str:
    """The shared SQL in PostgreSQL's dialect (``?`` -> ``%s``, REAL -> DOUBLE PRECISION), once per statement text."""
    return re.sub(r"\bREAL\b", "DOUBLE PRECISION", statement).replace("?", "%s")


def _short(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
