#!/usr/bin/env python3
"""The observe-only admission webhook's answer time, as the API server sees it: TLS, keep-alive, gunicorn.

The notifier's CLI runs gunicorn over TLS (1 worker, 4 threads, no delivery thread) with the
identity store on a temp SQLite file; 2,000 AdmissionReviews of the drill's Deployment (a ~3 KB
object, each a different request UID, so each is a new row) are posted one after another on one
keep-alive TLS connection, after 200 warm-up reviews. Reports median and p99 of the round trip
and of the time inside the app (its Server-Timing header); target p99 < 5 ms for the round trip.
The baseline in the same run: GET /healthz on the same connection.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import requests  # noqa: E402
import trustme  # noqa: E402

from standins.apiserver import admission_review  # noqa: E402
from standins.drill import inference_live  # noqa: E402
from standins.processes import free_port  # noqa: E402

N, WARM = 2000, 200


def pct(xs: list[float], p: float) -> float:
    return sorted(xs)[min(len(xs) - 1, int(len(xs) * p))]


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        ca = trustme.CA()
        cert = ca.issue_cert("127.0.0.1")
        cert.private_key_pem.write_to_path(str(t / "tls.key"))
        cert.cert_chain_pems[0].write_to_path(str(t / "tls.crt"))
        ca.cert_pem.write_to_path(str(t / "ca.crt"))
        ca_file = str(t / "ca.crt")
        (t / "notifier.yaml").write_text(
            json.dumps({"channels": {"slack": {"type": "slack", "url": "https://hooks.example.com/x"}}})
        )
        env = {
            "PATH": os.environ["PATH"],
            "DRIFTGUARD_NOTIFIER_TOKEN": "bench-token-0123456789abcdef",
            "DRIFTGUARD_NOTIFIER_CONFIG": str(t / "notifier.yaml"),
            "DRIFTGUARD_NOTIFIER_OUTBOX": str(t / "outbox.sqlite3"),
            "DRIFTGUARD_ARGOCD_URL": "https://argocd.example.com",
            "DRIFTGUARD_ARGOCD_TOKEN": "bench-argocd-token",
            "DRIFTGUARD_NOTIFIER_ADMISSION_AUTH": "none",
            "DRIFTGUARD_NOTIFIER_WORKER": "false",
        }
        port = free_port()
        cli = str(Path(sys.executable).parent / "driftguard-notifier")
        argv = [
            cli,
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "1",
            "--certfile",
            str(t / "tls.crt"),
            "--keyfile",
            str(t / "tls.key"),
        ]
        with (t / "log").open("wb") as log:
            proc = subprocess.Popen(argv, env=env, stdout=log, stderr=log, start_new_session=True)
        try:
            s = requests.Session()
            s.trust_env = False  # REQUESTS_CA_BUNDLE would win over the session's own CA
            url = f"https://127.0.0.1:{port}"
            for _ in range(300):
                try:
                    s.get(f"{url}/healthz", timeout=5, verify=ca_file)
                    break
                except requests.ConnectionError:
                    time.sleep(0.1)
            obj = inference_live()
            bodies = [json.dumps(admission_review(obj)) for _ in range(N + WARM)]
            headers = {"Content-Type": "application/json"}
            took: list[float] = []
            inside: list[float] = []
            for i, body in enumerate(bodies):
                t0 = time.perf_counter()
                r = s.post(f"{url}/v1/admission", data=body, headers=headers, timeout=5, verify=ca_file)
                dt = time.perf_counter() - t0
                assert r.status_code == 200 and r.json()["response"]["allowed"] is True
                if i >= WARM:
                    took.append(dt * 1000)
                    inside.append(float(r.headers["Server-Timing"].split("dur=")[1]))
            base: list[float] = []
            for _ in range(500):
                t0 = time.perf_counter()
                s.get(f"{url}/healthz", timeout=5, verify=ca_file)
                base.append((time.perf_counter() - t0) * 1000)
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)
    print(
        f"admission review over TLS, {N} in a row: median {statistics.median(took):.2f} ms, p99 {pct(took, 0.99):.2f} ms, max {max(took):.2f} ms"
    )
    print(
        f"baseline GET /healthz on the same connection: median {statistics.median(base):.2f} ms, p99 {pct(base, 0.99):.2f} ms"
    )
    print(
        f"inside the app (Server-Timing): median {statistics.median(inside):.3f} ms, p99 {pct(inside, 0.99):.3f} ms"
    )
    print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    ok = pct(took, 0.99) < 5.0
    print("target p99 < 5 ms:", "met" if ok else "NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
