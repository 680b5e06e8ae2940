#!/usr/bin/env python3
"""`driftguard-cmp generate` vs bare `helm template` with the same flags, in the same run.

(a) a chart that renders 3,200 resources (1,600 Deployments + 1,600 Services), (b) a chart of 10.
Median of several repetitions each; targets: (a) <= 1.20, (b) <= 2.0. The floor measured while
planning (a Python process that only runs helm and relays its output) was 1.13x and 1.76x.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HELM = os.environ.get("DRIFTGUARD_HELM", str(ROOT / ".tools/bin/helm"))
CMP = str(Path(sys.executable).parent / "driftguard-cmp")

TEMPLATE = """\
{{- range $i := until (int .Values.count) }}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: svc-{{ $i }}
  labels: {app: svc-{{ $i }}}
spec:
  replicas: 2
  selector:
    matchLabels: {app: svc-{{ $i }}}
  template:
    metadata:
      labels: {app: svc-{{ $i }}}
    spec:
      containers:
        - name: app
          image: registry.example.com/svc-{{ $i }}:1.0
          ports: [{containerPort: 8080}]
---
apiVersion: v1
kind: Service
metadata:
  name: svc-{{ $i }}
spec:
  selector: {app: svc-{{ $i }}}
  ports: [{port: 80, targetPort: 8080}]
{{- end }}
"""


def make_chart(root: Path, name: str, count: int) -> Path:
    chart = root / name
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text(f"apiVersion: v2\nname: {name}\nversion: 1.0.0\n")
    (chart / "values.yaml").write_text(f"count: {count}\n")
    (chart / "templates" / "all.yaml").write_text(TEMPLATE)
    return chart


def run(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{argv[0]} failed: {proc.stderr.decode()[-500:]}")
    return elapsed


RELAY = """
import subprocess, sys
proc = subprocess.run(sys.argv[1:], capture_output=True)
sys.stdout.buffer.write(proc.stdout)
sys.exit(proc.returncode)
"""


def measure(chart: Path, reps: int) -> tuple[float, float, float, float]:
    home = chart.parent / "home"
    home.mkdir(exist_ok=True)
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "DRIFTGUARD_HELM": HELM,
        "HELM_CACHE_HOME": str(home),
        "HELM_CONFIG_HOME": str(home),
        "HELM_DATA_HOME": str(home),
    }
    cmp_env = {
        **env,
        "ARGOCD_APP_NAME": chart.name,
        "ARGOCD_APP_NAMESPACE": "bench",
        "KUBE_VERSION": "1.32.3",
    }
    bare = [
        HELM,
        "template",
        ".",
        "--name-template",
        chart.name,
        "--namespace",
        "bench",
        "--kube-version",
        "1.32.3",
        "--include-crds",
    ]
    ratios, floors, t_bare, t_cmp = [], [], [], []
    run(bare, chart, env)  # warm the page cache
    for _ in range(reps):
        b = run(bare, chart, env)
        f = run([sys.executable, "-c", RELAY, *bare], chart, env)
        c = run([CMP, "generate"], chart, cmp_env)
        t_bare.append(b)
        t_cmp.append(c)
        ratios.append(c / b)
        floors.append(f / b)
    return (
        statistics.median(t_bare),
        statistics.median(t_cmp),
        statistics.median(ratios),
        statistics.median(floors),
    )


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for label, count, reps, target in (
            ("(a) 3,200 resources", 1600, 7, 1.20),
            ("(b) 10 resources", 5, 15, 2.0),
        ):
            chart = make_chart(root, f"bench{count}", count)
            t_bare, t_cmp, ratio, floor = measure(chart, reps)
            print(
                f"{label}: helm template {t_bare * 1000:6.1f} ms, driftguard-cmp generate {t_cmp * 1000:6.1f} ms, "
                f"median ratio {ratio:.2f} (target <= {target}); floor (Python relaying helm) {floor:.2f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
