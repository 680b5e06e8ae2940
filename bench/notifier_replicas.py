#!/usr/bin/env python3
"""Webhook -> Feishu, Slack and PagerDuty delivered: SQLite, PostgreSQL with 1 and 3 replicas, same run.

Each variant is real gunicorn notifier processes (2 workers each, as deployed) against the Argo CD
and receiver stand-ins and, for PostgreSQL, a real server in a temp dir (fsync on). Latency: 200
notifications one after another (one app each, so none is deduplicated), round-robin over the
replicas, after 10 per replica to warm each one up (not counted: WARMUP_PER_REPLICA); received -> last of the three channels delivered, from the outbox's own timestamps;
target p99 <= 50 ms. Throughput: 500 notifications posted at once (12 concurrent clients), the time
until all 1,500 messages are delivered. The machine's load is printed with the figures.

The watcher disturbs what it watches as little as it can: webhooks go over keep-alive connections
(as Argo CD's Go client sends them), it waits for the receivers' answers before reading the
outbox, and its reads are plain reads (a SQLite write transaction per poll held the file's write
lock the notifier needed). The stand-ins answer HTTP/1.1 keep-alive, as the real services do.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import requests  # noqa: E402

from notifier.outbox import Outbox, SqliteOutbox  # noqa: E402
from notifier.outbox.postgres import PostgresOutbox  # noqa: E402
from standins import argo_api, receivers  # noqa: E402
from standins.drill import serve_drill  # noqa: E402
from standins.postgres import PgServer  # noqa: E402
from standins.processes import free_port, start_gunicorn, stop  # noqa: E402

LATENCY_N = 200
BURST_N = 500
WARMUP_PER_REPLICA = 10
"""Notifications each replica delivers before the measured ones (not counted): a gunicorn worker's
first requests pay once for what a long-running notifier never pays again (first use of its
imports, its connections to the store and the receivers, the collector's first passes over the
app's objects before gc.freeze() takes them out of sight)."""
TOKEN = "bench-token-0123456789abcdef"


_SESSIONS = threading.local()


def post(port: int, name: str) -> str:
    """One webhook on a keep-alive connection per thread, as Argo CD's Go HTTP client sends them."""
    session = getattr(_SESSIONS, "s", None)
    if session is None:
        session = _SESSIONS.s = requests.Session()
    body = {"trigger": "on-drift-detected", "app": {"metadata": {"name": name, "namespace": "argocd"}}}
    resp = session.post(
        f"http://127.0.0.1:{port}/v1/notifications",
        data=json.dumps(body),
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=10,
    )
    assert resp.status_code == 202, resp.text
    return str(resp.json()["id"])


def delivered(outbox: Outbox, nid: str) -> float | None:
    rows = outbox.query("SELECT received_at, sent_at FROM messages WHERE notification_id=?", (nid,))
    if len(rows) == 3 and all(r["sent_at"] for r in rows):
        return float(max(r["sent_at"] for r in rows) - rows[0]["received_at"])
    return None


def run(
    label: str,
    tmp: Path,
    argo: argo_api.FakeArgo,
    rx: receivers.Receivers,
    url: str,
    replicas: int,
    prefix: str,
) -> str:
    config = tmp / f"{prefix}.yaml"
    config.write_text(json.dumps({"channels": rx.channels(feishu_secret="s", routing_key="0" * 32)}))
    env = {
        "PATH": os.environ["PATH"],
        "DRIFTGUARD_REDACT_KEY": "redact-key-for-bench-0123456789abcdef",
        "DRIFTGUARD_NOTIFIER_TOKEN": TOKEN,
        "DRIFTGUARD_NOTIFIER_CONFIG": str(config),
        "DRIFTGUARD_NOTIFIER_OUTBOX": str(tmp / f"{prefix}.sqlite3"),
        "DRIFTGUARD_NOTIFIER_DEDUP_WINDOW": "0",
        "DRIFTGUARD_ARGOCD_URL": argo.url,
        "DRIFTGUARD_ARGOCD_TOKEN": argo.token,
    }
    if url:
        env["DRIFTGUARD_NOTIFIER_DATABASE_URL"] = url
    ports = [free_port() for _ in range(replicas)]
    with ExitStack() as stack:
        for n, port in enumerate(ports):
            proc = start_gunicorn("notifier.app:create_app()", port, env, tmp / f"{prefix}{n}.log")
            stack.callback(stop, proc)
        outbox: Outbox = PostgresOutbox(url) if url else SqliteOutbox(tmp / f"{prefix}.sqlite3")
        latencies = []
        warmup = WARMUP_PER_REPLICA * replicas
        for i in range(warmup + LATENCY_N):
            answered = len(rx.answered) + 3
            name = f"{prefix}-w{i}" if i < warmup else f"{prefix}-l{i - warmup}"
            nid = post(ports[i % replicas], name)
            deadline = time.time() + 10
            # the figure comes from the outbox's own timestamps; the watcher only decides when to go
            # on, so it waits on the receivers (no query) and then reads the store a few times
            while len(rx.answered) < answered and time.time() < deadline:
                time.sleep(0.0005)
            while (lat := delivered(outbox, nid)) is None and time.time() < deadline:
                time.sleep(0.002)
            assert lat is not None, f"{label}: not delivered"
            if i >= warmup:
                latencies.append(lat)
        latencies.sort()
        start = time.monotonic()
        with ThreadPoolExecutor(12) as pool:
            list(pool.map(lambda i: post(ports[i % replicas], f"{prefix}-b{i}"), range(BURST_N)))
        accepted = time.monotonic() - start
        while True:
            left = outbox.query("SELECT count(*) AS n FROM messages WHERE state <> 'sent'")[0]["n"]
            done = outbox.query("SELECT count(*) AS n FROM notifications WHERE state = 'pending'")[0]["n"]
            if left == 0 and done == 0:
                break
            assert time.monotonic() - start < 300, f"{label}: burst not delivered"
            time.sleep(0.05)
        burst = time.monotonic() - start
        sent = outbox.query("SELECT count(*) AS n FROM messages WHERE state='sent'")[0]["n"]
        outbox.close()
    p50 = statistics.median(latencies)
    p99 = latencies[int(0.99 * (len(latencies) - 1))]
    return f"| {label} | {p50 * 1000:.1f} | {p99 * 1000:.1f} | {accepted:.1f} | {burst:.1f} | {sent - 3 * (LATENCY_N + warmup)} |"


def main() -> int:
    global WARMUP_PER_REPLICA
    if sys.argv[1:2] == ["--warmup"] and len(sys.argv) == 3:
        WARMUP_PER_REPLICA = int(sys.argv[2])  # 0: every replica measured from its first notification
    elif sys.argv[1:]:
        sys.exit("usage: notifier_replicas.py [--warmup N]")
    with argo_api.serve() as argo, receivers.serve() as rx, tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for prefix in ("s", "p1", "p3"):
            for i in range(WARMUP_PER_REPLICA * 3):
                serve_drill(argo, name=f"{prefix}-w{i}")
            for i in range(LATENCY_N):
                serve_drill(argo, name=f"{prefix}-l{i}")
            for i in range(BURST_N):
                serve_drill(argo, name=f"{prefix}-b{i}")
        pg = PgServer(fsync=True)
        try:
            pg.start()
            rows = [
                run("SQLite, 1 replica", tmp, argo, rx, "", 1, "s"),
                run("PostgreSQL, 1 replica", tmp, argo, rx, pg.new_database(), 1, "p1"),
                run("PostgreSQL, 3 replicas", tmp, argo, rx, pg.new_database(), 3, "p3"),
            ]
        finally:
            pg.close()
    load = os.getloadavg()
    print(
        f"webhook received -> all three channels delivered ({LATENCY_N} in a row, after {WARMUP_PER_REPLICA} per "
        f"replica not counted), and {BURST_N} at once"
    )
    print(f"machine: {os.cpu_count()} cores, load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}")
    print(
        "| store | median ms | p99 ms (target <= 50) | 500 accepted in s | 500 delivered (x3) in s | burst messages sent |"
    )
    print("|---|---|---|---|---|---|")
    for row in rows:
        print(row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
