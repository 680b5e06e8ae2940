"""The embedded outbox: one SQLite file in WAL mode, safe for several gunicorn workers and a kill -9.

For one replica (a ReadWriteOnce volume). ``BEGIN IMMEDIATE`` serialises every writer on the file,
so a claim needs no row lock and the singleton jobs need no lock of their own.

Start-up: gunicorn's workers open the file at the same moment. Switching a fresh file to WAL is
not covered by SQLite's busy timeout (two connections that both read the header and then both
ask for the exclusive lock: one gets "database is locked" at once), which made a worker fail to
boot and gunicorn halt. So the schema (migrations included) and the journal mode are set once,
under an exclusive ``flock`` on ``<outbox>.lock`` beside the file; WAL is a property of the file,
so the per-thread connections opened later never touch the journal mode again.
"""

from __future__ import annotations

import fcntl
import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from driftguard.errors import ConfigError
from notifier.outbox.base import Outbox

__all__ = ["SqliteOutbox"]

# readiness writes a row about the size of a large notification: a full disk fails it as it fails them
_PROBE = b"\0" * 65536


class SqliteOutbox(Outbox):
    """One SQLite file; a connection per thread."""

    backend = "sqlite"
    setting = "DRIFTGUARD_NOTIFIER_OUTBOX"
    errors = (sqlite3.Error,)

    def __init__(self, path: Path, *, lease: float = 60.0) -> None:
        super().__init__(lease=lease)
        self.path = Path(path)
        self._local = threading.local()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.with_name(self.path.name + ".lock").open("a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, even on error
                db = self._conn()
                mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise ConfigError(
                        self.setting,
                        f"{self.path}: SQLite would not use WAL (journal mode {mode!r}); put the outbox on a local volume",
                    )
                with self._tx() as tx:
                    self._migrate(tx)
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(
                self.setting,
                f"{self.path} cannot be used as the outbox ({exc}); it needs a writable local volume",
            ) from exc

    def _conn(self) -> sqlite3.Connection:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=True)
            db.row_factory = sqlite3.Row
            db.execute("PRAGMA busy_timeout=30000")
            db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable across process crashes
            self._local.db = db
        return db

    _db = _conn  # the name older tests and operators' snippets use

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        db = self._conn()
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def _singleton(self, db: Any, name: str) -> bool:
        return True  # BEGIN IMMEDIATE: one writer on the file at a time, and one replica by design

    def _not_busy(self, channels: frozenset[str]) -> tuple[str, Any]:
        return "channel NOT IN (SELECT value FROM json_each(?))", json.dumps(sorted(channels))

    def _probe(self) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT OR REPLACE INTO metrics(name, labels, value) VALUES ('driftguard_notifier_ready_probe', ?, ?)",
                (_PROBE, time.time()),
            )
        with self._tx() as db:
            db.execute("DELETE FROM metrics WHERE name='driftguard_notifier_ready_probe'")

    def close(self) -> None:
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None
