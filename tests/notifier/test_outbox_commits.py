"""PostgreSQL's latency path: one transaction per expansion, and no wake-up of every replica per webhook.

An expansion writes the episode, the incident, the journal and the queued messages in one
transaction (one synchronous commit): a failure before its commit keeps none of it, and the
notification, stored durably at intake, is expanded again. A webhook whose own worker is free
wakes only that worker; the other replicas hear a ``NOTIFY`` only when it is busy. The faults are
the database's own (a trigger refusing an INSERT), never a patch of our code.
"""

from __future__ import annotations

import threading
from pathlib import Path

import psycopg
import pytest

from notifier.app import create_app
from notifier.outbox.postgres import CHANNEL, PostgresOutbox
from standins.argo_api import FakeArgo
from standins.drill import serve_drill
from standins.postgres import PgServer
from standins.receivers import Receivers
from tests.helpers import wait_until

from .conftest import make_config, make_settings, notification, post


def _count(url: str, table: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
        assert row is not None
        return int(row[0])


def test_an_expansion_is_one_transaction_all_or_nothing(
    tmp_path: Path, argo: FakeArgo, rx: Receivers, pg: PgServer
) -> None:
    url = pg.new_database()
    serve_drill(argo)
    app = create_app(make_settings(tmp_path, argo.url, url), config=make_config(rx))
    state = app.extensions["driftguard"]
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS"
            " $$ BEGIN RAISE EXCEPTION 'could not extend file (test)'; END $$"
        )
        admin.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON messages FOR EACH ROW EXECUTE FUNCTION refuse()"
        )
        assert post(app.test_client(), notification()).status_code == 202
        with pytest.raises(psycopg.Error, match="could not extend file"):
            state.worker.run_once()  # the queueing failed: the loop logs it and goes on
        # the episode, the incident and the journal were written before the messages: none is kept
        for table in ("episodes", "incidents", "drift_journal", "messages"):
            assert _count(url, table) == 0, table
        assert state.outbox.query("SELECT state FROM notifications") == [{"state": "pending"}]
        admin.execute("DROP TRIGGER refuse ON messages")
    state.outbox.query("UPDATE notifications SET lease_until=0")  # the failed attempt's lease ran out
    state.worker.drain()
    assert len(rx.on("/feishu")) == 1 and len(rx.on("/slack")) == 1 and len(rx.on("/pagerduty")) == 1
    for table in ("episodes", "drift_journal"):
        assert _count(url, table) == 1, table
    assert _count(url, "incidents") == 2  # the drift episode and PagerDuty's drift incident (issue 30)
    state.worker.stop()
    state.worker.expander.close()
    state.outbox.close()


@pytest.mark.slow  # several replicas
def test_a_webhook_wakes_the_other_replicas_only_when_its_own_worker_is_busy(
    tmp_path: Path, argo: FakeArgo, rx: Receivers, pg: PgServer
) -> None:
    url = pg.new_database()
    for name in ("quiet-a", "slow-b", "queued-c"):
        serve_drill(argo, name=name)
    app = create_app(make_settings(tmp_path, argo.url, url), config=make_config(rx))
    state = app.extensions["driftguard"]
    client = app.test_client()
    with psycopg.connect(url, autocommit=True) as listener:
        listener.execute(f"LISTEN {CHANNEL}")
        state.worker.start()
        assert post(client, notification("quiet-a")).status_code == 202
        wait_until(lambda: len(rx.captured) >= 3, "quiet-a's three messages", interval=0.02)
        assert len(rx.captured) == 3
        # its own worker was free and took it: nobody else was woken
        assert list(listener.notifies(timeout=0.5, stop_after=1)) == []
        argo.delay = 1.0  # the next expansion waits a second on Argo CD
        assert post(client, notification("slow-b")).status_code == 202
        wait_until(
            lambda: state.outbox.query(
                "SELECT 1 AS taken FROM notifications WHERE app='slow-b' AND lease_until>0"
            ),
            "the worker to take slow-b",
            interval=0.01,
        )
        # the worker is expanding slow-b: the next webhook wakes the other replicas for its work
        assert post(client, notification("queued-c")).status_code == 202
        assert len(list(listener.notifies(timeout=10, stop_after=1))) == 1
    argo.delay = 0.0
    state.worker.stop()
    state.worker.expander.close()
    state.outbox.close()


def test_connections_are_opened_ahead_for_the_threads_that_will_need_them(pg: PgServer) -> None:
    url = pg.new_database()
    outbox = PostgresOutbox(url, lease=30)
    mine = outbox.query("SELECT pg_backend_pid() AS pid")[0]["pid"]

    def backends() -> set[int]:
        rows = outbox.query(
            "SELECT pid FROM pg_stat_activity WHERE datname=current_database() AND application_name=%s",
            ("driftguard-notifier",),
        )
        return {int(r["pid"]) for r in rows} - {mine}

    outbox.warm(2)
    wait_until(lambda: len(backends()) >= 2, "two connections opened ahead", interval=0.02)
    ahead = backends()
    assert len(ahead) == 2
    used: list[int] = []

    def first_statement_of_a_new_thread() -> None:
        used.append(int(outbox.query("SELECT pg_backend_pid() AS pid")[0]["pid"]))

    for _ in range(3):
        t = threading.Thread(target=first_statement_of_a_new_thread)
        t.start()
        t.join()
    assert set(used[:2]) == ahead  # the two opened ahead are taken first
    assert used[2] not in ahead  # then a thread connects as before
    outbox.close()
