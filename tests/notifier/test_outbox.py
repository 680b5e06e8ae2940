"""The outbox file when several gunicorn workers open it at once (the failure CI caught)."""

from __future__ import annotations

import fcntl
import multiprocessing
import threading
from pathlib import Path

import pytest

from driftguard.errors import ConfigError
from notifier.outbox import SqliteOutbox as Outbox

ROUNDS = 30
PROCESSES = 6


def _open_and_write(path: str, results: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    try:
        outbox = Outbox(Path(path))
        results.put("ok" if outbox.writable() else "not writable")
    except Exception as exc:  # reported to the parent, which asserts on it
        results.put(f"{type(exc).__name__}: {exc}")


@pytest.mark.slow  # many workers booting at once
def test_workers_opening_a_fresh_outbox_at_once_all_boot(tmp_path: Path) -> None:
    # Before the start-up lock, about one round in a hundred lost a worker to "database is locked"
    # from PRAGMA journal_mode=WAL (SQLite's busy timeout does not cover that upgrade).
    ctx = multiprocessing.get_context("fork")
    failures = []
    for n in range(ROUNDS):
        path = tmp_path / f"round{n}" / "outbox.sqlite3"
        results: multiprocessing.Queue = ctx.Queue()  # type: ignore[type-arg]
        procs = [ctx.Process(target=_open_and_write, args=(str(path), results)) for _ in range(PROCESSES)]
        for p in procs:
            p.start()
        outcomes = [results.get(timeout=60) for _ in procs]
        for p in procs:
            p.join(timeout=60)
        failures += [o for o in outcomes if o != "ok"]
        assert Outbox(path)._db().execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert failures == []


def test_start_up_waits_for_the_lock_another_process_holds(tmp_path: Path) -> None:
    path = tmp_path / "outbox.sqlite3"
    opened: list[Outbox] = []
    with (tmp_path / "outbox.sqlite3.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        t = threading.Thread(target=lambda: opened.append(Outbox(path)))
        t.start()
        t.join(timeout=0.5)
        assert t.is_alive() and not opened  # still waiting: nobody initialises the file twice at once
    t.join(timeout=10)
    assert opened and opened[0].writable()
    assert opened[0].depth() is not None


def test_an_unusable_path_stops_start_up_naming_the_setting(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    with pytest.raises(ConfigError) as info:
        Outbox(tmp_path / "a-file" / "outbox.sqlite3")
    assert info.value.setting == "DRIFTGUARD_NOTIFIER_OUTBOX"
    assert "needs a writable local volume" in str(info.value)
    (tmp_path / "garbage.sqlite3").write_bytes(b"this is not a database" * 100)
    with pytest.raises(ConfigError, match="cannot be used as the outbox"):
        Outbox(tmp_path / "garbage.sqlite3")
    assert (tmp_path / "garbage.sqlite3").read_bytes().startswith(b"this is not a database")  # left as found
