#!/usr/bin/env python3
"""A monorepo commit and its PR check against bare helm, in the same run (issue 33).

The post-mortem's layout in a temporary git repository: one ApplicationSet with a git directory
generator over clusters/<cluster>/<service> (8 clusters x 19 services = 152 Applications), each
an umbrella chart of one shared chart (charts/shared, reached through charts/shared in each
directory), one values file changed by the last commit.

(a) Argo CD asking ``driftguard-cmp generate`` (as the sidecar runs it: the native front, the
    preload server on) for each of the 152 Applications at the new revision, after rendering
    all of them at the previous one with the same cache dir, against the bare ``helm template``
    loop Argo CD would run natively at the new revision. Target <= 0.15.
(b) ``driftguard-cmp diff --base HEAD~1 --head HEAD apps/`` against a bare loop of the 304
    ``helm template`` calls (both revisions). Target <= 0.15.

Then the preload server and the native front, each switched off: (a) again and a cold
``generate`` (a miss: an Application name never rendered, the server warm), medians.
Usage: python bench/monorepo.py [--quick | --probe]  (--quick: 2 clusters, for a smoke run;
--probe: one Application's hit, back to back and with a pause, against bare helm and /bin/true)
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HELM = os.environ.get("DRIFTGUARD_HELM", str(ROOT / ".tools/bin/helm"))
BIN = Path(sys.executable).parent
FRONT = str(BIN / "driftguard-cmp")  # the native front after `make setup`
PYTHON_CMP = str(BIN / "driftguard-cmp-py")
REPO_URL = "https://git.example.com/platform/gitops.git"
KUBE = "1.32.3"

CHART = {
    "Chart.yaml": "apiVersion: v2\nname: shared\nversion: 1.0.0\n",
    "values.yaml": "enabled: true\nreplicas: 2\nimage: registry.example.com/app:1.0\nport: 8080\n",
    "templates/_helpers.tpl": '{{- define "shared.labels" -}}\napp: {{ .Release.Name }}\n{{- end }}\n',
    "templates/deployment.yaml": """\
{{- if .Values.enabled }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
  labels: {{- include "shared.labels" . | nindent 4 }}
spec:
  replicas: {{ .Values.replicas }}
  selector:
    matchLabels: {{- include "shared.labels" . | nindent 6 }}
  template:
    metadata:
      labels: {{- include "shared.labels" . | nindent 8 }}
    spec:
      containers:
        - name: app
          image: {{ .Values.image }}
          ports: [{containerPort: {{ .Values.port }}}]
{{- end }}
""",
    "templates/service.yaml": """\
apiVersion: v1
kind: Service
metadata:
  name: {{ .Release.Name }}
spec:
  selector: {{- include "shared.labels" . | nindent 4 }}
  ports: [{port: 80, targetPort: {{ .Values.port }}}]
""",
    "templates/configmap.yaml": """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-config
data:
  replicas: {{ .Values.replicas | quote }}
""",
}

APPSET = f"""\
apiVersion: argoproj.io/v1alpha1
kind: ApplicationSet
metadata:
  name: services
  namespace: argocd
spec:
  generators:
    - git:
        repoURL: {REPO_URL}
        revision: HEAD
        directories:
          - path: clusters/*/*
  template:
    metadata:
      name: '{{{{path.basename}}}}-{{{{path[1]}}}}'
    spec:
      project: default
      source:
        repoURL: {REPO_URL}
        targetRevision: HEAD
        path: '{{{{path}}}}'
        plugin:
          name: driftguard
      destination:
        server: https://kubernetes.default.svc
        namespace: '{{{{path.basename}}}}'
      syncPolicy:
        automated:
          prune: true
          allowEmpty: false
"""


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.com", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def build(root: Path, clusters: int, services: int) -> tuple[Path, list[tuple[str, str, str]]]:
    """The repository; (source path, Application name, namespace) of each Application."""
    repo = root / "gitops"
    for rel, text in CHART.items():
        (repo / "charts/shared" / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / "charts/shared" / rel).write_text(text)
    (repo / "apps").mkdir(parents=True)
    (repo / "apps/services.yaml").write_text(APPSET)
    apps = []
    for c in range(clusters):
        for s in range(services):
            path = f"clusters/cluster-{c}/svc-{s:02d}"
            d = repo / path
            (d / "charts").mkdir(parents=True)
            (d / "Chart.yaml").write_text(
                f"apiVersion: v2\nname: svc-{s:02d}\nversion: 0.1.0\ndependencies:\n"
                "  - name: shared\n    version: 1.0.0\n    repository: file://../../../charts/shared\n"
            )
            (d / "values.yaml").write_text(f"shared:\n  enabled: true\n  replicas: {1 + (c + s) % 4}\n")
            (d / "charts/shared").symlink_to("../../../../charts/shared")
            apps.append((path, f"svc-{s:02d}-cluster-{c}", f"svc-{s:02d}"))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "remote", "add", "origin", REPO_URL)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    changed = repo / apps[len(apps) // 2][0] / "values.yaml"
    changed.write_text(changed.read_text().replace("enabled: true", "enabled: true\n  port: 9090"))
    git(repo, "commit", "-qam", "one values file")
    return repo, apps


def tool_env(home: Path) -> dict[str, str]:
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }


def bare_loop(checkouts: list[Path], apps: list[tuple[str, str, str]], home: Path) -> tuple[float, float]:
    """``helm template`` of every Application in each checkout, as Argo CD runs it natively:
    wall and CPU seconds."""
    env = tool_env(home)
    cpu = cpu_seconds()
    start = time.perf_counter()
    for checkout in checkouts:
        for path, name, ns in apps:
            argv = [HELM, "template", ".", "--name-template", name, "--namespace", ns, "--kube-version", KUBE]
            subprocess.run(argv, cwd=checkout / path, env=env, check=True, capture_output=True)
    return time.perf_counter() - start, cpu_seconds() - cpu


def cpu_seconds(cache: Path | None = None) -> float:
    """CPU time of this process's waited-for children (the callers, helm), plus the preload
    servers of ``cache`` with the children they reaped (the renders they forked)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = usage.ru_utime + usage.ru_stime
    if cache is None:
        return total
    marker = str(cache).encode()
    tick = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker not in (entry / "cmdline").read_bytes():
                continue
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(f) for f in fields[11:15]) / tick  # utime stime cutime cstime
    return total


def cmp_env(
    home: Path, cache: Path, path: str, name: str, ns: str, revision: str, preload: bool
) -> dict[str, str]:
    env = {
        **tool_env(home),
        "DRIFTGUARD_HELM": HELM,
        "DRIFTGUARD_CMP_TOOL_READ_PATHS": str(Path(HELM).parent),
        "DRIFTGUARD_CMP_CACHE_DIR": str(cache),
        "TMPDIR": str(home),
        "ARGOCD_APP_NAME": name,
        "ARGOCD_APP_NAMESPACE": ns,
        "ARGOCD_APP_SOURCE_PATH": path,
        "ARGOCD_APP_SOURCE_REPO_URL": REPO_URL,
        "ARGOCD_APP_REVISION": revision,
        "KUBE_VERSION": KUBE,
    }
    if preload:
        env["DRIFTGUARD_CMP_PRELOAD"] = "on"
    return env


def generate(caller: str, checkout: Path, env: dict[str, str]) -> None:
    proc = subprocess.run(
        [caller, "generate"], cwd=checkout / env["ARGOCD_APP_SOURCE_PATH"], env=env, capture_output=True
    )
    if proc.returncode != 0:
        raise SystemExit(f"generate failed: {proc.stderr.decode()[-800:]}")


def generate_all(
    caller: str,
    checkout: Path,
    apps: list[tuple[str, str, str]],
    home: Path,
    cache: Path,
    rev: str,
    preload: bool,
) -> tuple[float, float]:
    """Wall and CPU seconds of ``generate`` for every Application, one after another."""
    cpu = cpu_seconds(cache)
    start = time.perf_counter()
    for path, name, ns in apps:
        generate(caller, checkout, cmp_env(home, cache, path, name, ns, rev, preload))
    return time.perf_counter() - start, cpu_seconds(cache) - cpu


def cold(
    caller: str, checkout: Path, app: tuple[str, str, str], home: Path, cache: Path, preload: bool, reps: int
) -> float:
    """Median of ``reps`` misses: an Application name never rendered (its fingerprint is new)."""
    path, _, ns = app
    times = []
    for i in range(reps + 1):
        env = cmp_env(home, cache, path, f"cold-{os.getpid()}-{i}", ns, "cold", preload)
        start = time.perf_counter()
        generate(caller, checkout, env)
        if i:  # the first starts the preload server
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def stop_servers(root: Path) -> None:
    """SIGKILL the preload servers this run started (their command line names its cache dirs)."""
    marker = str(root).encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if b"cmp_plugin.preload" in cmdline and marker in cmdline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(entry.name), signal.SIGKILL)


def probe(root: Path) -> int:
    """One Application's hit, 30 times back to back and 30 times with a pause, against bare helm."""
    repo, apps = build(root, 1, 2)
    home = root / "home"
    home.mkdir()
    cache = root / "cache"
    path, name, ns = apps[0]
    env = cmp_env(home, cache, path, name, ns, "HEAD", True)

    def once(argv: list[str], env: dict[str, str]) -> float:
        start = time.perf_counter()
        subprocess.run(argv, cwd=repo / path, env=env, check=True, capture_output=True)
        return (time.perf_counter() - start) * 1000

    for _ in range(3):  # the miss, the server's start, a first hit
        once([FRONT, "generate"], env)
    back_to_back = [once([FRONT, "generate"], env) for _ in range(30)]
    paused = []
    for _ in range(30):
        time.sleep(0.1)  # the server has forked its next child
        paused.append(once([FRONT, "generate"], env))
    bare_argv = [HELM, "template", ".", "--name-template", name, "--namespace", ns, "--kube-version", KUBE]
    bare = [once(bare_argv, tool_env(home)) for _ in range(10)]
    true = [once(["/bin/true"], {}) for _ in range(30)]
    print(
        f"hit (ms): paused median {statistics.median(paused):.1f}, min {min(paused):.1f}; back to back "
        f"median {statistics.median(back_to_back):.1f}; bare helm template median {statistics.median(bare):.1f}; "
        f"/bin/true median {statistics.median(true):.1f}"
    )
    return 0


def main() -> int:
    quick = "--quick" in sys.argv
    clusters, services = (2, 19) if quick else (8, 19)
    print(f"load average before: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    # a run stopped with SIGTERM (or SIGINT, ignored in a background job) still stops its servers
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with tempfile.TemporaryDirectory(prefix="dg-monorepo-") as tmp:
        root = Path(tmp)
        try:
            return probe(root) if "--probe" in sys.argv else run(root, clusters, services)
        finally:
            stop_servers(root)


def run(root: Path, clusters: int, services: int) -> int:
    repo, apps = build(root, clusters, services)
    home = root / "home"
    home.mkdir()
    base, head = git(repo, "rev-parse", "HEAD~1"), git(repo, "rev-parse", "HEAD")
    n = len(apps)
    base_tree = root / "base"
    git(repo, "worktree", "add", "-q", "--detach", str(base_tree), base)

    # every variant renders every Application at base first, then at head (same cache dir, same
    # checkout directory as Argo CD's repo-server re-uses)
    variants = [
        ("shipped: native front + preload", FRONT, True),
        ("preload, no native front", PYTHON_CMP, True),
        ("no preload (no front either)", PYTHON_CMP, False),
    ]
    git(repo, "checkout", "-q", "--detach", head)
    bare = [bare_loop([repo], apps, home)]
    results = {}
    for label, caller, preload in variants:
        cache = root / f"cache-{len(results)}"
        git(repo, "checkout", "-q", "--detach", base)
        generate_all(caller, repo, apps, home, cache, base, preload)
        git(repo, "checkout", "-q", "--detach", head)
        t_head, c_head = generate_all(caller, repo, apps, home, cache, head, preload)
        t_cold = cold(caller, repo, apps[0], home, cache, preload, 7)
        results[label] = (t_head, c_head, t_cold)
    bare.append(bare_loop([repo], apps, home))
    bare_head, bare_cpu = statistics.mean(b[0] for b in bare), statistics.mean(b[1] for b in bare)
    print(f"(a) {n} Applications at the new revision, after all at the previous one (same cache dir):")
    print(
        f"    bare helm template loop: {bare_head:6.2f} s wall, {bare_cpu:6.2f} s CPU (mean of one before, one after)"
    )
    for label, (t_head, c_head, t_cold) in results.items():
        print(
            f"    {label:32} {t_head:6.2f} s wall, ratio {t_head / bare_head:.3f} (target <= 0.15); "
            f"{c_head:6.2f} s CPU, ratio {c_head / bare_cpu:.3f}; cold generate (a miss) {t_cold * 1000:6.1f} ms"
        )

    # (b) the PR check against the bare loop of both revisions
    git(repo, "checkout", "-q", "main")
    bare_both, bare_both_cpu = bare_loop([base_tree, repo], apps, home)
    env = {
        **tool_env(home),
        "DRIFTGUARD_HELM": HELM,
        "DRIFTGUARD_CMP_TOOL_READ_PATHS": str(Path(HELM).parent),
        "TMPDIR": str(home),
    }
    cpu = cpu_seconds()
    start = time.perf_counter()
    proc = subprocess.run(
        [PYTHON_CMP, "diff", "--base", "HEAD~1", "--head", "HEAD", "apps/", "--format", "json"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
    )
    t_diff = time.perf_counter() - start
    c_diff = cpu_seconds() - cpu
    if proc.returncode not in (0, 1):
        raise SystemExit(f"diff failed ({proc.returncode}): {proc.stderr[-800:]}")
    import json

    report = json.loads(proc.stdout)
    envs = report.get("environments") or report.get("diffs") or []
    changed = [e for e in envs if e.get("changed") or e.get("removed") or e.get("added")]
    print(
        f"(b) diff --base HEAD~1 --head HEAD apps/: {t_diff:6.2f} s for {len(envs)} environments "
        f"({len(changed)} with changes); bare loop of {2 * n} helm template: {bare_both:6.2f} s; "
        f"ratio {t_diff / bare_both:.3f} (target <= 0.15); CPU {c_diff:.2f} s vs {bare_both_cpu:.2f} s, "
        f"ratio {c_diff / bare_both_cpu:.3f}; cores {workers()}"
    )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


def workers() -> int:
    count = getattr(os, "process_cpu_count", None)
    return count() if count is not None else len(os.sched_getaffinity(0))


if __name__ == "__main__":
    shutil.which("git") or sys.exit("git is needed")
    raise SystemExit(main())
