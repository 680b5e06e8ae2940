#!/usr/bin/env python3
"""`driftguard-cmp generate` vs bare `helm template` with the same flags, in the same run.

(a) a chart that renders 3,200 resources (1,600 Deployments + 1,600 Services), (b) a chart of 10.
Median of several repetitions each; targets: (a) <= 1.20, (b) <= 2.0. The floor measured while
planning (a Python process that only runs helm and relays its output) was 1.13x and 1.76x.

(a) and (b) take the shrink baseline from the render cache. (c) is the sidecar's default install:
chart (b) with the baseline read from a kube-apiserver (a local stand-in over TLS) with the pod's
projected token, against the same read through a kubeconfig and the kubernetes client.
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
sys.path.insert(0, str(ROOT))
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


def measure(
    chart: Path, reps: int, extra_env: dict[str, str] | None = None
) -> tuple[float, float, float, float]:
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
        **(extra_env or {}),
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
        in_pod(root, make_chart(root, "pod", 5))
    return 0


def in_pod(root: Path, chart: Path) -> None:
    """(c): the baseline from the cluster, as the sidecar reads it, and through the kubernetes client."""
    import ssl

    import trustme

    from standins.argo_api import FakeArgo, application, kubeconfig, serve

    ca = trustme.CA()
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(tls)
    sa = root / "serviceaccount"
    sa.mkdir()
    ca.cert_pem.write_to_path(str(sa / "ca.crt"))
    with serve(FakeArgo(), tls=tls) as fake:
        (sa / "token").write_text(fake.token)
        resources = [("", "Service", "bench", f"svc-{i}") for i in range(5)]
        resources += [("apps", "Deployment", "bench", f"svc-{i}") for i in range(5)]
        fake.put(application(chart.name, resources=resources))
        pod_env = {
            "KUBERNETES_SERVICE_HOST": "127.0.0.1",
            "KUBERNETES_SERVICE_PORT": fake.url.rsplit(":", 1)[1],
            "DRIFTGUARD_CMP_SERVICE_ACCOUNT_DIR": str(sa),
        }
        _, t_pod, r_pod, _ = measure(chart, 15, pod_env)
    with serve(FakeArgo()) as plain:
        (root / "kubeconfig").write_text(kubeconfig(plain.url, plain.token))
        plain.put(application(chart.name, resources=resources))
        _, t_client, r_client, _ = measure(chart, 15, {"DRIFTGUARD_KUBECONFIG": str(root / "kubeconfig")})
    print(
        f"(c) 10 resources, baseline from the cluster: in the pod (projected token, TLS) {t_pod * 1000:6.1f} ms, "
        f"ratio {r_pod:.2f}; through a kubeconfig and the kubernetes client {t_client * 1000:6.1f} ms, ratio {r_client:.2f}"
    )


if __name__ == "__main__":
    raise SystemExit(main())
