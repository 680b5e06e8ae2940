"""Several replicas on one PostgreSQL: three gunicorn notifiers, 500 notifications, kill -9, a database restart.

Phase 1: 500 notifications (one app each, so none is deduplicated) spread round-robin over three
replicas; when a third of the 1,500 messages are out, one replica's whole process group gets
SIGKILL. Its leases run out (DRIFTGUARD_NOTIFIER_LEASE=2) and the others finish its work. Phase 2:
100 more; PostgreSQL is stopped mid-delivery: /readyz is not ready and webhooks answer 503 while it
is down; it is started again and delivery resumes by itself. Then: nothing accepted is lost (each
app's three channels heard), and a message heard twice is one whose lease ran out (claimed twice,
``attempts`` >= 2: it was in flight at the kill or the restart), counted and printed as a table.

And issue 21 on the same footing: an identity received by one replica names the person in the
alert another sends, and the journal's episode is healed by a third and read from any.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest
import requests

from standins.apiserver import audit_event, event_list
from standins.argo_api import FakeArgo
from standins.drill import serve_drill
from standins.postgres import PgServer
from standins.processes import free_port, start_gunicorn, stop
from standins.receivers import Receivers
from tests.helpers import wait_until

from .conftest import AUDIT_TOKEN, PD_KEY, READ_TOKEN, TOKEN, service_env
from .test_identity import alerts_name, retime_patch

pytestmark = pytest.mark.slow  # three replicas, kill -9, a PostgreSQL restart

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


def _wait(predicate: Callable[[], object], timeout: float, what: str) -> float:
    """``wait_until``, and the seconds it took: for the printed table only (nothing asserts on them)."""
    start = time.monotonic()
    wait_until(predicate, what, timeout=timeout)
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
        # no re-check during the run: with dedup off, a re-check re-alerts every open app, which on a
        # loaded machine (delivery slower than the 60 s default) floods the count of duplicates and
        # leaves fresh pending messages at the end; neither is what a kill or a restart did
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
        _wait(lambda: len(rx.captured) >= FIRST, 120, "a third of the messages")
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
        _wait(lambda: len(rx.captured) >= sum(phase1.values()) + SECOND, 120, "phase 2 under way")
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
            120,
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


def _incidents(port: int) -> list[dict[str, object]]:
    resp = requests.get(
        f"http://127.0.0.1:{port}/v1/incidents",
        headers={"Authorization": f"Bearer {READ_TOKEN}"},
        timeout=10,
    )
    assert resp.status_code == 200, resp.text
    return list(resp.json()["episodes"])


def test_identity_at_one_replica_names_the_person_in_another_replicas_alert_and_a_third_heals(
    tmp_path: Path, argo: FakeArgo, rx: Receivers, pg: PgServer
) -> None:
    """Real gunicorn replicas on one PostgreSQL: A takes the audit batch (and runs no delivery), B
    expands and sends the alerts naming the person; B goes away, C heals the episode B opened; the
    journal reads the same from every replica. Bad posts get their 4xx from PostgreSQL-backed A too."""
    serve_drill(argo)
    at = int(time.time()) - 2
    stamp = retime_patch(argo, at)
    url = pg.new_database()
    env = service_env(
        tmp_path,
        argo,
        rx.channels(feishu_secret="feishu-signing-secret", routing_key=PD_KEY, slack_locale="en"),
        DRIFTGUARD_ARGOCD_RETRIES="0",
        DRIFTGUARD_NOTIFIER_DATABASE_URL=url,
        DRIFTGUARD_NOTIFIER_AUDIT_TOKEN=AUDIT_TOKEN,
        DRIFTGUARD_NOTIFIER_READ_TOKEN=READ_TOKEN,
    )
    a_port, b_port, c_port = free_port(), free_port(), free_port()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs.append(
            start_gunicorn(
                "notifier.app:create_app()",
                a_port,
                {**env, "DRIFTGUARD_NOTIFIER_WORKER": "false"},
                tmp_path / "a.log",
                workers=1,
            )
        )
        procs.append(start_gunicorn("notifier.app:create_app()", b_port, env, tmp_path / "b.log", workers=1))
        b_pids = {str(p) for p in _children(procs[1].pid)}
        audit = f"http://127.0.0.1:{a_port}/v1/audit"
        auth = {"Authorization": f"Bearer {AUDIT_TOKEN}"}
        sent = requests.post(
            audit, data=json.dumps(event_list(audit_event(at=at + 0.3))), headers=auth, timeout=10
        )
        assert sent.status_code == 200 and sent.json()["stored"] == 1, sent.text
        for headers, raw, status in (
            ({}, b"{}", 401),
            (auth, b"not json", 400),
            (auth, json.dumps({"kind": "EventList", "apiVersion": "v1", "items": []}).encode(), 400),
            (auth, b"x" * (9 * 1024 * 1024), 413),
        ):
            bad = requests.post(audit, data=raw, headers=headers, timeout=10)
            assert bad.status_code == status and bad.json()["error"], (status, bad.text)

        assert _post_notification(b_port, "on-drift-detected").status_code == 202
        # the journal takes each channel's time just after the receiver took the alert
        _wait(lambda: [len(e["alerted_at"]) for e in _incidents(a_port)] == [3], 120, "the three alerts")  # type: ignore[arg-type]
        alerts_name(rx, f"alice@example.com via kubectl-patch, {stamp[11:19]}", "audit")
        with psycopg.connect(url) as db:
            owners = {r[0].rsplit(":", 1)[1] for r in db.execute("SELECT owner FROM messages").fetchall()}
        assert owners and owners <= b_pids  # B sent them: A runs no delivery
        [seen_a], [seen_b] = _incidents(a_port), _incidents(b_port)
        assert _as_stored(seen_a) == _as_stored(seen_b)
        assert seen_a["user"] == "alice@example.com" and seen_a["open"]
        assert sorted(seen_a["alerted_at"]) == ["feishu", "pagerduty", "slack"]  # type: ignore[call-overload]

        # B goes away; C (another replica) sees the self-heal that A received and closes B's episode
        stop(procs[1])
        procs.append(start_gunicorn("notifier.app:create_app()", c_port, env, tmp_path / "c.log", workers=1))
        serve_drill(argo, patched=False, secret_changed=False, sync="Synced")
        argo.apps[("argocd", "deepseek-inference")]["status"]["operationState"]["operation"] = {
            "initiatedBy": {"automated": True}
        }
        assert _post_notification(a_port, "on-sync-succeeded").status_code == 202
        _wait(lambda: [e["open"] for e in _incidents(c_port)] == [False], 120, "the heal")
        [healed] = _incidents(a_port)
        assert healed["id"] == seen_a["id"] and healed["healed_by"] == "self-heal"
        assert [_as_stored(e) for e in _incidents(c_port)] == [_as_stored(healed)]
    finally:
        for proc in procs:
            stop(proc)


_AGE = re.compile(r" \(\d+ (s|min|h|d) ago\)$")


def _as_stored(episode: dict[str, object]) -> dict[str, object]:
    """The episode without what its reader's clock adds: ``actor`` ends with the change's age at
    the moment of the read ("(12 s ago)", driftguard/identity.py), so two reads of the same
    episode a second boundary apart differ there. The age must be there; the rest must match."""
    actor = str(episode["actor"])
    assert _AGE.search(actor), actor
    return {**episode, "actor": _AGE.sub("", actor)}


def _post_notification(port: int, trigger: str) -> requests.Response:
    body = {"trigger": trigger, "app": {"metadata": {"name": "deepseek-inference", "namespace": "argocd"}}}
    return requests.post(
        f"http://127.0.0.1:{port}/v1/notifications",
        data=json.dumps(body),
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=10,
    )
