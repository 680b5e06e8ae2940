#!/usr/bin/env python3
"""Webhook received -> Feishu, Slack and PagerDuty delivered, for 200 notifications in a row.

Argo CD and the three receivers are local servers; the notifier runs with its delivery worker
thread, as under gunicorn. Each notification carries different drift (so none is deduplicated).
Reports median and p99 of received -> last channel delivered; target p99 <= 50 ms. The baseline
measured in the same run: one bare HTTP round trip to the local receivers, three times.
"""

from __future__ import annotations

import base64
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import requests  # noqa: E402

from driftguard.argocd import ArgoCDSettings  # noqa: E402
from notifier.app import create_app  # noqa: E402
from notifier.config import parse_config  # noqa: E402
from notifier.settings import NotifierSettings  # noqa: E402
from standins import argo_api, receivers  # noqa: E402
from standins.drill import (  # noqa: E402
    inference_desired,
    inference_live,
    managed_item,
    secret_desired,
    secret_live,
)

N = 200
TOKEN = "bench-token-0123456789abcdef"


def main() -> int:
    with argo_api.serve() as argo, receivers.serve() as rx, tempfile.TemporaryDirectory() as tmp:
        argo.put(argo_api.application("deepseek-inference", dest_namespace="ai-serving", sync="OutOfSync"))
        config = parse_config(
            {
                "argocdUrl": "https://argocd.example.com",
                "channels": rx.channels(feishu_secret="s", routing_key="0" * 32),
            }
        )
        settings = NotifierSettings(
            token=TOKEN,
            redact_key=b"redact-key-for-bench-0123456789abcdef",
            outbox=Path(tmp) / "outbox.sqlite3",
            worker=True,
            dedup_window=0,
            argocd=ArgoCDSettings(url=argo.url, token=argo.token),
        )
        app = create_app(settings, config=config)
        client = app.test_client()
        state = app.extensions["driftguard"]
        bare = []
        for _ in range(20):
            start = time.perf_counter()
            for path in ("/feishu", "/slack", "/pagerduty"):
                requests.post(rx.url + path, data=b"{}", timeout=5)
            bare.append(time.perf_counter() - start)
        rx.captured.clear()
        latencies = []
        for i in range(N):
            live = inference_live(gpu=str(3 + i))  # new drift every time
            argo.managed[("argocd", "deepseek-inference")] = {
                "items": [
                    managed_item(inference_desired(), live),
                    managed_item(secret_desired("p"), secret_live(base64.b64encode(b"p").decode())),
                ]
            }
            body = {
                "trigger": "on-drift-detected",
                "app": {"metadata": {"name": "deepseek-inference", "namespace": "argocd"}},
            }
            resp = client.post(
                "/v1/notifications", data=json.dumps(body), headers={"Authorization": f"Bearer {TOKEN}"}
            )
            assert resp.status_code == 202
            nid = resp.get_json()["id"]
            deadline = time.time() + 10
            while time.time() < deadline:
                rows = (
                    state.outbox._db()
                    .execute("SELECT received_at, sent_at FROM messages WHERE notification_id=?", (nid,))
                    .fetchall()
                )
                if len(rows) == 3 and all(r["sent_at"] for r in rows):
                    break
                time.sleep(0.0005)
            assert len(rows) == 3 and all(r["sent_at"] for r in rows), "not delivered"
            latencies.append(max(r["sent_at"] for r in rows) - rows[0]["received_at"])
        state.worker.stop()
        latencies.sort()
        p50 = statistics.median(latencies)
        p99 = latencies[int(0.99 * (len(latencies) - 1))]
        floor = statistics.median(bare)
        print(
            f"{N} notifications: webhook received -> all three channels delivered: median {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms (target p99 <= 50 ms)"
        )
        print(
            f"baseline, same run: three bare POSTs to the local receivers {floor * 1000:.1f} ms; median ratio {p50 / floor:.1f}x"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
