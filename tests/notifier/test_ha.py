"""Several replicas on one PostgreSQL: three gunicorn notifiers, 500 notifications, kill -9, a database restart.

Phase 1: 500 notifications (one app each, so none is deduplicated) spread round-robin over three
replicas; when a third of the 1,500 messages are out, one replica's whole process group gets
SIGKILL. Its leases run out (DRIFTGUARD_NOTIFIER_LEASE=2) and the others finish its work. Phase 2:
100 more; PostgreSQL is stopped mid-delivery: /readyz is not ready and webhooks answer 503 while it
is down; it is started again and delivery resumes by itself. Then: nothing accepted is lost (each
app's three channels heard), and a message heard twice is one whose lease ran out (claimed twice,
``attempts`` >= 2: it was in flight at the kill or the restart), counted and printed as a table.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest
import requests

from standins.argo_api import FakeArgo
from standins.drill import serve_drill
from standins.postgres import PgServer
from standins.processes import free_port, start_gunicorn, stop
from standins.receivers import Receivers

from .conftest import PD_KEY, TOKEN, service_env

PATHS = ("/feishu", "/slack", "/pagerduty")
FIRST, SECOND = 500, 100
_APP = re.compile(rb"ha-\d{3}")


@pytest.fixture
def own_pg() -> Iterator[PgServer]:
    """A server of this test's own (it is restarted), durable as in production (fsync on)."""
    server = PgServer(fsync=True)
    server.start()
    yield server
    server.close()


def _post(port: int, i: int) -> requests.Response:
    body = {
        "trigger": "on-drift-detected",
        "app": {"metadata": {"name": f"ha-{i:03d}", "namespace": "argocd"}},
    }
    return requests.post(
        f"http://127.0.0.1:{port}/v1/notifications",
        data=json.dumps(body),
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=10,
    )


def _heard(rx: Receivers) -> Counter[tuple[str, str]]:
    with rx.lock:
        captured = list(rx.captured)
    out: Counter[tuple[str, str]] = Counter()
    for c in captured:
        m = _APP.search(c.body if isinstance(c.body, bytes) else str(c.body).encode())
        if m:
            out[(c.path, m.group().decode())] += 1
    return out


def _wait(predicate: object, timeout: float, what: str) -> float:
    start = time.monotonic()
    while not predicate():  # type: ignore[operator]
        if time.monotonic() - start > timeout:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
    return time.monotonic() - start


def _children(pid: int) -> list[int]:
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def test_three_replicas_kill_9_and_a_database_restart_lose_nothing(
    tmp_path: Path, argo: FakeArgo, rx: Receivers, own_pg: PgServer
) -> None:
    for i in range(FIRST + SECOND):
        serve_drill(argo, name=f"ha-{i:03d}")
    for path in PATHS:
        rx.delay[path] = 0.01  # a receiver a little slower than loopback: sends are in flight at the kill
    url = own_pg.new_database()
    env = service_env(
        tmp_path,
        argo,
        rx.channels(feishu_secret="x", routing_key=PD_KEY),
        DRIFTGUARD_ARGOCD_RETRIES="0",
        DRIFTGUARD_NOTIFIER_LEASE="2",
        DRIFTGUARD_NOTIFIER_DATABASE_URL=url,
        DRIFTGUARD_NOTIFIER_DEDUP_WINDOW="0",
        # no re-checks within the test: on a loaded machine it can outlast the 60 s default, and a
        # re-check of 500 open incidents with dedup off re-alerts them all, which is not a duplicate
        DRIFTGUARD_NOTIFIER_RECHECK_INTERVAL="3600",
    )
    ports = [free_port() for _ in range(3)]
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for n, port in enumerate(ports):
            procs.append(
                start_gunicorn("notifier.app:create_app()", port, env, tmp_path / f"r{n}.log", workers=1)
            )
        victim_pids = {procs[0].pid, *_children(procs[0].pid)}
        with ThreadPoolExecutor(12) as pool:
            answers = list(pool.map(lambda i: _post(ports[i % 3], i), range(FIRST)))
        assert [a.status_code for a in answers] == [202] * FIRST

        # --- phase 1: kill -9 one replica mid-delivery ---------------------------------------------
        _wait(lambda: len(rx.captured) >= FIRST, 90, "a third of the messages")
        stop(procs[0], kill=True)
        with psycopg.connect(url) as db:
            owners = [f"%:{pid}" for pid in victim_pids]
            in_flight = db.execute(
                "SELECT count(*) FROM messages WHERE state='pending' AND lease_until > extract(epoch from now())"
                " AND owner LIKE ANY(%s)",
                (owners,),
            ).fetchone()[0]
            expanding = db.execute(
                "SELECT count(*) FROM notifications WHERE state='pending' AND lease_until > extract(epoch from now())"
                " AND owner LIKE ANY(%s)",
                (owners,),
            ).fetchone()[0]
        first_apps = {f"ha-{i:03d}" for i in range(FIRST)}
        recovery_kill = _wait(
            lambda: all(_heard(rx)[(p, a)] >= 1 for p in PATHS for a in first_apps), 120, "phase 1 delivered"
        )
        phase1 = _heard(rx)
        lost1 = sum(1 for p in PATHS for a in first_apps if phase1[(p, a)] == 0)
        dup1 = sum(n - 1 for n in phase1.values() if n > 1)

        # --- phase 2: the database restarted mid-delivery ------------------------------------------
        alive = ports[1:]
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda i: _post(alive[i % 2], i), range(FIRST, FIRST + SECOND)))
        assert [a.status_code for a in answers] == [202] * SECOND
        _wait(lambda: len(rx.captured) >= sum(phase1.values()) + SECOND, 60, "phase 2 under way")
        own_pg.stop()
        down_at = time.monotonic()
        for port in alive:
            ready = requests.get(f"http://127.0.0.1:{port}/readyz", timeout=10)
            assert ready.status_code == 503 and ready.json()["status"] == "not ready", ready.text
            refused = _post(port, 0)
            assert refused.status_code == 503 and "not stored" in refused.json()["error"]
        own_pg.start()
        restarted_at = time.monotonic()
        ready_after = _wait(
            lambda: all(
                requests.get(f"http://127.0.0.1:{p}/readyz", timeout=10).status_code == 200 for p in alive
            ),
            60,
            "ready again",
        )
        all_apps = {f"ha-{i:03d}" for i in range(FIRST + SECOND)}
        delivered_after = _wait(
            lambda: all(_heard(rx)[(p, a)] >= 1 for p in PATHS for a in all_apps), 120, "phase 2 delivered"
        )
        final = _heard(rx)
        with psycopg.connect(url) as db:
            reclaimed = db.execute("SELECT count(*) FROM messages WHERE attempts >= 2").fetchone()[0]
            pending = db.execute("SELECT count(*) FROM messages WHERE state <> 'sent'").fetchone()[0]
            stored = db.execute("SELECT count(*) FROM notifications").fetchone()[0]
        lost = sum(1 for p in PATHS for a in all_apps if final[(p, a)] == 0)
        dup = sum(n - 1 for n in final.values() if n > 1)
        print(
            "\n| event | accepted | lost | duplicated | in flight at the event | recovery |\n|---|---|---|---|---|---|\n"
            f"| kill -9 of 1 of 3 replicas | {FIRST} | {lost1} | {dup1} | {in_flight} messages, {expanding} expansions"
            f" | all delivered {recovery_kill:.1f} s after the kill (lease 2 s) |\n"
            f"| PostgreSQL stopped {restarted_at - down_at:.1f} s | {SECOND} | {lost} (all {FIRST + SECOND}) | {dup - dup1}"
            f" | re-claimed messages overall: {reclaimed} | ready {ready_after:.1f} s after the restart,"
            f" all delivered {delivered_after:.1f} s after it |"
        )
        assert lost1 == 0 and lost == 0 and pending == 0
        assert stored == FIRST + SECOND  # the 503s stored nothing
        assert dup1 <= in_flight + 3 * expanding  # only what the killed replica held
        assert dup <= reclaimed  # a message heard twice was claimed twice: its lease ran out mid-send
    finally:
        for proc in procs:
            stop(proc)
