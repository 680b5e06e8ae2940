#!/usr/bin/env python3
"""Cached gate requests against a local gunicorn (2 workers, gthread), as a fleet of AnalysisRuns would send.

The load comes from 2 client processes x 4 keep-alive connections on the same 2 cores, for a fixed
time after a 1 s warm-up; Argo CD is a local stand-in. Prints throughput and latency percentiles of
`GET /v1/gates/drift`, and the same run's baseline: gunicorn answering `/healthz` (no gate work).
Targets: >= 1,000 req/s and p99 <= 20 ms.
"""

from __future__ import annotations

import http.client
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TOKEN = "bench-analysis-token-0123456789"
DURATION = 5.0
CLIENTS, THREADS = 2, 4


def _client(port: int, path: str, until: float, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    import threading

    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()

    def loop() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        local = []
        while time.time() < until:
            start = time.perf_counter()
            conn.request("GET", path, headers={"Authorization": f"Bearer {TOKEN}"})
            resp = conn.getresponse()
            resp.read()
            local.append(time.perf_counter() - start)
            if resp.status != 200:
                with lock:
                    errors[0] += 1
        conn.close()
        with lock:
            latencies.extend(local)

    threads = [threading.Thread(target=loop) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.put((latencies, errors[0]))


def load(port: int, path: str, duration: float = DURATION) -> tuple[float, list[float], int]:
    out: multiprocessing.Queue = multiprocessing.Queue()  # type: ignore[type-arg]
    until = time.time() + duration
    procs = [multiprocessing.Process(target=_client, args=(port, path, until, out)) for _ in range(CLIENTS)]
    for p in procs:
        p.start()
    latencies: list[float] = []
    errors = 0
    for _ in procs:
        lat, err = out.get()
        latencies += lat
        errors += err
    for p in procs:
        p.join()
    latencies.sort()
    return len(latencies) / duration, latencies, errors


def pct(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))] * 1000


def main() -> int:
    from standins import argo_api
    from standins.drill import serve_drill as drill_app
    from standins.processes import free_port, start_gunicorn, stop

    with argo_api.serve() as argo, tempfile.TemporaryDirectory() as tmp:
        drill_app(argo)
        port = free_port()
        env = {
            "PATH": os.environ["PATH"],
            "DRIFTGUARD_REDACT_KEY": "redact-key-for-bench-0123456789abcdef",
            "DRIFTGUARD_ANALYSIS_TOKEN": TOKEN,
            "DRIFTGUARD_ARGOCD_URL": argo.url,
            "DRIFTGUARD_ARGOCD_TOKEN": argo.token,
            "DRIFTGUARD_ANALYSIS_CACHE_TTL": "5",
        }
        server = start_gunicorn(
            "analysis_provider.app:create_app()", port, env, Path(tmp) / "gunicorn.log", threads=8
        )
        try:
            path = "/v1/gates/drift?app=deepseek-inference"
            load(port, path, 1.0)  # warm-up: workers, connections, the first (uncached) look-up
            base_rps, base_lat, _ = load(port, "/healthz")
            rps, lat, errors = load(port, path)
        finally:
            stop(server)
    print(
        f"GET {path} (cached, 2 gunicorn workers, {CLIENTS}x{THREADS} keep-alive clients on the same 2 cores, {DURATION:g} s)"
    )
    print(
        f"  {rps:,.0f} req/s, p50 {pct(lat, 0.5):.1f} ms, p99 {pct(lat, 0.99):.1f} ms, errors {errors} (targets >= 1,000 req/s, p99 <= 20 ms)"
    )
    print(
        f"  baseline /healthz, same run: {base_rps:,.0f} req/s, p99 {pct(base_lat, 0.99):.1f} ms; gate/baseline throughput {rps / base_rps:.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
